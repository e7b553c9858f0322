package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testkit"
)

// askAs sends a request as the holder of token, body as JSON if not nil,
// and returns the status and the answer.
func askAs(t *testing.T, f *fixture, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var in io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		in = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.srv.URL+path, in)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// messageOf is an error answer's message, or the answer as it is.
func messageOf(raw []byte) string {
	var e struct{ Message string }
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	return string(raw)
}

// listAs asks GET /api/sessions with query as the holder of token: the
// rows, and the answer as text (an error's message).
func listAs(t *testing.T, f *fixture, token, query string) (int, []api.Session, string) {
	t.Helper()
	status, raw := askAs(t, f, token, http.MethodGet, "/api/sessions"+query, nil)
	var ss []api.Session
	json.Unmarshal(raw, &ss)
	return status, ss, messageOf(raw)
}

// TestTheSessionsListFiltersByWhoseRepoStateAndTitle: with Sessions of two
// Creators in two Repos, each filter of GET /api/sessions keeps the right
// rows, its live socket keeps them as they change, and a filter naming
// nothing the person can see is refused with 400, saying why.
func TestTheSessionsListFiltersByWhoseRepoStateAndTitle(t *testing.T) {
	gh := testkit.NewGitHub(t)
	f := newFixture(t, withGitHub(gh, time.Minute))
	ctx := context.Background()
	olivia, oliviaTok := member(t, f, "olivia")
	bob, bobTok := member(t, f, "bob")
	for _, repo := range []string{"acme/app", "acme/web", "acme/secret"} {
		gh.InstallApp(repo)
		gh.SetCollaborator(repo, "olivia", true)
	}
	gh.SetCollaborator("acme/app", "bob", true)
	gh.SetCollaborator("acme/web", "bob", true)
	repos := map[string]store.Repo{}
	session := func(repo string, creator store.User, title string, state store.SessionState) string {
		r, err := f.store.Repos.EnsureRepo(ctx, gh.RepoURL(repo), repo)
		if err != nil {
			t.Fatal(err)
		}
		repos[repo] = r
		s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: r.ID, CreatorID: creator.ID, RunnerID: f.runner.ID, Title: title})
		if err != nil {
			t.Fatal(err)
		}
		if state != store.Starting {
			if err := f.store.Sessions.MoveSession(ctx, s.ID, store.Starting, state, "", false); err != nil {
				t.Fatal(err)
			}
		}
		return s.ID
	}
	oApp := session("acme/app", olivia, "Fix the login page", store.Active)
	oWeb := session("acme/web", olivia, "Add dark mode", store.Asleep)
	bApp := session("acme/app", bob, "Login flake", store.Active)
	bWeb := session("acme/web", bob, "Refactor the build", store.Failed)
	session("acme/secret", olivia, "Rotate the keys", store.Asleep)
	named := map[string]string{oApp: "oApp", oWeb: "oWeb", bApp: "bApp", bWeb: "bWeb"}
	names := func(ss []api.Session) []string {
		var out []string
		for _, s := range ss {
			out = append(out, named[s.ID])
		}
		slices.Sort(out)
		return out
	}

	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"bApp", "bWeb", "oApp", "oWeb"}},
		{"?mine=true", []string{"bApp", "bWeb"}},
		{"?waiting=true", []string{"bApp"}},
		{"?repo=" + repos["acme/app"].ID, []string{"bApp", "oApp"}},
		{"?repo=" + url.QueryEscape(gh.RepoURL("acme/web")), []string{"bWeb", "oWeb"}},
		{"?state=active", []string{"bApp", "oApp"}},
		{"?state=asleep,failed", []string{"bWeb", "oWeb"}},
		{"?state=asleep&state=failed", []string{"bWeb", "oWeb"}},
		{"?creator=olivia", []string{"oApp", "oWeb"}},
		{"?creator=" + bob.ID, []string{"bApp", "bWeb"}},
		{"?search=LOGIN", []string{"bApp", "oApp"}},
		{"?creator=OLIVIA&repo=" + repos["acme/web"].ID, []string{"oWeb"}},
		{"?mine=true&state=asleep", nil},
		{"?mine=&repo=&state=&creator=&search=", []string{"bApp", "bWeb", "oApp", "oWeb"}}, // an empty form
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			status, ss, raw := listAs(t, f, bobTok, tt.query)
			if status != http.StatusOK || !slices.Equal(names(ss), tt.want) {
				t.Fatalf("bob's list%s: %d %v, want %v\n%s", tt.query, status, names(ss), tt.want, raw)
			}
		})
	}

	refusals := []struct{ query, says string }{
		{"?colour=red", `no filter "colour"`},
		{"?state=sleeping", `no Session state "sleeping"`},
		{"?creator=nobody", `no Member "nobody"`},
		{"?repo=" + url.QueryEscape(gh.RepoURL("acme/secret")), "that you have access to"}, // there, but not bob's
		{"?repo=" + repos["acme/secret"].ID, "that you have access to"},
		{"?repo=nowhere", `no Repo "nowhere"`},
		{"?mine=yes", "say true or false"},
		{"?search=" + strings.Repeat("x", api.MaxSearch+1), "over the 200-byte limit"},
		{"?creator=bob&creator=olivia", "once"},
	}
	for _, tt := range refusals {
		status, _, raw := listAs(t, f, bobTok, tt.query)
		if status != http.StatusBadRequest || !strings.Contains(raw, tt.says) {
			t.Errorf("bob's list%.40s: %d %s, want 400 saying %q", tt.query, status, raw, tt.says)
		}
	}
	// The same Repo is olivia's to filter by.
	if status, ss, raw := listAs(t, f, oliviaTok, "?repo="+repos["acme/secret"].ID); status != http.StatusOK || len(ss) != 1 {
		t.Errorf("olivia's list of acme/secret: %d %s, want its one Session", status, raw)
	}

	// A pull request shows on its Session's row: the newest.
	if _, _, err := f.store.Branches.AddSessionBranches(ctx, oApp, []string{"kndl/login"}, time.Now(), 20); err != nil {
		t.Fatal(err)
	}
	pulls := `[{"number":7,"title":"Fix the login page","html_url":"https://github.example/acme/app/pull/7","state":"closed","merged":true},` +
		`{"number":3,"title":"First try","html_url":"https://github.example/acme/app/pull/3","state":"closed"}]`
	if err := f.store.Branches.SetBranchPulls(ctx, oApp, "kndl/login", []byte(pulls), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ss, raw := listAs(t, f, bobTok, "?creator=olivia&search=login"); len(ss) != 1 || ss[0].Pull == nil || ss[0].Pull.Number != 7 || !ss[0].Pull.Merged {
		t.Errorf("oApp's row: %s, want its newest pull request, #7 merged", raw)
	}

	// Live: a Session that stops matching goes, one that starts comes.
	live := openListOf(t, f, bobTok, "?state=active")
	if m := live.next(); m.Type != "list" || !slices.Equal(names(m.Sessions), []string{"bApp", "oApp"}) {
		t.Fatalf("bob's live list of active Sessions: %+v, want bApp and oApp", names(m.Sessions))
	}
	move := func(id string, from, to store.SessionState) {
		if err := f.store.Sessions.MoveSession(ctx, id, from, to, "", false); err != nil {
			t.Fatal(err)
		}
		f.hub.sessions.Changed(id)
	}
	move(bApp, store.Active, store.Asleep)
	if m := live.next(); !slices.Equal(m.Gone, []string{bApp}) || len(m.Sessions) != 0 {
		t.Fatalf("bApp fell asleep: bob's live list got %+v, want it gone", m)
	}
	move(oWeb, store.Asleep, store.Active)
	if m := live.next(); m.Type != "changed" || !slices.Equal(names(m.Sessions), []string{"oWeb"}) {
		t.Fatalf("oWeb woke: bob's live list got %+v, want its row", m)
	}
	move(bWeb, store.Failed, store.Archived) // never matched: nothing sent
	move(oApp, store.Active, store.Frozen)
	if m := live.next(); !slices.Equal(m.Gone, []string{oApp}) || len(m.Sessions) != 0 {
		t.Fatalf("oApp froze: bob's live list got %+v, want it gone alone", m)
	}
	// A wrong filter is refused before the socket opens.
	if status, _, raw := listAs(t, f, bobTok, "/live?state=nope"); status != http.StatusBadRequest {
		t.Errorf("the live list with a wrong filter: %d %s, want 400", status, raw)
	}
}

// TestEachRowOfTheSessionsListSaysWhatItsSessionSpent: GET /api/sessions
// gives each Session what its replies spent, by model, with the estimated
// cost, and none for a Session that spent nothing; the list of 22
// Sessions, each with a branch, asks the store as often as the list of 2.
func TestEachRowOfTheSessionsListSaysWhatItsSessionSpent(t *testing.T) {
	gh := testkit.NewGitHub(t)
	f := newFixture(t, withGitHub(gh, time.Minute))
	ctx := context.Background()
	bob, bobTok := member(t, f, "bob")
	gh.InstallApp("acme/app")
	gh.SetCollaborator("acme/app", "bob", true)
	r, _ := f.store.Repos.EnsureRepo(ctx, gh.RepoURL("acme/app"), "acme/app")
	var ids []string
	add := func(n int) {
		for range n {
			s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: r.ID, CreatorID: bob.ID, RunnerID: f.runner.ID})
			if err == nil {
				_, _, err = f.store.Branches.AddSessionBranches(ctx, s.ID, []string{"kndl/x"}, time.Now(), 20)
			}
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, s.ID)
		}
	}
	add(2)
	reply := func(id string, in, out int64) store.Event {
		return store.Event{At: time.Now(), Kind: "text", Data: json.RawMessage(`{}`),
			Reply: &store.Reply{Message: id, Usage: store.Usage{Model: "claude-sonnet-5-5", Input: in, Output: out}}}
	}
	if _, err := f.store.Sessions.AppendEvents(ctx, ids[0], []store.Event{reply("msg_a", 1_000_000, 0), reply("msg_b", 0, 100_000)}); err != nil {
		t.Fatal(err)
	}
	status, ss, raw := listAs(t, f, bobTok, "")
	if status != http.StatusOK || len(ss) != 2 {
		t.Fatalf("the list: %d %s", status, raw)
	}
	for _, s := range ss {
		switch s.ID {
		case ids[0]:
			// $2 a million input tokens, $10 a million output.
			if s.Spent == nil || s.Spent.Input != 1_000_000 || s.Spent.Output != 100_000 || s.Spent.Estimate() != "$3.00 estimated" ||
				len(s.Spent.Models) != 1 || s.Spent.Models[0].Model != "claude-sonnet-5-5" {
				t.Errorf("the row of the Session that spent: %+v, want 1,000,000 input and 100,000 output tokens, $3.00 estimated", s.Spent)
			}
		case ids[1]:
			if s.Spent != nil {
				t.Errorf("the row of the Session that spent nothing: %+v, want none", s.Spent)
			}
		}
	}

	calls := func() map[string]int {
		var mu sync.Mutex
		n := map[string]int{}
		f.store.Observe(func(op string, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			n[op]++
		})
		defer f.store.Observe(nil)
		if status, ss, raw := listAs(t, f, bobTok, ""); status != http.StatusOK || len(ss) != len(ids) {
			t.Fatalf("the list of %d: %d %s", len(ids), status, raw)
		}
		return n
	}
	few := calls()
	add(20)
	if many := calls(); !maps.Equal(few, many) {
		t.Errorf("the store's calls for a list of 2 Sessions %v and of 22 %v, want the same", few, many)
	}
}
