package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// TestEverySocketAndTheEventListSendOneEventShape: /events, /watch and
// /live carry a Session's Events alike (decoded, numbered), and both
// sockets send the Session as it changes, with no poll.
func TestEverySocketAndTheEventListSendOneEventShape(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	repo, _ := f.store.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	f.hub.sessions.Record(ctx, s.ID, protocol.Event{Kind: protocol.EventText, Text: "stored\tbefore"})

	code, body := f.call(t, http.MethodGet, "/api/sessions/"+s.ID+"/events", "")
	var listed []api.Event
	if code != http.StatusOK || json.Unmarshal([]byte(body), &listed) != nil || len(listed) != 1 {
		t.Fatalf("events: %d %s", code, body)
	}
	want := listed[0]
	if want.Seq != 1 || want.Kind != protocol.EventText || want.Text != "stored\tbefore" {
		t.Fatalf("listed %+v, want the Event decoded with its seq", want)
	}

	for _, path := range []string{"/watch", "/live"} {
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/api/sessions/"+s.ID+path,
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + f.cli}}})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer ws.CloseNow()
		read := func(typ string) api.LiveMessage {
			t.Helper()
			rctx, cancel := context.WithTimeout(ctx, testenv.WaitShort)
			defer cancel()
			for {
				_, b, err := ws.Read(rctx)
				if err != nil {
					t.Fatalf("%s: no %s message: %v", path, typ, err)
				}
				var m api.LiveMessage
				json.Unmarshal(b, &m)
				if m.Type == typ {
					return m
				}
			}
		}
		if m := read("session"); m.Session == nil || m.Session.ID != s.ID {
			t.Fatalf("%s: first session message %+v", path, m)
		}
		if m := read("event"); m.Event == nil || m.Event.Seq != want.Seq || m.Event.Kind != want.Kind || m.Event.Text != want.Text {
			t.Fatalf("%s: event %+v, want %+v", path, m.Event, want)
		}
		on := path == "/watch" // on for the first socket, off again for the second
		f.hub.sessions.SetKeepAwake(ctx, s.ID, on)
		if m := read("session"); m.Session.KeepAwake != on {
			t.Fatalf("%s: Keep awake set %v, the Session says %v", path, on, m.Session.KeepAwake)
		}
	}
}

// TestWatchersPastTheBoundWaitTheirTurnWhileHealthAnswers: a standby is
// dialled by every watcher at once, and their reads, from the sign-in's
// token to the history, must leave the store to /health and the Runners
// (catchUps, catchUpFirst). With every turn taken, a watcher's dial waits
// without reading its token while /health answers; once a turn frees, it
// gets the Session and its Events.
func TestWatchersPastTheBoundWaitTheirTurnWhileHealthAnswers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	repo, _ := f.store.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	s := f.sessionOf(t, repo.ID, dev.ID)
	f.hub.sessions.Record(ctx, s.ID, protocol.Event{Kind: protocol.EventText, Text: "stored"})
	for _, path := range []string{"/watch", "/live"} {
		var turns []func() // all of them, each ending by itself after catchUpTurn
		for range maxCatchUps {
			tctx, cancel := context.WithTimeout(ctx, testenv.WaitShort)
			leave, ok := f.hub.catchUp.enter(tctx)
			cancel()
			if !ok {
				t.Fatal("got no turn within 5 s, want the one a caught-up watcher gives back")
			}
			turns = append(turns, leave)
		}
		dial := func(wait time.Duration) (*websocket.Conn, error) {
			dctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			ws, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/api/sessions/"+s.ID+path,
				&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + f.cli}}})
			return ws, err
		}
		var signins atomic.Int32
		f.store.Observe(func(op string, _ time.Duration) {
			if op == "user_by_cli_token" {
				signins.Add(1)
			}
		})
		// The window a watcher is seen waiting in, not a wait for a condition.
		if ws, err := dial(300 * time.Millisecond); err == nil {
			ws.CloseNow()
			t.Fatalf("%s: got a watcher through with all %d turns taken, want it waiting", path, maxCatchUps)
		}
		f.store.Observe(nil)
		if n := signins.Load(); n != 0 {
			t.Fatalf("%s: a waiting watcher's token was read %d times, want none until its turn", path, n)
		}
		if code, body := f.call(t, http.MethodGet, "/health", ""); code != http.StatusOK {
			t.Fatalf("/health while watchers wait: got %d %s, want 200", code, body)
		}
		for _, leave := range turns {
			leave()
		}
		ws, err := dial(testenv.WaitShort)
		if err != nil {
			t.Fatalf("%s: got %v once a turn freed, want the watcher through", path, err)
		}
		defer ws.CloseNow()
		rctx, cancel := context.WithTimeout(ctx, testenv.WaitShort)
		defer cancel()
		for got := ""; got != "event"; {
			_, b, err := ws.Read(rctx)
			if err != nil {
				t.Fatalf("%s: got %v before the stored Event, want it", path, err)
			}
			var m api.LiveMessage
			json.Unmarshal(b, &m)
			got = m.Type
		}
	}
}

// TestTheRoutesWhoseSignInWaitsATurnAreRoutes: catchUpFirst names routes
// by pattern; a route renamed would lose its bound without a word.
func TestTheRoutesWhoseSignInWaitsATurnAreRoutes(t *testing.T) {
	f := newFixture(t)
	for pattern := range catchUpFirst {
		if !slices.ContainsFunc(f.hub.routes(), func(rt route) bool { return rt.pattern == pattern }) {
			t.Errorf("catchUpFirst names %q, which is no route", pattern)
		}
	}
}
