package runner

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/protocol"
)

// linked starts r's outbox on its link to the Hub, as Run does.
func linked(t *testing.T, r *Runner) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	r.out = outbox{log: r.log, conn: r.link.live, spawn: func(f func()) { wg.Go(f) }, replyWait: replyWaitDefault}
	r.out.start(ctx)
}

// hubEnd connects a Hub to r, as a Hub the Runner dialled: it returns the
// Hub's end of a new connection whose Runner end r's handlers serve and
// r's outbox sends on. The Hub takes session.events.
func hubEnd(t *testing.T, r *Runner) *protocol.Conn {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ws, err := websocket.Accept(w, req, nil)
		if err != nil {
			return
		}
		c := protocol.NewConn(ws, slog.New(slog.DiscardHandler))
		r.handle(c)
		r.link.set(c)
		c.Serve(req.Context())
	}))
	ws, _, err := websocket.Dial(t.Context(), strings.Replace(srv.URL, "http", "ws", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	hub := protocol.NewConn(ws, slog.New(slog.DiscardHandler))
	hub.Handle(protocol.TypeSessionEvents, true, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	served := make(chan struct{})
	go func() { defer close(served); hub.Serve(context.Background()) }()
	t.Cleanup(func() {
		hub.Close(websocket.StatusNormalClosure, "test over")
		<-served
		srv.Close()
	})
	return hub
}

// TestAPromptSentAgainIsTypedOnceAcrossAHubAndARunnerRestart: Claude Code
// took a prompt and the Runner's reply was lost with the Hub; the next Hub
// (a standby, or the same one restarted) sends it again, and again to the
// Runner restarted meanwhile. Each time the Runner answers taken before,
// typing nothing, and a new prompt is typed as ever.
func TestAPromptSentAgainIsTypedOnceAcrossAHubAndARunnerRestart(t *testing.T) {
	p := &fakePane{}
	r, s := fakeSession(t, p)
	// The Runner restarted: a new supervisor of the Session, over its
	// directory, its Claude Code's pane the same (counted apart here).
	again := &fakePane{}
	r2, s2 := fakeSession(t, again)
	again.mu.Lock()
	again.staged = p.staged
	again.mu.Unlock()
	s2.dir = s.dir
	linked(t, r)
	linked(t, r2)

	deliver := func(r *Runner, prompt string) protocol.SessionDelivered {
		t.Helper()
		var got protocol.SessionDelivered
		err := hubEnd(t, r).Request(t.Context(), protocol.TypeSessionDeliver,
			protocol.SessionDeliver{SessionID: "s1", PromptID: prompt, Text: "text of " + prompt, WithinMS: 30_000}, &got)
		if err != nil {
			t.Fatalf("deliver %s: %v", prompt, err)
		}
		return got
	}
	for _, tt := range []struct {
		name   string
		r      *Runner
		prompt string
		want   protocol.SessionDelivered
		typed  []int // by p, then again, after
	}{
		{"the first Hub", r, "p1", protocol.SessionDelivered{Taken: true, Tries: 1}, []int{1, 0}},
		{"the next Hub", r, "p1", protocol.SessionDelivered{Taken: true, Before: true}, []int{1, 0}},
		{"the next Hub, the Runner restarted", r2, "p1", protocol.SessionDelivered{Taken: true, Before: true}, []int{1, 0}},
		{"a new prompt", r2, "p2", protocol.SessionDelivered{Taken: true, Tries: 1}, []int{1, 1}},
	} {
		if got := deliver(tt.r, tt.prompt); got != tt.want {
			t.Fatalf("%s: %s answered %+v, want %+v", tt.name, tt.prompt, got, tt.want)
		}
		typed, _ := p.counts()
		typedAgain, _ := again.counts()
		if typed != tt.typed[0] || typedAgain != tt.typed[1] {
			t.Fatalf("%s: typed %d times, then %d after the restart; want %d, then %d", tt.name, typed, typedAgain, tt.typed[0], tt.typed[1])
		}
	}
}
