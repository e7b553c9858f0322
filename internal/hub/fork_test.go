package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testkit"
)

// TestOnlyTheCreatorForksAnAsleepSessionAndARefusalChangesNothing: POST
// /api/sessions/{id}/fork is the Creator's alone: another Member with
// access gets 403, someone without access and an unknown id 404 naming
// the Session, an awake Session 409, a Turn it does not have or an
// earlier one 400, a Runner that refuses 409; each leaves no Session and
// asks the Runner nothing (but the last, which asked). The Creator's fork
// of an asleep Session is a new Session of the same Repo, Creator,
// Runner and model, asleep, whose history begins with a note naming its
// parent and the Turn; both Sessions list the link; the fork's Events
// are masked with the Repo's Sensitive values, as its parent's are.
func TestOnlyTheCreatorForksAnAsleepSessionAndARefusalChangesNothing(t *testing.T) {
	gh := testkit.NewGitHub(t)
	f := newFixture(t, withGitHub(gh, time.Minute))
	ctx := context.Background()
	olivia, oliviaTok := member(t, f, "olivia")
	_, bobTok := member(t, f, "bob")
	_, noraTok := member(t, f, "nora")
	gh.InstallApp("acme/app")
	for _, login := range []string{"olivia", "bob"} {
		gh.SetCollaborator("acme/app", login, true)
	}
	var mu sync.Mutex
	var asked []protocol.SessionFork
	refuse := false
	hello(t, f, func(c *protocol.Conn) {
		c.Handle(protocol.TypeSessionFork, false, func(ctx context.Context, raw json.RawMessage) (any, error) {
			var req protocol.SessionFork
			json.Unmarshal(raw, &req)
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req)
			if refuse {
				return nil, errdefs.ErrConflict
			}
			return protocol.SessionForked{Offsets: map[string]int64{req.SessionID + ".jsonl": 100}, How: "Forked: 3 files by plain copy."}, nil
		})
	})
	repo, _ := f.store.Repos.EnsureRepo(ctx, gh.RepoURL("acme/app"), "acme/app")
	if status, raw := askAs(t, f, oliviaTok, http.MethodPut, "/api/repos/"+repo.ID+"/variables/TOKEN", map[string]any{"value": "sensitive-value-7", "sensitive": true}); status != http.StatusOK {
		t.Fatalf("set a Sensitive Variable: %d %s", status, raw)
	}
	session := func(state store.SessionState) store.Session {
		s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: olivia.ID, RunnerID: f.runner.ID, Title: "Fix the login", Model: "sonnet"})
		if err != nil {
			t.Fatal(err)
		}
		f.store.Limits.CountTurn(ctx, s.ID)
		f.store.Limits.CountTurn(ctx, s.ID)
		if state != store.Starting {
			if err := f.store.Sessions.MoveSession(ctx, s.ID, store.Starting, state, "", false); err != nil {
				t.Fatal(err)
			}
		}
		s, _ = f.store.Sessions.SessionByID(ctx, s.ID)
		return s
	}
	parent, awake := session(store.Asleep), session(store.Starting)
	path := "/api/sessions/" + parent.ID + "/fork"
	one, three := 1, 3
	count := func() int {
		ss, _ := f.store.Sessions.List(ctx, store.SessionFilter{})
		return len(ss)
	}
	before := count()
	refusals := []struct {
		who, token, path string
		body             api.NewFork
		status           int
		says             string
	}{
		{"another Member", bobTok, path, api.NewFork{}, http.StatusForbidden, "only the Session's Creator"},
		{"someone without access", noraTok, path, api.NewFork{}, http.StatusNotFound, "session " + parent.ID},
		{"an unknown id", oliviaTok, "/api/sessions/4f0c3a5e-0000-4000-8000-000000000000/fork", api.NewFork{}, http.StatusNotFound, "session 4f0c3a5e"},
		{"an awake Session", oliviaTok, "/api/sessions/" + awake.ID + "/fork", api.NewFork{}, http.StatusConflict, "put it to sleep"},
		{"a Turn it does not have", oliviaTok, path, api.NewFork{At: &three}, http.StatusBadRequest, "no Turn 3: its Turns are 1 to 2"},
		{"an earlier Turn", oliviaTok, path, api.NewFork{At: &one}, http.StatusBadRequest, "leave out --at"},
		{"an empty prompt", oliviaTok, path, api.NewFork{Prompt: " "}, http.StatusBadRequest, "prompt is empty"},
	}
	for _, tt := range refusals {
		if status, text := postAs(t, f, tt.token, tt.path, tt.body); status != tt.status || !strings.Contains(text, tt.says) {
			t.Errorf("%s: got %d %q, want %d saying %q", tt.who, status, text, tt.status, tt.says)
		}
	}
	mu.Lock()
	if len(asked) != 0 {
		t.Errorf("refused forks asked the Runner: %+v", asked)
	}
	refuse = true
	mu.Unlock()
	if status, text := postAs(t, f, oliviaTok, path, api.NewFork{}); status != http.StatusConflict || !strings.Contains(text, "the Runner did not fork") {
		t.Errorf("a Runner that refuses: got %d %q, want 409 saying the Runner did not fork it", status, text)
	}
	if got := count(); got != before {
		t.Fatalf("refused forks left Sessions: got %d, want %d", got, before)
	}
	mu.Lock()
	refuse = false
	mu.Unlock()

	status, raw := askAs(t, f, oliviaTok, http.MethodPost, path, api.NewFork{})
	var fk api.Fork
	json.Unmarshal(raw, &fk)
	if status != http.StatusCreated || fk.ParentID != parent.ID || fk.Turn != 2 || !strings.Contains(fk.How, "plain copy") {
		t.Fatalf("the Creator's fork: got %d %s, want 201 naming the parent, Turn 2 and how it was copied", status, raw)
	}
	mu.Lock()
	if last := asked[len(asked)-1]; last.From != parent.ID || last.SessionID != fk.SessionID {
		t.Errorf("the Runner was asked %+v, want a copy of %s as %s", last, parent.ID, fk.SessionID)
	}
	mu.Unlock()
	fork, err := f.store.Sessions.SessionByID(ctx, fk.SessionID)
	if err != nil || fork.State != store.Asleep || fork.RepoID != parent.RepoID || fork.CreatorID != olivia.ID || fork.RunnerID != parent.RunnerID ||
		fork.Model != "sonnet" || !fork.Conversation {
		t.Fatalf("the fork: got %+v (%v), want an asleep Session of the parent's Repo, Creator, Runner and model, its conversation kept", fork, err)
	}
	evs, _ := f.store.Sessions.Events(ctx, fork.ID, 0, 10)
	var first protocol.Event
	if len(evs) > 0 {
		json.Unmarshal(evs[0].Data, &first)
	}
	if first.Kind != protocol.EventNote || !strings.Contains(first.Text, "Forked from Session "+parent.ID) || !strings.Contains(first.Text, "Turn 2") {
		t.Errorf("the fork's history begins with %+v, want a note naming its parent and Turn 2", first)
	}
	for _, tt := range []struct {
		id, token string
		from      string
		forks     int
	}{{parent.ID, bobTok, "", 1}, {fork.ID, oliviaTok, parent.ID, 0}} {
		status, raw := askAs(t, f, tt.token, http.MethodGet, "/api/sessions/"+tt.id+"/forks", nil)
		var got api.Forks
		json.Unmarshal(raw, &got)
		from := ""
		if got.From != nil {
			from = got.From.ParentID
		}
		if status != http.StatusOK || from != tt.from || len(got.Forks) != tt.forks {
			t.Errorf("forks of %s: got %d %s, want forked from %q and %d forks", tt.id, status, raw, tt.from, tt.forks)
		}
	}
	if got := f.recorder(t, fork.ID)(protocol.Event{Kind: protocol.EventText, Text: "the token is sensitive-value-7"}); strings.Contains(got.Text, "sensitive-value-7") {
		t.Errorf("the fork's Event kept its parent's Sensitive value: %q", got.Text)
	}
}
