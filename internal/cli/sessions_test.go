package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
)

// fakeHub answers the Session routes of the Hub's API with the JSON the
// Hub sends (internal/api), from the Sessions it holds, and records each
// change it is sent.
type fakeHub struct {
	t        *testing.T
	sessions []api.Session
	// events are each Session's Events, by id; branches the branches
	// each pushed.
	events   map[string][]api.Event
	branches map[string][]api.Branch
	spent    map[string]api.Spent // what each spent

	mu      sync.Mutex
	changes []string // "METHOD PATH BODY"
	// listQuery is the query of the last GET /api/sessions.
	listQuery string
	// attached are the files uploaded, with their bytes (attachments_test.go).
	attached []api.Attachment
	files    map[string][]byte
}

const fakeToken = "kndlc_fake-cli-token"

// newFakeHub serves sessions and points this test's CLI config at it.
func newFakeHub(t *testing.T, sessions ...api.Session) *fakeHub {
	t.Helper()
	h := &fakeHub{t: t, sessions: sessions, events: map[string][]api.Event{}, branches: map[string][]api.Branch{}, spent: map[string]api.Spent{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/sessions", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.listQuery = r.URL.RawQuery
		h.mu.Unlock()
		if r.URL.Query().Get(api.FilterState) == "nope" { // as the Hub refuses a filter
			w.WriteHeader(http.StatusBadRequest)
			h.reply(w, map[string]string{"message": `no Session state "nope": use one of starting, active, frozen, asleep, failed, archived`})
			return
		}
		h.reply(w, h.sessions)
	})
	mux.HandleFunc("GET /api/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		if s, ok := h.session(r.PathValue("id")); ok {
			h.reply(w, api.SessionView{Session: s, Queue: []api.Prompt{}, Branches: h.branches[s.ID], Usage: h.spent[s.ID]})
			return
		}
		h.notFound(w)
	})
	mux.HandleFunc("GET /api/sessions/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		h.reply(w, append([]api.Event{}, h.events[r.PathValue("id")]...))
	})
	change := func(w http.ResponseWriter, r *http.Request) {
		if _, ok := h.session(r.PathValue("id")); !ok {
			h.notFound(w)
			return
		}
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.changes = append(h.changes, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+string(b)))
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
	mux.HandleFunc("POST /api/sessions/{id}/{action}", change)
	mux.HandleFunc("POST /api/sessions/{id}/prompts", h.prompt)
	mux.HandleFunc("POST /api/sessions/{id}/fork", func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		if change(rec, r); rec.Code != http.StatusNoContent {
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		h.reply(w, api.Fork{SessionID: "s2", ParentID: r.PathValue("id"), Turn: 1, How: "Forked from Session s1: 3 files by reflink."})
	})
	mux.HandleFunc("POST /api/sessions/{id}/attachments", h.attach)
	mux.HandleFunc("GET /api/sessions/{id}/attachments", func(w http.ResponseWriter, r *http.Request) { h.reply(w, h.attachments()) })
	mux.HandleFunc("GET /api/sessions/{id}/attachments/{attachment}", h.file)
	mux.HandleFunc("POST /api/sessions/{id}/prompts/{prompt}/move", change)
	mux.HandleFunc("PATCH /api/sessions/{id}/prompts/{prompt}", change)
	mux.HandleFunc("DELETE /api/sessions/{id}/prompts/{prompt}", change)
	mux.HandleFunc("PUT /api/sessions/{id}/keep-awake", change)
	mux.HandleFunc("PUT /api/sessions/{id}/thread-context", change)
	mux.HandleFunc("POST /api/sessions/{id}/subagents/{agent}/stop", change)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+fakeToken {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := filepath.Join(t.TempDir(), "cli.json")
	b, _ := json.Marshal(apiclient.Config{HubURL: srv.URL, Token: fakeToken})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KNDL_CONFIG", cfg)
	return h
}

func (h *fakeHub) session(id string) (api.Session, bool) {
	for _, s := range h.sessions {
		if s.ID == id {
			return s, true
		}
	}
	return api.Session{}, false
}

func (h *fakeHub) reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (h *fakeHub) notFound(w http.ResponseWriter) {
	w.WriteHeader(http.StatusNotFound)
	h.reply(w, map[string]string{"message": "There is no such Session."})
}

func (h *fakeHub) taken() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.changes...)
}

// kndl runs a command against the fake Hub.
func kndl(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	return out.String(), errOut.String(), code
}

var created = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func session(id string, state api.SessionState, activity, detail string, keep bool) api.Session {
	return api.Session{ID: id, RepoURL: "/srv/app", Title: "title of " + id, State: state, Activity: activity,
		StateDetail: detail, KeepAwake: keep, CreatedAt: created, UpdatedAt: created}
}

// spent gives s what it spent, at an estimated cost of usd.
func spent(s api.Session, usd float64) api.Session {
	s.Spent = &api.Spent{EstimatedUSD: usd}
	return s
}

// TestLsSaysWhatEachSessionDoesAndWhetherItIsKeptAwake: each row has the
// Session's state, for an Active one whether a Turn runs, Claude waits on
// a question or it is idle, Keep awake, and what it spent (an estimate);
// --json is the Hub's list.
func TestLsSaysWhatEachSessionDoesAndWhetherItIsKeptAwake(t *testing.T) {
	newFakeHub(t,
		session("s-turn", api.Active, "turn", "", false),
		session("s-question", api.Active, "question", "", false),
		spent(session("s-idle", api.Active, "", "", true), 1.5),
		session("s-asleep", api.Asleep, "", "it was idle for 30m0s", false),
		session("s-failed", api.Failed, "", "the start failed: clone: no such repository", true),
	)
	out, errOut, code := kndl("ls")
	if code != 0 {
		t.Fatalf("kndl ls: exit %d, %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if head := strings.Fields(lines[0]); strings.Join(head[:5], " ") != "ID STATE DOING KEEP AWAKE" {
		t.Fatalf("header %q", lines[0])
	}
	tests := []struct{ id, state, doing, keep, spent string }{
		{"s-turn", "active", "turn", "-", "-"},
		{"s-question", "active", "question", "-", "-"},
		{"s-idle", "active", "idle", "on", "$1.50 estimated"},
		{"s-asleep", "asleep", "-", "-", "-"},
		{"s-failed", "failed", "-", "on", "-"},
	}
	for i, tt := range tests {
		got := strings.Fields(lines[i+1])
		if len(got) < 4 || got[0] != tt.id || got[1] != tt.state || got[2] != tt.doing || got[3] != tt.keep {
			t.Errorf("row %q, want %s %s %s %s first", lines[i+1], tt.id, tt.state, tt.doing, tt.keep)
		}
		if !strings.HasSuffix(lines[i+1], " "+tt.spent) {
			t.Errorf("row %q, want what it spent last: %s", lines[i+1], tt.spent)
		}
	}

	out, _, _ = kndl("ls", "--json")
	var ss []api.Session
	if err := json.Unmarshal([]byte(out), &ss); err != nil || len(ss) != 5 || ss[0].Activity != "turn" || !ss[2].KeepAwake {
		t.Fatalf("kndl ls --json: %v %+v", err, ss)
	}
}

// TestLsFiltersAsTheSessionsPageDoes: kndl ls's flags are the list API's
// filter, and the Hub's refusal of one is what kndl ls says.
func TestLsFiltersAsTheSessionsPageDoes(t *testing.T) {
	h := newFakeHub(t, session("s-idle", api.Active, "", "", false))
	if _, errOut, code := kndl("ls", "--mine", "--waiting", "--repo", "https://github.com/acme/app.git", "--state", "active, asleep", "--creator", "bob", "--search", "login page"); code != 0 {
		t.Fatalf("kndl ls with every filter: exit %d, %s", code, errOut)
	}
	h.mu.Lock()
	got := h.listQuery
	h.mu.Unlock()
	if want := "creator=bob&mine=true&repo=https%3A%2F%2Fgithub.com%2Facme%2Fapp.git&search=login+page&state=active%2Casleep&waiting=true"; got != want {
		t.Errorf("the Hub was asked ?%s, want ?%s", got, want)
	}
	_, errOut, code := kndl("ls", "--state", "nope")
	if code == 0 || !strings.Contains(errOut, `no Session state "nope"`) {
		t.Errorf("kndl ls --state nope: exit %d, %q; want the Hub's refusal", code, errOut)
	}
}

// TestShowSaysWhyASessionFailed: a failed Session's reason is shown with
// how to retry it; another state's reason is shown as why.
func TestShowSaysWhyASessionFailed(t *testing.T) {
	newFakeHub(t,
		session("s-failed", api.Failed, "", "the start failed: clone: no such repository", false),
		session("s-asleep", api.Asleep, "", "it was idle for 30m0s", true),
		session("s-turn", api.Active, "turn", "", false),
	)
	tests := []struct {
		id   string
		want []string
	}{
		{"s-failed", []string{"state:      failed\n", "failed:     the start failed: clone: no such repository\n", "(kndl wake s-failed retries it)", "keep awake: off"}},
		{"s-asleep", []string{"state:      asleep\n", "why:        it was idle for 30m0s\n", "keep awake: on"}},
		{"s-turn", []string{"state:      active: a Turn runs\n"}},
	}
	for _, tt := range tests {
		out, errOut, code := kndl("show", tt.id)
		if code != 0 {
			t.Fatalf("kndl show %s: exit %d, %s", tt.id, code, errOut)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("kndl show %s lacks %q:\n%s", tt.id, w, out)
			}
		}
		if tt.id != "s-failed" && strings.Contains(out, "retries") {
			t.Errorf("kndl show %s offers a retry:\n%s", tt.id, out)
		}
	}
}

// TestShowSaysWhetherTheSandboxsGitMayPush: a read-only Creator's Session
// says its Sandbox's git is read-only and why; a pusher's that it pushes.
func TestShowSaysWhetherTheSandboxsGitMayPush(t *testing.T) {
	read, write := session("s-read", api.Active, "", "", false), session("s-write", api.Active, "", "", false)
	read.SandboxGit, write.SandboxGit = "read", "write"
	newFakeHub(t, read, write)
	for id, want := range map[string]string{"s-read": "git:        read-only, its Creator can't push to this Repo\n", "s-write": "git:        push and pull requests\n"} {
		if out, errOut, code := kndl("show", id); code != 0 || !strings.Contains(out, want) {
			t.Errorf("kndl show %s: exit %d %s, lacks %q:\n%s", id, code, errOut, want, out)
		}
	}
}

// TestShowListsPushedBranchesAndTheirPullRequests: each branch with its
// link, each pull request with its number, state, title and link.
func TestShowListsPushedBranchesAndTheirPullRequests(t *testing.T) {
	h := newFakeHub(t, session("s-1", api.Active, "idle", "", false))
	h.branches["s-1"] = []api.Branch{
		{Name: "kndl/test", URL: "https://github.com/acme/app/tree/kndl/test", Pulls: []api.Pull{
			{Number: 7, Title: "Add the thing", URL: "https://github.com/acme/app/pull/7", State: "open"},
			{Number: 3, Title: "First try", URL: "https://github.com/acme/app/pull/3", State: "closed", Merged: true},
		}},
		{Name: "kndl/other", URL: "https://github.com/acme/app/tree/kndl/other"},
	}
	out, errOut, code := kndl("show", "s-1")
	if code != 0 {
		t.Fatalf("kndl show: exit %d, %s", code, errOut)
	}
	want := "\nPushed branches:\n" +
		"  kndl/test  https://github.com/acme/app/tree/kndl/test\n" +
		"    #7 open  Add the thing  https://github.com/acme/app/pull/7\n" +
		"    #3 merged  First try  https://github.com/acme/app/pull/3\n" +
		"  kndl/other  https://github.com/acme/app/tree/kndl/other\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("kndl show ends:\n%s\nwant it to end:\n%s", out, want)
	}
}

// TestKeepAwakeThreadContextAndRestartAskTheHub: each sends its one request and says
// what it did, or with --json prints the Session after; a wrong word or a
// missing id is a usage error, and the Hub's refusal is the error.
func TestKeepAwakeThreadContextAndRestartAskTheHub(t *testing.T) {
	askTheHub(t, []hubChange{
		{[]string{"keep-awake", "s1", "on"}, `PUT /api/sessions/s1/keep-awake {"on":true}`, "Keep awake is on", 0},
		{[]string{"keep-awake", "s1", "off"}, `PUT /api/sessions/s1/keep-awake {"on":false}`, "Keep awake is off", 0},
		{[]string{"keep-awake", "--json", "s1", "on"}, `PUT /api/sessions/s1/keep-awake {"on":true}`, `"keep_awake": true`, 0},
		{[]string{"restart", "s1"}, "POST /api/sessions/s1/restart", "Restarting the Session", 0},
		{[]string{"restart", "s1", "--json"}, "POST /api/sessions/s1/restart", `"id": "s1"`, 0},
		{[]string{"wake", "s1"}, "POST /api/sessions/s1/wake", "Waking the Session.", 0},
		{[]string{"thread-context", "s1", "on"}, `PUT /api/sessions/s1/thread-context {"on":true}`, "now show in its history as context", 0},
		{[]string{"thread-context", "s1", "off"}, `PUT /api/sessions/s1/thread-context {"on":false}`, "no longer show", 0},
		{[]string{"thread-context", "s1"}, "", "", 2},
		{[]string{"keep-awake", "s1", "yes"}, "", "", 2},
		{[]string{"keep-awake", "s1"}, "", "", 2},
		{[]string{"restart"}, "", "", 2},
		{[]string{"restart", "nope"}, "", "", 1},
	})
}

// hubChange is a command that sends the Hub one change: what it is sent,
// what it prints, its exit code.
type hubChange struct {
	args   []string
	change string // what the Hub is sent
	out    string
	code   int
}

// askTheHub runs each command against a fake Hub holding Session s1 and
// checks what it sent and said; a refusal's message is the Hub's.
func askTheHub(t *testing.T, tests []hubChange) {
	t.Helper()
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			h := newFakeHub(t, session("s1", api.Active, "", "", true))
			out, errOut, code := kndl(tt.args...)
			var want []string
			if tt.change != "" {
				want = []string{tt.change}
			}
			if got := h.taken(); code != tt.code || strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.Contains(out, tt.out) {
				t.Fatalf("exit %d, sent %q, printed %q %q; want exit %d, %q sent, %q printed", code, got, out, errOut, tt.code, want, tt.out)
			}
			if tt.code == 1 && !strings.Contains(errOut, "There is no such Session.") {
				t.Fatalf("stderr %q, want the Hub's message", errOut)
			}
		})
	}
}

// TestQueueEditsReordersAndCancelsAPrompt: each change goes to its route
// with the body the Hub takes; a place that is not a number from 1 is
// refused before anything is sent.
func TestQueueEditsReordersAndCancelsAPrompt(t *testing.T) {
	h := newFakeHub(t, session("s1", api.Active, "", "", false))
	for _, args := range [][]string{
		{"queue", "s1", "mv", "p2", "1"},
		{"queue", "s1", "edit", "p3", "new\ttext"},
		{"queue", "s1", "cancel", "p4"},
	} {
		if out, errOut, code := kndl(args...); code != 0 {
			t.Fatalf("kndl %v: exit %d %s %s", args, code, out, errOut)
		}
	}
	if _, _, code := kndl("queue", "s1", "mv", "p2", "0"); code == 0 {
		t.Fatal("a place 0 was taken")
	}
	want := []string{
		`POST /api/sessions/s1/prompts/p2/move {"position":1}`,
		`PATCH /api/sessions/s1/prompts/p3 {"text":"new\ttext"}`,
		`DELETE /api/sessions/s1/prompts/p4`,
	}
	if got := h.taken(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	out, _, code := kndl("queue", "s1")
	if code != 0 || !strings.Contains(out, "The queue is empty.") {
		t.Fatalf("kndl queue: %d %q", code, out)
	}
}

// TestShowSaysWhatTheSessionAndEachTurnSpentAsAnEstimate: the head names
// the Session's tokens of each kind and their cost, by model too, and a
// Turn's end what the Turn spent; each cost is called an estimate.
func TestShowSaysWhatTheSessionAndEachTurnSpentAsAnEstimate(t *testing.T) {
	h := newFakeHub(t, session("s-1", api.Active, "idle", "", false))
	turn := []protocol.Usage{{Model: "claude-sonnet-5-5", Tokens: claude.Tokens{Input: 1_000_000, Output: 20_000, CacheRead: 300, CacheWrite: 4000}}}
	h.spent["s-1"] = api.SpentOf(turn)
	h.events["s-1"] = []api.Event{{Kind: protocol.EventTurnEnd, Reason: "done", TurnUsage: turn}}
	out, errOut, code := kndl("show", "s-1")
	if code != 0 {
		t.Fatalf("kndl show: exit %d, %s", code, errOut)
	}
	// 1 x 2 + 0.02 x 10 + 0.0003 x 0.1 + 0.004 x 2.5 = 2.21003
	line := "1,000,000 input · 20,000 output · 300 cache read · 4,000 cache write tokens · $2.21 estimated"
	for _, want := range []string{"spent:      " + line + "\n", "claude-sonnet-5-5: " + line + "\n", "-- turn ended (done)\n", "spent " + line + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("kndl show lacks %q:\n%s", want, out)
		}
	}
}
