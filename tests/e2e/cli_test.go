package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/testkit"
)

// kndl runs the kndl binary as this System's dev user and returns its
// stdout, stderr and exit code.
func (s *System) kndl(stdin string, args ...string) (string, string, int) {
	s.t.Helper()
	cfg := filepath.Join(s.Home, "..", "cli.json")
	if _, err := os.Stat(cfg); err != nil {
		b, _ := json.Marshal(apiclient.Config{HubURL: s.URL, Token: s.cli})
		os.WriteFile(cfg, b, 0o600)
	}
	cmd := exec.Command(kndlBinary(s.t), args...)
	cmd.Env = append(os.Environ(), "KNDL_CONFIG="+cfg)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func TestCLIDrivesASession(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Model.On(testkit.PromptContains("cli first"), testkit.Text("First answer from the CLI test."))
	s.Model.On(testkit.PromptContains("from stdin"), testkit.Text("Second answer."))
	repo := s.Repo()

	out, errOut, code := s.kndl("", "new", "--repo", repo, "--json", "cli first prompt")
	var v api.SessionView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.ID == "" {
		t.Fatalf("kndl new: exit %d, %q %q", code, out, errOut)
	}
	out, errOut, code = s.kndl("", "watch", v.ID, "--until-idle")
	if code != 0 || !strings.Contains(out, "claude: First answer from the CLI test.") || !strings.Contains(out, "> cli first prompt") {
		t.Fatalf("kndl watch: exit %d\n%s\n%s", code, out, errOut)
	}

	// A prompt from stdin, and watch resuming after the last sequence number.
	evs := s.Events(v.ID)
	last := evs[len(evs)-1].Seq
	if _, errOut, code := s.kndl("a prompt\nfrom stdin\n", "prompt", v.ID, "-"); code != 0 {
		t.Fatalf("kndl prompt: exit %d %s", code, errOut)
	}
	out, _, _ = s.kndl("", "watch", v.ID, "--after", itoa(last), "--until-idle", "--json")
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e api.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("watch --json line %q: %v", line, err)
		}
		if e.Seq <= last {
			t.Fatalf("watch --after %d sent event %d", last, e.Seq)
		}
		kinds = append(kinds, e.Kind)
	}
	if !strings.Contains(strings.Join(kinds, " "), "prompt") || !strings.Contains(out, "Second answer.") {
		t.Fatalf("watch after %d: %s", last, out)
	}

	out, _, code = s.kndl("", "ls")
	if code != 0 || !strings.Contains(out, v.ID) || !strings.Contains(out, "active") {
		t.Fatalf("kndl ls: exit %d\n%s", code, out)
	}
	out, _, code = s.kndl("", "show", v.ID, "--json")
	if code != 0 || !strings.Contains(out, `"events"`) {
		t.Fatalf("kndl show --json: exit %d\n%s", code, out)
	}

	// Bad input: a clear message and a non-zero exit.
	for _, args := range [][]string{
		{"show", "00000000-0000-0000-0000-000000000000"},
		{"prompt", v.ID, ""},
		{"new", "--repo", repo, "--effort", "extreme", "x"},
	} {
		_, errOut, code := s.kndl("", args...)
		if code == 0 || errOut == "" {
			t.Errorf("kndl %v: exit %d, stderr %q; want a failure with a message", args, code, errOut)
		}
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
