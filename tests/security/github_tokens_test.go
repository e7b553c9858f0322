package security

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// githubToken asks the Hub for a Session's token of kind typ
// (session.github_token or .clone_token) as this Runner.
func (r *fakeRunner) githubToken(typ, id string) (protocol.GitHubToken, error) {
	var got protocol.GitHubToken
	err := r.conn.Request(context.Background(), typ, protocol.SessionRef{SessionID: id}, &got)
	return got, err
}

// TestTheHubMintsGitHubTokensOnlyForTheAskingRunnersSessions: a Runner
// gets the Sandbox token and the clone token of a Session running on it,
// each fresh, for the Session's Repo alone, the Sandbox's with contents and
// pull requests write (and what gh reads through the relay: issues, with
// comments, checks and Actions runs) and the clone's with contents read
// and nothing else;
// another Runner, asking for that Session, or for a Session asleep, gets
// none, and the fake GitHub is not even asked.
func TestTheHubMintsGitHubTokensOnlyForTheAskingRunnersSessions(t *testing.T) {
	e := newEnv(t)
	_, bob, carol := e.team()
	e.gh.InstallApp("acme/other")
	carols, bobs := e.pair(carol, "carols-box"), e.pair(bob, "bobs-box")
	s := e.running(carol, carols)

	want := map[string]map[string]string{
		protocol.TypeSessionGitHubToken: {"contents": "write", "pull_requests": "write", "metadata": "read", "issues": "write", "checks": "read", "actions": "read"},
		protocol.TypeSessionCloneToken:  {"contents": "read", "metadata": "read"},
	}
	for typ, perms := range want {
		first, err := carols.githubToken(typ, s.ID)
		if err != nil {
			t.Fatalf("%s for carol's Session on her Runner: %v", typ, err)
		}
		again, _ := carols.githubToken(typ, s.ID)
		if again.Token == first.Token {
			t.Errorf("%s: the same token twice, want a fresh one each time", typ)
		}
		info, ok := e.gh.Token(first.Token)
		if !ok || !slices.Equal(info.Repos, []string{"app"}) || !maps.Equal(info.Permissions, perms) {
			t.Errorf("%s: %+v (minted: %v), want acme/app alone with %v", typ, info, ok, perms)
		}
		if time.Until(first.ExpiresAt) < 50*time.Minute || first.URL != e.gh.URL {
			t.Errorf("%s: expires %v at %q, want an hour's token for %s", typ, first.ExpiresAt, first.URL, e.gh.URL)
		}

		minted := len(e.gh.Tokens())
		if got, err := bobs.githubToken(typ, s.ID); !errors.Is(err, errdefs.ErrNotFound) || got.Token != "" {
			t.Errorf("%s for carol's Session from bobs-box: %+v %v, want not_found and nothing", typ, got, err)
		}
		if got, err := bobs.githubToken(typ, "00000000-0000-4000-8000-000000000000"); !errors.Is(err, errdefs.ErrNotFound) || got.Token != "" {
			t.Errorf("%s for a Session that doesn't exist: %+v %v, want not_found", typ, got, err)
		}
		if n := len(e.gh.Tokens()); n != minted {
			t.Errorf("%s: refusals minted %d tokens", typ, n-minted)
		}
	}

	if code, body := e.do(carol.Client, req{method: "POST", path: "/api/sessions/" + s.ID + "/sleep", origin: "self"}); code != http.StatusNoContent {
		t.Fatalf("carol puts her Session to sleep: %d %s", code, body)
	}
	e.waitState(s.ID, store.Asleep)
	for typ := range want {
		if got, err := carols.githubToken(typ, s.ID); !errors.Is(err, errdefs.ErrForbidden) || got.Token != "" {
			t.Errorf("%s for carol's Session asleep: %+v %v, want forbidden", typ, got, err)
		}
	}
}

// TestASandboxTokenPushesOnlyForACreatorWhoMayPush: a read-only
// collaborator's Session gets a Sandbox token with contents and pull
// requests read, which GitHub refuses a push and a pull request, and the
// Session says so; a pusher's gets write, and pushes. A Creator who lost
// push gets a read-only token at the next refresh, asked of GitHub then.
func TestASandboxTokenPushesOnlyForACreatorWhoMayPush(t *testing.T) {
	testenv.RequireCommand(t, "git")
	e := newEnv(t)
	_, bob, carol := e.team()
	e.gh.SetReadOnly("acme/app", "carol", true)
	src := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main", src}, {"-C", src, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	e.gh.ServeRepo(t, "acme/app", src)
	push := func(tok, branch string) error {
		url := strings.Replace(e.gh.RepoURL("acme/app"), "://", "://x-access-token:"+tok+"@", 1)
		out, err := exec.Command("git", "-C", src, "push", "-q", url, "HEAD:refs/heads/"+branch).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	sandboxGit := func(b *browser, id string) string {
		var v api.SessionView
		code, body := e.do(b.Client, req{method: "GET", path: "/api/sessions/" + id})
		if code != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
			t.Fatalf("GET the Session: %d %s", code, body)
		}
		return v.SandboxGit
	}
	token := func(r *fakeRunner, id string, want map[string]string) string {
		t.Helper()
		tok, err := r.githubToken(protocol.TypeSessionGitHubToken, id)
		if err != nil {
			t.Fatalf("the Sandbox token: %v", err)
		}
		if info, _ := e.gh.Token(tok.Token); !maps.Equal(info.Permissions, want) {
			t.Fatalf("the Sandbox token's permissions: %v, want %v", info.Permissions, want)
		}
		return tok.Token
	}
	write := map[string]string{"contents": "write", "pull_requests": "write", "metadata": "read", "issues": "write", "checks": "read", "actions": "read"}
	read := map[string]string{"contents": "read", "pull_requests": "read", "metadata": "read", "issues": "read", "checks": "read", "actions": "read"}

	bobs, carols := e.pair(bob, "bobs-box"), e.pair(carol, "carols-box")
	sb, sc := e.running(bob, bobs), e.running(carol, carols)
	if err := push(token(bobs, sb.ID, write), "kndl/bob"); err != nil {
		t.Fatalf("bob's Sandbox pushes: %v", err)
	}
	ctok := token(carols, sc.ID, read)
	if err := push(ctok, "kndl/carol"); err == nil || slices.Contains(e.gh.Branches(t, "acme/app"), "kndl/carol") {
		t.Fatalf("carol's read-only Sandbox pushed (%v); branches %v", err, e.gh.Branches(t, "acme/app"))
	}
	if code := e.gh.OpenPull(t, "acme/app", ctok, "kndl/bob", "t"); code != http.StatusForbidden {
		t.Errorf("carol's read-only Sandbox opens a pull request: %d, want 403", code)
	}
	if got := sandboxGit(bob, sb.ID); got != "write" {
		t.Errorf("bob's Session says its Sandbox's git is %q, want write", got)
	}
	if got := sandboxGit(bob, sc.ID); got != "read" {
		t.Errorf("carol's Session says its Sandbox's git is %q, want read", got)
	}

	// Bob loses push; his cached yes does not outlive the next refresh.
	e.gh.SetReadOnly("acme/app", "bob", true)
	if err := push(token(bobs, sb.ID, read), "kndl/bob-again"); err == nil {
		t.Error("bob's Sandbox pushed with the token minted after he lost push")
	}
	if got := sandboxGit(bob, sb.ID); got != "read" {
		t.Errorf("bob's Session says its Sandbox's git is %q after he lost push, want read", got)
	}
}
