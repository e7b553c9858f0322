package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

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
