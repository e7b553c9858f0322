package claude

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
)

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func TestSeedFreshDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "claude")
	if err := Seed(dir, "/workspace"); err != nil {
		t.Fatal(err)
	}
	st := readJSON(t, filepath.Join(dir, ".claude.json"))
	for _, k := range []string{"hasCompletedOnboarding", "bypassPermissionsModeAccepted"} {
		if st[k] != true {
			t.Errorf(".claude.json %s: got %v, want true", k, st[k])
		}
	}
	project, _ := st["projects"].(map[string]any)["/workspace"].(map[string]any)
	for _, k := range []string{"hasTrustDialogAccepted", "hasCompletedProjectOnboarding"} {
		if project[k] != true {
			t.Errorf("projects./workspace.%s: got %v, want true", k, project[k])
		}
	}
	if got := readJSON(t, filepath.Join(dir, "settings.json"))["skipDangerousModePermissionPrompt"]; got != true {
		t.Errorf("settings.json skipDangerousModePermissionPrompt: got %v, want true", got)
	}
	fi, err := os.Stat(filepath.Join(dir, ".claude.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf(".claude.json mode: got %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}

func TestSeedKeepsWhatClaudeCodeWrote(t *testing.T) {
	dir := t.TempDir()
	// As 2.1.328 leaves it after a run: the seed's keys migrated away,
	// state of its own, and a big number that must survive as written.
	state := `{"hasCompletedOnboarding":true,"projects":{"/workspace":{"hasTrustDialogAccepted":true,"lastSessionId":"abc","history":[1,2]},"/other":{"x":1}},` +
		`"firstStartTime":"2026-11-30T08:33:04.749Z","migrationVersion":15,"big":12345678901234567890,"userID":"4f40"}`
	settings := `{"model":"opus","effortLevel":"high"}`
	os.WriteFile(filepath.Join(dir, ".claude.json"), []byte(state), 0o600)
	os.WriteFile(filepath.Join(dir, "settings.json"), []byte(settings), 0o600)
	if err := Seed(dir, "/workspace"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, ".claude.json"))
	var st map[string]json.RawMessage
	json.Unmarshal(data, &st)
	for k, want := range map[string]string{"big": "12345678901234567890", "migrationVersion": "15", "userID": `"4f40"`,
		"firstStartTime": `"2026-11-30T08:33:04.749Z"`, "bypassPermissionsModeAccepted": "true"} {
		if got := string(st[k]); got != want {
			t.Errorf(".claude.json %s: got %s, want %s", k, got, want)
		}
	}
	projects := readJSON(t, filepath.Join(dir, ".claude.json"))["projects"].(map[string]any)
	ws := projects["/workspace"].(map[string]any)
	if ws["lastSessionId"] != "abc" || ws["hasCompletedProjectOnboarding"] != true || ws["history"] == nil {
		t.Errorf("projects./workspace: got %v, want its own keys kept and onboarding added", ws)
	}
	if projects["/other"] == nil {
		t.Errorf("projects./other was dropped")
	}
	se := readJSON(t, filepath.Join(dir, "settings.json"))
	if se["model"] != "opus" || se["effortLevel"] != "high" || se["skipDangerousModePermissionPrompt"] != true {
		t.Errorf("settings.json: got %v, want model and effort kept, prompt skipped", se)
	}
	// Seeding twice changes nothing more.
	before, _ := os.ReadFile(filepath.Join(dir, ".claude.json"))
	if err := Seed(dir, "/workspace"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, ".claude.json"))
	if string(before) != string(after) {
		t.Errorf("a second seed changed .claude.json:\n%s\nto\n%s", before, after)
	}
}

func TestSeedRefusesBadFilesAndChangesNothing(t *testing.T) {
	tests := []struct {
		name, file, content string
	}{
		{"state not JSON", ".claude.json", `{"hasCompletedOnboarding":tru`},
		{"state an array", ".claude.json", `[]`},
		{"state null", ".claude.json", `null`},
		{"projects not an object", ".claude.json", `{"projects":[]}`},
		{"project not an object", ".claude.json", `{"projects":{"/workspace":"yes"}}`},
		{"settings not JSON", "settings.json", `model: opus`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, tt.file), []byte(tt.content), 0o600)
			err := Seed(dir, "/workspace")
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("got %d files after a refused seed, want only %s", len(entries), tt.file)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, tt.file)); string(got) != tt.content {
				t.Errorf("%s: got %q, want it unchanged", tt.file, got)
			}
		})
	}
	if err := Seed(t.TempDir(), "workspace"); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("relative workdir: got %v, want ErrInvalid", err)
	}
}
