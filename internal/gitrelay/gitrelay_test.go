package gitrelay_test

import (
	"context"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/gitrelay"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

const (
	sessionID    = "1a2b3c4d-0000-4000-8000-000000000001"
	sessionToken = "kndl-session-token-for-the-test"
	prefix       = "kndl/1a2b3c4d/"
)

// rig is the fake GitHub serving acme/app (private, so a fetch needs the
// token too) and acme/other, a git relay holding a token for acme/app
// alone, and in front of it what the Runner's relay does: a Session
// token as Basic auth's password, 401 asking git for one without it.
type rig struct {
	gh     *testkit.GitHub
	relay  *gitrelay.Relay
	url    string // the relay's /git/
	token  string // the forge token the relay holds
	key    *rsa.PrivateKey
	mu     sync.Mutex
	pushed []gitrelay.Update
}

func newRig(t *testing.T) *rig {
	t.Helper()
	testenv.RequireCommand(t, "git")
	src := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", src},
		{"-C", src, "commit", "-q", "--allow-empty", "-m", "first"},
		{"-C", src, "branch", "other"},
		{"-C", src, "branch", prefix + "found"}, // under the prefix, but not made through the relay
	} {
		gitOK(t, "", args...)
	}
	gh := testkit.NewGitHub(t)
	gh.InstallApp("acme/app")
	gh.InstallApp("acme/other")
	gh.ServeRepo(t, "acme/app", src)
	gh.ServeRepo(t, "acme/other", src)
	gh.SetPrivate("acme/app", true)
	key, err := github.ParsePrivateKey(gh.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := github.New(github.Config{URL: gh.URL, APIURL: gh.URL, ClientID: gh.ClientID, ClientSecret: gh.ClientSecret, AppID: gh.AppID, PrivateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.MintToken(context.Background(), "acme", "app", forge.Push) // as the Hub mints it
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{gh: gh, token: tok.Value, key: key}
	r.relay = gitrelay.New(gitrelay.Options{Forge: github.Git{}, Pushed: func(_ context.Context, id string, took []gitrelay.Update) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if id == sessionID {
			r.pushed = append(r.pushed, took...)
		}
	}})
	if err := r.relay.Open(sessionID, gitrelay.Session{Repo: gh.RepoURL("acme/app"), Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	if err := r.relay.SetToken(sessionID, tok.Value); err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rest, ok := strings.CutPrefix(req.URL.Path, "/git/")
		if _, pw, _ := req.BasicAuth(); !ok || pw != sessionToken {
			w.Header().Set("WWW-Authenticate", `Basic realm="kndl"`)
			http.Error(w, "no live Session token", http.StatusUnauthorized)
			return
		}
		r.relay.ServeGit(w, req, sessionID, rest)
	}))
	t.Cleanup(front.Close)
	r.url = front.URL + "/git/"
	return r
}

// gitEnv is git's environment in these tests: no configuration of the
// machine's, no prompt, and as its only credential the Session token, as
// the Sandbox's credential helper gives it.
func gitEnv(home string) []string {
	return append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"KNDL_MOD_TOKEN="+sessionToken,
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=credential.helper",
		`GIT_CONFIG_VALUE_0=!f() { test "$1" = get && echo username=kndl && echo "password=$KNDL_MOD_TOKEN"; }; f`)
}

func git(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.Command("git", args...)
	cmd.Env = gitEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func gitOK(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := git(t, dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return out
}

func (r *rig) clone(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app")
	gitOK(t, "", "clone", "-q", r.url+"acme/app.git", dir)
	return dir
}

func (r *rig) took() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var refs []string
	for _, u := range r.pushed {
		refs = append(refs, u.Ref)
	}
	return refs
}

func TestGitClonesFetchesAndPushesTheSessionsOwnBranchesThroughTheRelay(t *testing.T) {
	r := newRig(t)
	ws := r.clone(t)
	gitOK(t, ws, "commit", "-q", "--allow-empty", "-m", "work")
	out := gitOK(t, ws, "push", "origin", "HEAD:"+prefix+"x")
	if !strings.Contains(out, "[new branch]      HEAD -> "+prefix+"x") {
		t.Errorf("git push printed:\n%s\nwant the new branch %sx", out, prefix)
	}
	if got := r.gh.Branches(t, "acme/app"); !slices.Contains(got, prefix+"x") {
		t.Fatalf("GitHub's branches: %v, want %sx", got, prefix)
	}
	// A fast-forward, then a force-push, of the branch it made.
	gitOK(t, ws, "commit", "-q", "--allow-empty", "-m", "more")
	gitOK(t, ws, "push", "origin", "HEAD:"+prefix+"x")
	gitOK(t, ws, "commit", "-q", "--amend", "--allow-empty", "-m", "amended")
	gitOK(t, ws, "push", "--force", "origin", "HEAD:"+prefix+"x")
	head := strings.TrimSpace(gitOK(t, ws, "rev-parse", "HEAD"))
	if got := strings.Fields(gitOK(t, "", "ls-remote", r.url+"acme/app.git", prefix+"x")); len(got) == 0 || got[0] != head {
		t.Errorf("%sx at GitHub, through the relay: %v, want %s", prefix, got, head)
	}
	want := []string{"refs/heads/" + prefix + "x", "refs/heads/" + prefix + "x", "refs/heads/" + prefix + "x"}
	if got := r.took(); !slices.Equal(got, want) {
		t.Errorf("the pushes the relay reported: %v, want %v", got, want)
	}
	gitOK(t, ws, "fetch", "-q", "origin")
	if out := gitOK(t, ws, "branch", "-r"); !strings.Contains(out, "origin/other") {
		t.Errorf("the branches a fetch brought:\n%s\nwant origin/other", out)
	}
}

// TestTheRelayRefusesEveryPushThatIsNotTheSessionsOwn: each refusal as git
// prints it, the ref's reason and the line naming the branch to use, and
// GitHub unchanged.
func TestTheRelayRefusesEveryPushThatIsNotTheSessionsOwn(t *testing.T) {
	r := newRig(t)
	ws := r.clone(t)
	gitOK(t, ws, "commit", "-q", "--allow-empty", "-m", "work")
	gitOK(t, ws, "push", "-q", "origin", "HEAD:"+prefix+"mine")
	gitOK(t, ws, "fetch", "-q", "origin")
	const use = "remote: kndl: this Session pushes only to new branches under " + prefix + ", and updates only those it made. Push to one of its own instead: git push -u origin HEAD:" + prefix
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"the default branch", []string{"push", "origin", "HEAD:main"},
			[]string{"! [remote rejected] HEAD -> main (not this Session's branch; push to " + prefix + "…)", use + "main"}},
		{"another branch", []string{"push", "--force", "origin", "HEAD:other"},
			[]string{"! [remote rejected] HEAD -> other (not this Session's branch; push to " + prefix + "…)", use + "other"}},
		{"a new branch elsewhere", []string{"push", "origin", "HEAD:feature/x"},
			[]string{"! [remote rejected] HEAD -> feature/x (not this Session's branch; push to " + prefix + "…)", use + "x"}},
		{"a delete of its own", []string{"push", "origin", ":" + prefix + "mine"},
			[]string{"! [remote rejected] " + prefix + "mine (kndl does not delete branches; delete it on GitHub)"}},
		{"a delete of another", []string{"push", "origin", ":other"},
			[]string{"! [remote rejected] other (not this Session's branch; push to " + prefix + "…)"}},
		{"a force-push to one under its prefix it did not make", []string{"push", "--force", "origin", "HEAD:" + prefix + "found"},
			[]string{"! [remote rejected] HEAD -> " + prefix + "found (not made by this Session: kndl does not update it)", use + "work"}},
		{"a tag", []string{"push", "origin", "HEAD:refs/tags/v1"},
			[]string{"! [remote rejected] HEAD -> v1 (kndl pushes branches only, under " + prefix + ")"}},
		{"its own with another", []string{"push", "origin", "HEAD:" + prefix + "y", "HEAD:main"},
			[]string{"! [remote rejected] HEAD -> " + prefix + "y (not pushed: another ref in this push was refused)",
				"! [remote rejected] HEAD -> main (not this Session's branch"}},
	}
	before := r.gh.Branches(t, "acme/app")
	heads := gitOK(t, "", "ls-remote", r.url+"acme/app.git")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := git(t, ws, tt.args...)
			if err == nil {
				t.Fatalf("git %v succeeded:\n%s", tt.args, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("git %v printed:\n%s\nwant a line with %q", tt.args, out, w)
				}
			}
		})
	}
	if got := r.gh.Branches(t, "acme/app"); !slices.Equal(got, before) {
		t.Errorf("GitHub's branches after the refusals: %v, want %v as before", got, before)
	}
	if got := gitOK(t, "", "ls-remote", r.url+"acme/app.git"); got != heads {
		t.Errorf("GitHub's refs after the refusals:\n%s\nwant as before:\n%s", got, heads)
	}
	if got := r.took(); !slices.Equal(got, []string{"refs/heads/" + prefix + "mine"}) {
		t.Errorf("the pushes the relay reported: %v, want the first alone", got)
	}
}

// TestTheRelayServesTheSessionsRepoAlone: another Repo, one the token
// doesn't reach, is refused by the relay before GitHub is asked, with a
// line git prints; without the Session token git gets nothing.
func TestTheRelayServesTheSessionsRepoAlone(t *testing.T) {
	r := newRig(t)
	fetches := r.gh.Calls("git_fetch")
	out, err := git(t, "", "ls-remote", r.url+"acme/other.git")
	if err == nil || !strings.Contains(out, "remote: kndl: this Session reaches acme/app alone through its git relay, not acme/other") {
		t.Errorf("git ls-remote of another Repo: %v\n%s\nwant a refusal naming the Session's Repo", err, out)
	}
	if n := r.gh.Calls("git_fetch"); n != fetches {
		t.Errorf("GitHub was asked %d times for another Repo, want never", n-fetches)
	}
	cmd := exec.Command("git", "ls-remote", r.url+"acme/app.git")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "could not read Username") {
		t.Errorf("git without the Session token: %v\n%s\nwant it asked for a credential it doesn't have", err, out)
	}
	for _, p := range []string{"acme/app.git/objects/info/packs", "acme/app.git/HEAD", "acme/app.git/info/lfs/objects/batch"} {
		req, _ := http.NewRequest(http.MethodGet, r.url+p, nil)
		req.SetBasicAuth("kndl", sessionToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404 (the relay serves smart HTTP alone)", p, resp.StatusCode)
		}
	}
}

// TestAPushWithoutAForgeTokenSaysSo: a relay that has no token for the
// Session yet refuses a push with a line git prints, not GitHub's 401.
func TestAPushWithoutAForgeTokenSaysSo(t *testing.T) {
	r := newRig(t)
	ws := r.clone(t)
	r.relay.SetToken(sessionID, "")
	host := strings.TrimPrefix(r.gh.URL, "http://")
	for _, args := range [][]string{{"push", "origin", "HEAD:" + prefix + "x"}, {"fetch", "origin"}} {
		out, err := git(t, ws, args...)
		if want := "remote: kndl: " + host + " refused acme/app (401): the Runner holds no GitHub token for this Session"; err == nil || !strings.Contains(out, want) {
			t.Errorf("git %v without a forge token: %v\n%s\nwant the relay's line %q", args, err, out, want)
		}
	}
}
