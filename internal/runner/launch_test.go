package runner

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/testkit"
)

// TestClaudeCodeIsFetchedForTheCLibraryTheBuildFound: Claude Code's install
// begun beside the Build, for the C library the pulled image's files show,
// is the one a start takes when the Build's probe agrees; when the probe
// says otherwise, the start installs the other build from the registry.
func TestClaudeCodeIsFetchedForTheCLibraryTheBuildFound(t *testing.T) {
	installed := testkit.RealClaude(t) // the glibc build, in the test cache
	home := t.TempDir()
	if err := os.Symlink(filepath.Dir(filepath.Dir(installed.Dir)), filepath.Join(home, "claude-code")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer registry.Close()
	r := &Runner{cfg: Config{Home: home, NPMRegistry: registry.URL + "/"}}
	ctx := context.Background()

	glibcRoot, muslRoot := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(muslRoot, "lib"), 0o755)
	os.WriteFile(filepath.Join(muslRoot, "lib", "ld-musl-x86_64.so.1"), nil, 0o755)
	if muslRootfs(glibcRoot) || !muslRootfs(muslRoot) {
		t.Fatalf("muslRootfs: a glibc root %v, a musl root %v", muslRootfs(glibcRoot), muslRootfs(muslRoot))
	}

	f := claudeFetch{r: r, logf: func(string, ...any) {}}
	f.start(ctx, muslRootfs(glibcRoot))
	bin, err := f.result(ctx, false)
	if err != nil || bin.Variant != claude.Glibc || bin.Integrity != installed.Integrity {
		t.Fatalf("the begun install the probe agrees with: %+v, %v; want the installed %+v", bin, err, installed)
	}
	if len(asked) != 0 {
		t.Errorf("an installed build was asked of the registry: %v", asked)
	}

	f = claudeFetch{r: r, logf: func(string, ...any) {}}
	f.start(ctx, false)
	if _, err := f.result(ctx, true); err == nil {
		t.Fatal("the musl build was taken from nowhere")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 || !strings.Contains(asked[len(asked)-1], "musl") {
		t.Errorf("a musl image's start asked the registry for %v, want the musl build", asked)
	}
}
