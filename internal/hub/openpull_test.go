package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// postAs POSTs body to path as the holder of token: the status and the
// answer's message.
func postAs(t *testing.T, f *fixture, token, path string, body any) (int, string) {
	t.Helper()
	status, raw := askAs(t, f, token, http.MethodPost, path, body)
	return status, messageOf(raw)
}

// pushedBranch serves acme/app on the fake GitHub with a branch that has a
// commit main lacks, as a Session's push leaves it.
func pushedBranch(t *testing.T, f *fixture, gh *testkit.GitHub, branch string) {
	t.Helper()
	testenv.RequireCommand(t, "git")
	src := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		args = append([]string{"-C", src, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("commit", "-q", "--allow-empty", "-m", "first")
	gh.ServeRepo(t, "acme/app", src)
	tok, err := f.hub.guard.gh.RepoToken(context.Background(), "acme", "app", github.SandboxPermissions)
	if err != nil {
		t.Fatal(err)
	}
	git("checkout", "-q", "-b", branch)
	git("commit", "-q", "--allow-empty", "-m", "the fix")
	git("push", "-q", strings.Replace(gh.RepoURL("acme/app"), "://", "://x-access-token:"+tok.Value+"@", 1), branch)
}

// TestOnlyTheCreatorOpensAPullRequestFromAPushedBranch: POST
// /api/sessions/{id}/pulls opens the pull request as the App, from the
// branch the Session pushed into the default branch, its body ending with
// a line naming the Creator, Sensitive shapes masked; a watcher is refused
// with 403 and someone without access as if it were not there; a branch
// the Session did not push, an empty title, a Creator GitHub gives no push
// permission and a second pull request GitHub refuses are each refused,
// saying why.
func TestOnlyTheCreatorOpensAPullRequestFromAPushedBranch(t *testing.T) {
	gh := testkit.NewGitHub(t)
	f := newFixture(t, withGitHub(gh, time.Minute), func(c *Config) { c.PublicURL = "https://kndl.example" })
	ctx := context.Background()
	olivia, oliviaTok := member(t, f, "olivia")
	_, bobTok := member(t, f, "bob")
	rita, ritaTok := member(t, f, "rita")
	_, noraTok := member(t, f, "nora")
	gh.InstallApp("acme/app")
	for _, login := range []string{"olivia", "bob", "rita"} {
		gh.SetCollaborator("acme/app", login, true)
	}
	gh.SetReadOnly("acme/app", "rita", true)
	pushedBranch(t, f, gh, "kndl/fix")
	repo, _ := f.store.Repos.EnsureRepo(ctx, gh.RepoURL("acme/app"), "acme/app")
	session := func(creator store.User, branch string) string {
		s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: creator.ID, RunnerID: f.runner.ID, Title: "Fix the login"})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.store.Branches.AddSessionBranches(ctx, s.ID, []string{branch}, time.Now(), 20); err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	// A branch is one Session's: rita's pushed its own.
	id, ritas := session(olivia, "kndl/fix"), session(rita, "kndl/rita")
	path := "/api/sessions/" + id + "/pulls"
	secret := "ghp_O9hFAiOh29oB93c0F6UJ5YtuALNUEJMUUqAs" // a GitHub token's shape
	pull := api.NewPull{Branch: "kndl/fix", Title: "Fix the login", Body: "It works now. " + secret}

	refusals := []struct {
		who, token, path string
		body             api.NewPull
		status           int
		says             string
	}{
		{"a watcher", bobTok, path, pull, http.StatusForbidden, "only the Session's Creator"},
		{"someone without access", noraTok, path, pull, http.StatusNotFound, "session"},
		{"a branch it did not push", oliviaTok, path, api.NewPull{Branch: "main", Title: "x"}, http.StatusBadRequest, `pushed no branch "main"`},
		{"an empty title", oliviaTok, path, api.NewPull{Branch: "kndl/fix", Title: " "}, http.StatusBadRequest, "title is empty"},
		{"a Creator without push", ritaTok, "/api/sessions/" + ritas + "/pulls", api.NewPull{Branch: "kndl/rita", Title: "x"}, http.StatusForbidden, "no push permission on acme/app"},
		{"a base that is not there", oliviaTok, path, api.NewPull{Branch: "kndl/fix", Base: "nope", Title: "x"}, http.StatusBadRequest, "base invalid"},
	}
	for _, tt := range refusals {
		if status, text := postAs(t, f, tt.token, tt.path, tt.body); status != tt.status || !strings.Contains(text, tt.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tt.who, status, text, tt.status, tt.says)
		}
	}
	if got := gh.Pulls("acme/app"); len(got) != 0 {
		t.Fatalf("GitHub got pull requests from refused requests: %+v", got)
	}

	status, text := postAs(t, f, oliviaTok, path, pull)
	if status != http.StatusCreated {
		t.Fatalf("the Creator's pull request: %d %s", status, text)
	}
	got := gh.Pulls("acme/app")
	authorLine := "\n\n---\nOpened for @olivia from kndl Session https://kndl.example/sessions/" + id + "."
	if len(got) != 1 || got[0].Head != "kndl/fix" || got[0].Base != "main" || got[0].Title != "Fix the login" || got[0].By != testkit.AppSlug+"[bot]" {
		t.Fatalf("GitHub received %+v, want kndl/fix into main, opened by the App", got)
	}
	if b := got[0].Body; !strings.HasPrefix(b, "It works now. ") || !strings.HasSuffix(b, authorLine) || strings.Contains(b, secret) {
		t.Errorf("the body GitHub received:\n%s\nwant the Creator's text, the token masked, then the line naming them", b)
	}
	var v api.SessionView
	_, raw := askAs(t, f, bobTok, http.MethodGet, "/api/sessions/"+id, nil)
	json.Unmarshal(raw, &v)
	if len(v.Branches) != 1 || len(v.Branches[0].Pulls) != 1 || v.Pull == nil || v.Pull.Number != 1 || v.Pull.State != "open" {
		t.Errorf("the Session as a watcher sees it: %s, want the pull request on its branch at once", raw)
	}

	if status, text := postAs(t, f, oliviaTok, path, pull); status != http.StatusBadRequest || !strings.Contains(text, "A pull request already exists for acme:kndl/fix.") {
		t.Errorf("a second pull request from the branch: %d %q, want 400 in GitHub's words", status, text)
	}
}
