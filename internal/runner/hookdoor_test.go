package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAModCopyPostsToTheDoorOnlyWhereTheSandboxsInitServesOne: a Claude
// Code started in a Sandbox this Runner booted (hookDoorFile) gets http
// hooks to the hook door; one in a Sandbox an earlier Runner booted, whose
// init serves none, keeps the command hooks, which reach the relay
// themselves.
func TestAModCopyPostsToTheDoorOnlyWhereTheSandboxsInitServesOne(t *testing.T) {
	for _, booted := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "mod"), 0o755); err != nil {
			t.Fatal(err)
		}
		if booted {
			if err := os.WriteFile(filepath.Join(dir, hookDoorFile), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := freshMod(filepath.Join(dir, "mod"), "1"); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "mod", "1", "hub-link", "hooks", "hooks.json"))
		if err != nil {
			t.Fatal(err)
		}
		toDoor := strings.Contains(string(b), `"url": "http://127.0.0.1:7379/mod/hook"`)
		commands := strings.Count(string(b), `"type": "command"`)
		if booted && (!toDoor || commands != 1) || !booted && (toDoor || commands < 12) {
			t.Errorf("booted by this Runner %v: got hooks to the door %v, %d command hooks; want the door and SessionStart's command alone, or all command hooks", booted, toDoor, commands)
		}
	}
}
