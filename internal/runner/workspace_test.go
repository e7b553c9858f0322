package runner

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// loopback lets a clone reach the tests' servers, on loopback, as kndl
// dev's Runner does.
var loopback = &outbound.Dialer{Allow: outbound.AllowLoopback}

func gitRepo(t *testing.T) string {
	t.Helper()
	testenv.RequireCommand(t, "git")
	dir := filepath.Join(t.TempDir(), "src")
	for _, args := range [][]string{{"init", "-q", dir}, {"-C", dir, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "one"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	// A hook in the source never reaches a clone; this proves the clone runs none.
	os.WriteFile(filepath.Join(dir, ".git", "hooks", "post-checkout"), []byte("#!/bin/sh\ntouch \"$PWD/HOOK-RAN\"\n"), 0o755)
	return dir
}

func TestCloneRunsNoHooksAndExcludesWorktrees(t *testing.T) {
	src := gitRepo(t)
	dst := filepath.Join(t.TempDir(), "workspace")
	if err := cloneWorkspace(context.Background(), loopback, src, "", dst, func(string) {}); err != nil {
		t.Fatal(err)
	}
	hooks, _ := os.ReadDir(filepath.Join(dst, ".git", "hooks"))
	if len(hooks) != 0 {
		t.Errorf("the clone has hooks: %v", hooks)
	}
	if _, err := os.Stat(filepath.Join(dst, "HOOK-RAN")); err == nil {
		t.Error("a hook ran during the clone")
	}
	cfg, _ := os.ReadFile(filepath.Join(dst, ".git", "config"))
	if strings.Contains(string(cfg), "hooksPath") || strings.Contains(string(cfg), "fsmonitor") {
		t.Errorf("the clone's config carries the Runner's own settings:\n%s", cfg)
	}
	ex, _ := os.ReadFile(filepath.Join(dst, ".git", "info", "exclude"))
	if !strings.Contains(string(ex), ".claude/worktrees/") {
		t.Errorf("info/exclude lacks .claude/worktrees/:\n%s", ex)
	}
	// A wake keeps the Workspace as it is.
	os.WriteFile(filepath.Join(dst, "work.txt"), []byte("unpushed"), 0o644)
	if err := cloneWorkspace(context.Background(), loopback, src, "", dst, func(string) { t.Error("cloned again") }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "work.txt")); string(b) != "unpushed" {
		t.Error("a second start lost the Workspace's work")
	}
}

func TestAFailedCloneSaysWhyWithoutItsCredentials(t *testing.T) {
	testenv.RequireCommand(t, "git")
	dst := filepath.Join(t.TempDir(), "workspace")
	err := cloneWorkspace(context.Background(), loopback, "https://someone:s3cret-passw0rd@127.0.0.1:1/repo.git", "", dst, func(string) {})
	if err == nil {
		t.Fatal("a clone from a closed port succeeded")
	}
	if strings.Contains(err.Error(), "s3cret-passw0rd") {
		t.Fatalf("the error shows the credential: %v", err)
	}
	if !strings.Contains(err.Error(), "git clone") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("the error does not say what failed: %v", err)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Fatal("a failed clone left a Workspace")
	}
	if m, _ := filepath.Glob(dst + "*"); len(m) != 0 {
		t.Fatalf("a failed clone left %v", m)
	}
}

// TestTheHostCloneGetsNoneOfTheRunnersEnvironmentOrGitConfig: a filter in
// the host's global git config never runs on a Repo's files, and the
// clone's git sees no RUNNER_TOKEN.
func TestTheHostCloneGetsNoneOfTheRunnersEnvironmentOrGitConfig(t *testing.T) {
	src := gitRepo(t)
	seen := filepath.Join(t.TempDir(), "filter-saw")
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[filter \"evil\"]\n\tclean = cat\n\tsmudge = sh -c 'env > "+seen+"; cat'\n\trequired = true\n"), 0o644)
	t.Setenv("HOME", home)
	t.Setenv("RUNNER_TOKEN", "kndlr_must-not-reach-the-clone")
	os.WriteFile(filepath.Join(src, ".gitattributes"), []byte("*.txt filter=evil\n"), 0o644)
	os.WriteFile(filepath.Join(src, "a.txt"), []byte("data\n"), 0o644)
	for _, args := range [][]string{{"-C", src, "add", "."}, {"-C", src, "-c", "user.name=t", "-c", "user.email=t@e", "-c", "filter.evil.clean=cat", "commit", "-q", "-m", "two"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	dst := filepath.Join(t.TempDir(), "workspace")
	if err := cloneWorkspace(context.Background(), loopback, src, "", dst, func(string) {}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(seen); err == nil {
		t.Fatalf("the host's filter ran on the clone, seeing:\n%s", b)
	}
	for _, kv := range cloneEnv(t.TempDir()) {
		if strings.HasPrefix(kv, "RUNNER_") || strings.HasPrefix(kv, "HOME="+home) {
			t.Fatalf("the clone's environment has %s", kv)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "a.txt")); string(b) != "data\n" {
		t.Fatalf("a.txt = %q", b)
	}
}

// TestTheCloneTakesItsTokenFromItsEnvironmentAlone: a private Repo clones
// with the App's read-only token and not without it, and the token is in
// no file of the clone, not in origin's URL, and not in what the clone
// reports.
func TestTheCloneTakesItsTokenFromItsEnvironmentAlone(t *testing.T) {
	gh := testkit.NewGitHub(t)
	gh.InstallApp("acme/app")
	gh.ServeRepo(t, "acme/app", gitRepo(t))
	gh.SetPrivate("acme/app", true)
	key, err := github.ParsePrivateKey(gh.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := github.New(github.Config{URL: gh.URL, APIURL: gh.URL, AppID: gh.AppID, PrivateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.RepoToken(context.Background(), "acme", "app", github.ClonePermissions)
	if err != nil {
		t.Fatal(err)
	}
	repo := gh.RepoURL("acme/app")
	if err := cloneWorkspace(context.Background(), loopback, repo, "", filepath.Join(t.TempDir(), "w"), func(string) {}); err == nil {
		t.Fatal("the private Repo cloned without a token: this test proves nothing")
	}
	dst := filepath.Join(t.TempDir(), "workspace")
	var said strings.Builder
	if err := cloneWorkspace(context.Background(), loopback, repo, tok.Value, dst, func(l string) { said.WriteString(l) }); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(said.String(), tok.Value) {
		t.Errorf("the clone reported its token: %s", said.String())
	}
	out, err := exec.Command("git", "-C", dst, "remote", "get-url", "origin").Output()
	if err != nil || strings.TrimSpace(string(out)) != repo {
		t.Errorf("origin is %q (%v), want the Repo's plain URL %s", out, err, repo)
	}
	filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(path); strings.Contains(string(b), tok.Value) {
				t.Errorf("%s holds the clone token", path)
			}
		}
		return nil
	})
}

// TestTheHostCloneReachesOnlyWhatTheRunnerAllows: git clones through the
// Runner's outbound checks: over http a Repo whose name resolves to a
// cloud's metadata address, or on loopback with nothing allowed, or that
// redirects to such a name, is refused, naming RUNNER_OUTBOUND_ALLOW; over
// ssh its host is checked before git runs; with loopback allowed the same
// Repo clones. Nothing but loopback is connected to.
func TestTheHostCloneReachesOnlyWhatTheRunnerAllows(t *testing.T) {
	gh := testkit.NewGitHub(t)
	gh.ServeRepo(t, "acme/app", gitRepo(t))
	repo := gh.RepoURL("acme/app")
	u, _ := url.Parse(repo)
	port := u.Port()
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://metadata.test:"+port+r.URL.Path+"?"+r.URL.RawQuery, http.StatusFound)
	}))
	t.Cleanup(moved.Close)
	var names testkit.Resolver
	names.Set("metadata.test", "169.254.169.254")
	names.Set("git.test", "127.0.0.1")
	var dials testkit.Dials
	dialer := func(allow outbound.Allow) *outbound.Dialer {
		return &outbound.Dialer{Allow: allow, Setting: "RUNNER_OUTBOUND_ALLOW", Resolver: &names, Connect: dials.Connect}
	}
	for _, tt := range []struct{ repo, why string }{
		{"http://metadata.test:" + port + u.Path, "169.254.0.0/16"},
		{"http://git.test:" + port + u.Path, "127.0.0.0/8"},
		{moved.URL + u.Path, "169.254.0.0/16"},
		{"git@metadata.test:acme/app.git", "169.254.0.0/16"},
		{"ssh://git@metadata.test:2222/acme/app.git", "169.254.0.0/16"},
	} {
		allow := outbound.Allow{}
		if tt.repo == moved.URL+u.Path {
			allow = outbound.AllowLoopback
		}
		err := cloneWorkspace(context.Background(), dialer(allow), tt.repo, "", filepath.Join(t.TempDir(), "w"), func(string) {})
		if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), tt.why) || !strings.Contains(err.Error(), "RUNNER_OUTBOUND_ALLOW") {
			t.Errorf("%s: got %v, want refused in %s naming RUNNER_OUTBOUND_ALLOW", tt.repo, err, tt.why)
		}
	}
	if err := cloneWorkspace(context.Background(), dialer(outbound.AllowLoopback), "http://git.test:"+port+u.Path, "", filepath.Join(t.TempDir(), "w"), func(string) {}); err != nil {
		t.Fatalf("a clone from an allowed loopback address: %v", err)
	}
	for _, a := range dials.All() {
		if ap, err := netip.ParseAddrPort(a); err != nil || !ap.Addr().IsLoopback() {
			t.Errorf("the clone connected to %s", a)
		}
	}
}
