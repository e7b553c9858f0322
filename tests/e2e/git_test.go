package e2e

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// pushScript is what the scripted model runs in the Sandbox: a branch,
// pushed with nothing but the Sandbox's own git setup.
const pushScript = "git config --global user.email claude@example.com && git config --global user.name Claude && " +
	"git checkout -b kndl/test && git commit --allow-empty -m x && git push -u origin HEAD"

// sandboxToken is the Sandbox token as the Sandbox holds it now.
func (s *System) sandboxToken(id string) string {
	s.t.Helper()
	return strings.TrimSpace(s.inSandbox(id, "cat /run/kndl/github-token"))
}

// gitSession starts a Session on acme/app, served by the fake GitHub, whose
// first Turn runs pushScript, and waits for that Turn's end.
func (s *System) gitSession() string {
	s.t.Helper()
	repo := s.GitHubRepo("acme/app")
	s.Model.On(testkit.PromptContains("push a branch"), testkit.Bash(pushScript))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Pushed."))
	v := s.NewSession(repo, "push a branch")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the answer", func(e protocol.Event) bool { return e.Kind == protocol.EventText && e.Text == "Pushed." })
	return v.ID
}

func TestSandboxPushesABranchWithItsTokenAndGhReadsIt(t *testing.T) {
	s := Start(t, WithSandboxGitHub(time.Minute))
	// A short life, so the Runner refreshes within the test (at three
	// quarters of it).
	s.GitHub.SetTokenLifetime(20 * time.Second)
	id := s.gitSession()

	if got := s.GitHub.Branches(t, "acme/app"); !slices.Contains(got, "kndl/test") {
		t.Fatalf("the fake GitHub's branches: %v, want kndl/test pushed from the Sandbox\nevents:\n%s", got, dump(s.Events(id)))
	}
	tok := s.sandboxToken(id)
	info, ok := s.GitHub.Token(tok)
	if !ok || !slices.Equal(info.Repos, []string{"app"}) || info.Permissions["contents"] != "write" {
		t.Errorf("the Sandbox's token: %+v (minted by the fake: %v), want one for acme/app alone with contents write", info, ok)
	}
	if mode := strings.TrimSpace(s.inSandbox(id, "stat -c %a /run/kndl/github-token; stat -f -c %T /run/kndl")); mode != "600\ntmpfs" {
		t.Errorf("the token file's mode and file system: %q, want 600 on tmpfs", mode)
	}
	ghURL, _ := url.Parse(s.GitHub.URL)
	if got := strings.TrimSpace(s.inSandbox(id, "HOME=/root gh auth token --hostname "+ghURL.Host)); got != tok {
		t.Errorf("gh auth token printed %q, want the Sandbox token", got)
	}

	// The refresh: a new token in the file, and the previous one, once
	// expired, refused by GitHub, while git goes on pushing with the new.
	var fresh string
	testenv.Eventually(t, 30*time.Second, "a refreshed token", func() bool {
		fresh = s.sandboxToken(id)
		return fresh != tok
	})
	testenv.Eventually(t, 30*time.Second, "the previous token's expiry", func() bool { return time.Now().After(info.Expires) })
	old := strings.Replace(s.GitHub.RepoURL("acme/app"), "://", "://x-access-token:"+tok+"@", 1)
	if out, code := s.Exec(id, "git", "-C", "/workspace", "push", old, "HEAD:refs/heads/with-the-old-token"); code == 0 {
		t.Errorf("a push with the previous token after a refresh was accepted: %s", out)
	}
	if out, code := s.Exec(id, "git", "-C", "/workspace", "push", "origin", "HEAD:refs/heads/after-refresh"); code != 0 {
		t.Errorf("a push after the refresh failed: %s", out)
	}
	if got := s.GitHub.Branches(t, "acme/app"); slices.Contains(got, "with-the-old-token") || !slices.Contains(got, "after-refresh") {
		t.Errorf("the fake GitHub's branches: %v, want after-refresh and not with-the-old-token", got)
	}
}
