package devcontainer_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/devcontainer"
	"kndl.dev/kndl/internal/testenv"
)

// TestTheScriptsRunEachCommandFormAsTheSpecificationSays runs the scripts
// a file makes as the Build runs them (bash -e): a string in a shell, an
// array as its words with no shell (quotes and $ kept), an object's
// commands all at once, each of which must succeed; a failing command
// stops the script.
func TestTheScriptsRunEachCommandFormAsTheSpecificationSays(t *testing.T) {
	testenv.RequireCommand(t, "bash")
	dir := t.TempDir()
	out := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name, file string
		fails      bool
		want       map[string]string // file in dir: its contents
	}{
		{"each form", `{
			"onCreateCommand": "echo one > ` + out("string") + ` && cd / && pwd >> ` + out("string") + `",
			"updateContentCommand": ["sh", "-c", "printf %s \"$0\" > ` + out("array") + `", "it's $HOME"],
			"postCreateCommand": {"a": "echo a > ` + out("a") + `", "b": ["touch", "` + out("b") + `"]},
		}`, false, map[string]string{"string": "one\n/\n", "array": "it's $HOME", "a": "a\n", "b": ""}},
		{"a parallel command failing fails the script", `{
			"onCreateCommand": {"ok": "true", "bad": "exit 3"},
			"postCreateCommand": "touch ` + out("after") + `",
		}`, true, nil},
		{"a failing command stops the script", `{
			"onCreateCommand": ["false"],
			"postCreateCommand": "touch ` + out("after") + `",
		}`, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := devcontainer.Read(context.Background(), []byte(tt.file), devcontainer.Sources{})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-e", "-s")
			cmd.Stdin = strings.NewReader(d.Config.Bootstrap)
			got, err := cmd.CombinedOutput()
			if (err != nil) != tt.fails {
				t.Fatalf("the script: %v %s, want failing %v\n%s", err, got, tt.fails, d.Config.Bootstrap)
			}
			if _, err := os.Stat(out("after")); tt.fails && err == nil {
				t.Errorf("the command after the failing one ran")
			}
			for name, want := range tt.want {
				if b, err := os.ReadFile(out(name)); err != nil || string(b) != want {
					t.Errorf("%s: got %q (%v), want %q", name, b, err, want)
				}
			}
		})
	}
}
