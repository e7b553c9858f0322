package runner

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestAMessageTheHubHoldsIsNamedInTheLog: the outbox sends one message at
// a time, each once the Hub replied, so a Hub that holds one without an
// answer holds every Session's Events behind it. The Runner's log says so
// while it waits, and when the answer comes.
func TestAMessageTheHubHoldsIsNamedInTheLog(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := protocol.NewConn(ws, slog.New(slog.DiscardHandler))
		c.Handle(protocol.TypeSessionEvents, true, func(ctx context.Context, b json.RawMessage) (any, error) {
			<-release
			return nil, nil
		})
		c.Serve(r.Context())
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := protocol.NewConn(ws, slog.New(slog.DiscardHandler))
	go c.Serve(ctx)

	var log testkit.Buffer
	r := &Runner{log: slog.New(slog.NewTextHandler(&log, nil)), replyWait: 100 * time.Millisecond}
	done := make(chan error, 1)
	go func() {
		done <- r.deliverOne(ctx, c, outgoing{protocol.TypeSessionEvents, protocol.SessionEvents{SessionID: "s"}})
	}()
	testenv.Eventually(t, testenv.WaitShort, "the log naming the held message", func() bool {
		return strings.Contains(log.String(), "the Hub has not answered a message yet") && strings.Contains(log.String(), "type="+protocol.TypeSessionEvents)
	})
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("deliverOne: %v", err)
		}
	case <-time.After(testenv.WaitShort):
		t.Fatal("deliverOne still waits after the Hub answered")
	}
	if !strings.Contains(log.String(), "the Hub answered a message it held") {
		t.Errorf("the log does not say the answer came:\n%s", log.String())
	}
}
