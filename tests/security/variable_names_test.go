package security

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// addRepo has b add the Repo name (owner/name on the fake GitHub) and
// returns its id.
func (e *env) addRepo(b *browser, name string) string {
	e.t.Helper()
	code, body := e.do(b.Client, req{method: "POST", path: "/api/repos", body: `{"url":"` + e.gh.RepoURL(name) + `"}`, origin: "self"})
	var repo struct{ ID string }
	if json.Unmarshal([]byte(body), &repo); code != http.StatusOK {
		e.t.Fatalf("%s adds %s: %d %s", b.login, name, code, body)
	}
	return repo.ID
}

// TestAVariableCantReplaceWhatTheSandboxSets: PATH, HOME and SHELL come
// from the Sandbox's login environment; setting a Variable, a Repo's or a
// Shared one, under one of those names is refused, saying why and what to
// do instead, and one stored before is left out of the Session's start,
// with a note in the Session naming it.
func TestAVariableCantReplaceWhatTheSandboxSets(t *testing.T) {
	e := newEnv(t)
	_, bob, _ := e.team()
	repo := e.addRepo(bob, "acme/app")
	for _, path := range []string{"/api/repos/" + repo + "/variables/PATH", "/api/repos/" + repo + "/variables/HOME", "/api/variables/SHELL"} {
		code, body := e.do(bob.Client, req{method: "PUT", path: path, body: `{"value":"/workspace/bin"}`, origin: "self"})
		if code != http.StatusBadRequest || !strings.Contains(body, "the Sandbox sets PATH, HOME, SHELL itself") || !strings.Contains(body, "~/.profile") {
			t.Errorf("PUT %s: %d %s, want 400 naming the rule and the way out", path, code, body)
		}
	}

	ctx := context.Background()
	for _, name := range []string{"PATH", "DEPLOY_ENV"} {
		if _, _, err := e.store.SetVariable(ctx, store.Variable{RepoID: repo, Name: name, Value: "/workspace/bin", SetBy: e.userOf("bob").ID}); err != nil {
			t.Fatal(err)
		}
	}
	bobs := e.pair(bob, "bobs-box")
	s := e.running(bob, bobs)
	creds, err := bobs.credentials(s.ID)
	names := []string{}
	for _, v := range creds.Variables {
		names = append(names, v.Name)
	}
	if err != nil || !slices.Equal(names, []string{"DEPLOY_ENV"}) {
		t.Fatalf("the Runner gets Variables %v (%v), want DEPLOY_ENV alone", names, err)
	}
	evs, _ := e.store.Events(ctx, s.ID, 0, 100)
	if !slices.ContainsFunc(evs, func(ev store.Event) bool {
		return ev.Kind == protocol.EventNote && strings.Contains(string(ev.Data), "Not passed to the Sandbox: the Variable PATH.")
	}) {
		t.Fatalf("no note in the Session naming the Variable left out: %+v", evs)
	}
}
