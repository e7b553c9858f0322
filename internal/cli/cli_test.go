package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
)

func TestParseTakesFlagsAnywhere(t *testing.T) {
	tests := []struct {
		args []string
		pos  []string
		json bool
	}{
		{[]string{"ID", "--json"}, []string{"ID"}, true},
		{[]string{"--json", "ID", "text"}, []string{"ID", "text"}, true},
		{[]string{"ID", "--", "--json"}, []string{"ID", "--json"}, false},
		{[]string{"ID", "-"}, []string{"ID", "-"}, false},
		{nil, nil, false},
	}
	for _, tt := range tests {
		fs := Flags(IO{Stderr: &bytes.Buffer{}}, "t")
		j := fs.Bool("json", false, "")
		pos, err := Parse(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.pos) || *j != tt.json {
			t.Errorf("Parse(%q) = %q json=%v, %v; want %q json=%v", tt.args, pos, *j, err, tt.pos, tt.json)
		}
	}
}

func TestLookupPicksTheLongestCommand(t *testing.T) {
	tests := []struct {
		args []string
		name string
		rest []string
	}{
		{[]string{"runner"}, "runner", []string{}},
		{[]string{"runner", "ls", "--json"}, "runner ls", []string{"--json"}},
		{[]string{"runner", "token", "create", "--name", "x"}, "runner token create", []string{"--name", "x"}},
		{[]string{"var", "set", "--repo", "r", "K"}, "var set", []string{"--repo", "r", "K"}},
		{[]string{"nope"}, "", nil},
	}
	// The Runner's commands are internal/daemon's; two stand in for them.
	cmds := append(commands(), Command{Name: "runner"}, Command{Name: "runner token create"})
	for _, tt := range tests {
		c, rest := lookup(cmds, tt.args)
		name := ""
		if c != nil {
			name = c.Name
		}
		if name != tt.name || (c != nil && !slices.Equal(rest, tt.rest)) {
			t.Errorf("lookup(%q) = %q %q, want %q %q", tt.args, name, rest, tt.name, tt.rest)
		}
	}
}

func TestRunSaysWhatWentWrong(t *testing.T) {
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"help"}, 0, "Commands:"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"show"}, 2, "usage: kndl show"},
		{[]string{"var", "set"}, 2, "usage: kndl var set (--repo URL | --shared)"},
		{[]string{"env", "edit", "--repo", "r", "--follow"}, 1, "--follow goes with --from-devcontainer"},
		{[]string{"env", "edit", "--repo", "r", "--from-devcontainer", "--image", "x"}, 1, "--from-devcontainer makes the draft from the file alone"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), tt.args, IO{Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader(""),
			Getenv: func(string) string { return "" }})
		if code != tt.code || !strings.Contains(errOut.String(), tt.err) {
			t.Errorf("kndl %q: exit %d, stderr %q; want %d and %q", tt.args, code, errOut.String(), tt.code, tt.err)
		}
	}
	// Every command a person runs is listed; the Sandbox's helpers are not.
	var errOut bytes.Buffer
	Run(context.Background(), nil, IO{Stdout: &bytes.Buffer{}, Stderr: &errOut, Getenv: func(string) string { return "" }})
	for _, c := range commands() {
		if listed := strings.Contains(errOut.String(), "  "+c.Name+" "); listed == c.Hidden {
			t.Errorf("command %q: listed=%v, hidden=%v", c.Name, listed, c.Hidden)
		}
	}
}

// TestClaudeEditorPutsTheStagedPromptInTheFile: Claude Code's external
// editor writes the staged prompt over the file byte for byte, and with
// nothing staged leaves the file as it is.
func TestClaudeEditorPutsTheStagedPromptInTheFile(t *testing.T) {
	dir := t.TempDir()
	staged, file := filepath.Join(dir, "prompt"), filepath.Join(dir, "claude-prompt.md")
	prompt := "a\ttab, e\u0301, 𝄞, CR LF\r\n and a trailing newline\n"
	os.WriteFile(file, []byte("what Claude Code had"), 0o600)
	if err := claudeEditor(context.Background(), IO{}, []string{staged, file}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "what Claude Code had" {
		t.Fatalf("with nothing staged the file holds %q, want it unchanged", b)
	}
	os.WriteFile(staged, []byte(prompt), 0o600)
	if err := claudeEditor(context.Background(), IO{}, []string{staged, file}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != prompt {
		t.Fatalf("the file holds %q, want %q", b, prompt)
	}
}

// TestFromDevcontainerTakesAPathOrNone: --from-devcontainer alone is the
// usual places, =PATH one file; either may follow.
func TestFromDevcontainerTakesAPathOrNone(t *testing.T) {
	tests := []struct {
		args   []string
		path   string
		follow bool
	}{
		{[]string{"--from-devcontainer"}, "", false},
		{[]string{"--from-devcontainer=.devcontainer/go/devcontainer.json", "--follow"}, ".devcontainer/go/devcontainer.json", true},
	}
	for _, tt := range tests {
		f := &envEditFlags{}
		fs := Flags(IO{Stderr: &bytes.Buffer{}}, "env edit")
		check := f.define(fs)
		if _, err := Parse(fs, tt.args); err != nil || check() != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if !f.from.on || f.from.path != tt.path || f.set["follow"] != tt.follow {
			t.Errorf("%q: from %+v follow %v, want path %q follow %v", tt.args, f.from, f.set["follow"], tt.path, tt.follow)
		}
	}
}

// TestPortsTakesPortsWithOrWithoutALabel: --ports is port or port=label,
// comma-separated, "" for none; a label may hold = and spaces.
func TestPortsTakesPortsWithOrWithoutALabel(t *testing.T) {
	tests := []struct {
		in   string
		want []protocol.OfferedPort
		err  string
	}{
		{"3000=Web app, 8080", []protocol.OfferedPort{{Port: 3000, Label: "Web app"}, {Port: 8080}}, ""},
		{"5432=db=primary", []protocol.OfferedPort{{Port: 5432, Label: "db=primary"}}, ""},
		{"", nil, ""},
		{"web=3000", nil, `--ports "web=3000": want port or port=label`},
	}
	for _, tt := range tests {
		got, err := portsFlag(tt.in)
		if !reflect.DeepEqual(got, tt.want) || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%q: got %+v, %v; want %+v, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}
