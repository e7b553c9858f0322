package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/store"
)

// TestARepositorysLimitsDefaultTo20TurnsAnd2HoursAndChangeOneAtATime:
// PATCH sets the limits given and keeps the others; one out of bounds, or
// a body with a field it does not know, changes nothing.
func TestARepositorysLimitsDefaultTo20TurnsAnd2HoursAndChangeOneAtATime(t *testing.T) {
	f := newFixture(t)
	repo, err := f.store.Repos.EnsureRepo(context.Background(), "/srv/app", "app")
	if err != nil {
		t.Fatal(err)
	}
	path := "/api/repos/" + repo.ID + "/limits"
	limits := func(code int, body string) api.RepoLimits {
		t.Helper()
		var l api.RepoLimits
		if code != http.StatusOK || json.Unmarshal([]byte(body), &l) != nil {
			t.Fatalf("%d %s", code, body)
		}
		return l
	}
	if l := limits(f.call(t, http.MethodGet, path, "")); l != (api.RepoLimits{MaxTurns: 20, MaxTurnHours: 2}) {
		t.Fatalf("the defaults: %+v, want 20 Turns and 2 hours", l)
	}
	if l := limits(f.call(t, http.MethodPatch, path, `{"max_turns":5}`)); l != (api.RepoLimits{MaxTurns: 5, MaxTurnHours: 2}) {
		t.Fatalf("after setting the Turns: %+v, want 5 and the hours kept", l)
	}
	if l := limits(f.call(t, http.MethodPatch, path, `{"max_turn_hours":0.5}`)); l != (api.RepoLimits{MaxTurns: 5, MaxTurnHours: 0.5}) {
		t.Fatalf("after setting the hours: %+v, want 5 and 0.5", l)
	}
	for _, bad := range []string{`{"max_turns":-1}`, `{"max_turn_hours":-2}`, `{"max_turns":10001}`, `{"max_turns":3,"turns":4}`} {
		if code, body := f.call(t, http.MethodPatch, path, bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", bad, code, body)
		}
	}
	if l, err := f.store.Repos.RepoLimits(context.Background(), repo.ID); err != nil || l != (store.RepoLimits{MaxTurns: 5, MaxTurnHours: 0.5}) {
		t.Fatalf("the store after bad requests: %+v %v, want them unchanged", l, err)
	}
	if code, _ := f.call(t, http.MethodPatch, "/api/repos/nope/limits", `{"max_turns":1}`); code != http.StatusNotFound {
		t.Errorf("an unknown Repo: %d, want 404", code)
	}
}
