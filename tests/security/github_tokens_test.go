package security

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
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
// pull requests write and the clone's with contents read and nothing else;
// another Runner, asking for that Session, or for a Session asleep, gets
// none, and the fake GitHub is not even asked.
func TestTheHubMintsGitHubTokensOnlyForTheAskingRunnersSessions(t *testing.T) {
	e := newEnv(t)
	_, bob, carol := e.team()
	e.gh.InstallApp("acme/other")
	carols, bobs := e.pair(carol, "carols-box"), e.pair(bob, "bobs-box")
	s := e.running(carol, carols)

	want := map[string]map[string]string{
		protocol.TypeSessionGitHubToken: {"contents": "write", "pull_requests": "write", "metadata": "read"},
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
