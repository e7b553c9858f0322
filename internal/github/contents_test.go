package github_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/testkit"
)

var _ forge.Files = (*github.Client)(nil)

func TestFileAtReadsTheDefaultBranchAndNamesItsCommit(t *testing.T) {
	gh, c, src := servedAppWith(t, map[string]string{".devcontainer/devcontainer.json": `{"image": "debian:12"}`, "big": strings.Repeat("x", 100)})
	ctx := context.Background()
	head, err := exec.Command("git", "-C", src, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	b, commit, err := c.FileAt(ctx, "acme", "app", ".devcontainer/devcontainer.json", 1<<20)
	if err != nil || string(b) != `{"image": "debian:12"}` || commit != strings.TrimSpace(string(head)) {
		t.Fatalf("got %q at %s (%v), want the file at %s", b, commit, err, head)
	}
	tests := []struct {
		name, path string
		max        int64
		class      error
	}{
		{"no such file", ".devcontainer.json", 1 << 20, errdefs.ErrNotFound},
		{"over the limit", "big", 99, errdefs.ErrTooLarge},
	}
	for _, tt := range tests {
		if _, _, err := c.FileAt(ctx, "acme", "app", tt.path, tt.max); !errors.Is(err, tt.class) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.class)
		}
	}
	// Without the App on the Repo there is nothing to read it with.
	if _, _, err := client(t, gh, true).FileAt(ctx, "acme", "none", ".devcontainer.json", 1<<20); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a Repo without the App: got %v, want ErrNotFound", err)
	}
}

// servedAppWith is servedApp with files committed first.
func servedAppWith(t *testing.T, files map[string]string) (*testkit.GitHub, *github.Client, string) {
	t.Helper()
	src := gitRepo(t)
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"-C", src, "add", "-A"}, {"-C", src, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "files"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	gh := testkit.NewGitHub(t)
	gh.InstallApp("acme/app")
	gh.ServeRepo(t, "acme/app", src)
	return gh, client(t, gh, true), src
}
