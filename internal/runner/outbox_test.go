package runner

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// hubTaking serves one connection that takes session.events as the Hub
// registers them (ordered), each handed to take, and returns the Runner's
// side of it.
func hubTaking(t *testing.T, take func(protocol.SessionEvents)) *protocol.Conn {
	t.Helper()
	return hubServing(t, func(_ *websocket.Conn, m protocol.SessionEvents) { take(m) })
}

// hubServing is hubTaking with the Hub's side of the WebSocket at hand.
func hubServing(t *testing.T, take func(*websocket.Conn, protocol.SessionEvents)) *protocol.Conn {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := protocol.NewConn(ws, slog.New(slog.DiscardHandler))
		c.Handle(protocol.TypeSessionEvents, true, func(ctx context.Context, b json.RawMessage) (any, error) {
			var m protocol.SessionEvents
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, err
			}
			take(ws, m)
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
	return c
}

// sending starts an outbox on c that waits replyWait for each reply and
// logs to log.
func sending(t *testing.T, c *protocol.Conn, replyWait time.Duration, log *testkit.Buffer) *outbox {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	o := &outbox{log: slog.New(slog.NewTextHandler(log, nil)), replyWait: replyWait,
		conn: func(ctx context.Context) *protocol.Conn {
			if ctx.Err() != nil {
				return nil
			}
			return c
		},
		spawn: func(f func()) { wg.Go(f) }}
	o.start(ctx)
	return o
}

// taken records the texts of the Events the fake Hub took, in order.
type taken struct {
	mu    sync.Mutex
	texts []string
}

func (tk *taken) add(m protocol.SessionEvents) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	for _, e := range m.Events {
		tk.texts = append(tk.texts, m.SessionID+":"+e.Text)
	}
}

func (tk *taken) are(want ...string) bool {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return slices.Equal(tk.texts, want)
}

func (tk *taken) has(text string) bool {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return slices.Contains(tk.texts, text)
}

func logLine(session, text string) protocol.SessionEvents {
	return protocol.SessionEvents{SessionID: session, Events: []protocol.Event{{At: time.Now(), Kind: protocol.EventLog, Text: text}}}
}

// TestAHeldSessionDelaysNoOtherSession: a Hub that holds one Session's
// message without an answer holds only that Session's: another Session's
// messages arrive at once, in order, and the held one goes on when the
// Hub answers.
func TestAHeldSessionDelaysNoOtherSession(t *testing.T) {
	release := make(chan struct{})
	var tk taken
	c := hubTaking(t, func(m protocol.SessionEvents) {
		if m.SessionID == "a" {
			<-release
		}
		tk.add(m)
	})
	var log testkit.Buffer
	o := sending(t, c, testenv.WaitLong, &log)
	o.add("a", protocol.TypeSessionEvents, logLine("a", "1"))
	o.add("b", protocol.TypeSessionEvents, logLine("b", "1"))
	o.add("b", protocol.TypeSessionEvents, logLine("b", "2"))
	testenv.Eventually(t, 2*time.Second, "Session b's messages while a's is held", func() bool { return tk.are("b:1", "b:2") })
	close(release)
	testenv.Eventually(t, testenv.WaitShort, "Session a's message once the Hub answers", func() bool { return tk.are("b:1", "b:2", "a:1") })
}

// TestAMessageHeldPastItsDeadlineGoesAgainNamedInTheLogAndKeepsItsPlace: a
// reply that doesn't come within replyWait sends the message again, and
// the log names it, its Session and how long it has waited; the Hub takes
// it once, and the Session's later messages still come after it.
func TestAMessageHeldPastItsDeadlineGoesAgainNamedInTheLogAndKeepsItsPlace(t *testing.T) {
	var log testkit.Buffer
	resent := func() bool { return strings.Contains(log.String(), "sending it again") }
	var tk taken
	c := hubTaking(t, func(m protocol.SessionEvents) {
		if m.Events[0].Text == "1" {
			// Held until the Runner has sent it again.
			for end := time.Now().Add(testenv.WaitShort); !resent() && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		tk.add(m)
	})
	o := sending(t, c, 100*time.Millisecond, &log)
	for _, text := range []string{"1", "2", "3"} {
		o.add("a", protocol.TypeSessionEvents, logLine("a", text))
	}
	testenv.Eventually(t, testenv.WaitShort, "every message", func() bool { return tk.has("a:3") })
	if !tk.are("a:1", "a:2", "a:3") {
		t.Errorf("the Hub took %v, want a:1, a:2, a:3, each once", tk.texts)
	}
	out := log.String()
	for _, want := range []string{"the Hub has not answered a message in time; sending it again",
		"type=" + protocol.TypeSessionEvents, "session=a", "waited=", "the Hub took a message it held"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}

// TestAMessageInFlightWhenTheConnectionDropsGoesOnTheNext: a message whose
// connection ends before the Hub answers stays first in its lane and goes
// on the next connection, the one behind it after it.
func TestAMessageInFlightWhenTheConnectionDropsGoesOnTheNext(t *testing.T) {
	r := &Runner{}
	dropped := make(chan struct{})
	r.link.set(hubServing(t, func(ws *websocket.Conn, m protocol.SessionEvents) {
		ws.CloseNow() // unanswered
		close(dropped)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	r.out = outbox{log: slog.New(slog.DiscardHandler), conn: r.link.live, spawn: func(f func()) { wg.Go(f) }, replyWait: testenv.WaitLong}
	r.out.start(ctx)
	for _, text := range []string{"1", "2"} {
		r.notify("a", protocol.TypeSessionEvents, logLine("a", text))
	}
	<-dropped
	var tk taken
	r.link.set(hubTaking(t, tk.add))
	testenv.Eventually(t, testenv.WaitShort, "both messages on the next connection", func() bool { return tk.are("a:1", "a:2") })
}

// TestFlushedWaitsForTheSessionsEarlierMessages: flushed returns once the
// Hub took every message of the Session's lane queued before it (not
// before: a start's answer waits on it, so the Hub takes a stopped Claude
// Code's last hooks before the next run is Active), at once for a lane with
// nothing waiting, and past its wait with a line naming the Session.
func TestFlushedWaitsForTheSessionsEarlierMessages(t *testing.T) {
	release := make(chan struct{})
	var tk taken
	c := hubTaking(t, func(m protocol.SessionEvents) {
		if m.Events[0].Text == "held" {
			<-release
		}
		tk.add(m)
	})
	var log testkit.Buffer
	o := sending(t, c, testenv.WaitLong, &log)
	ctx := context.Background()

	start := time.Now()
	o.flushed(ctx, "a", testenv.WaitLong)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("an empty lane was flushed after %s, want at once", took)
	}

	o.add("a", protocol.TypeSessionEvents, logLine("a", "1"))
	o.add("a", protocol.TypeSessionEvents, logLine("a", "held"))
	o.flushed(ctx, "a", 200*time.Millisecond)
	if !strings.Contains(log.String(), "the Hub has not taken a Session's earlier messages in time; going on") || !strings.Contains(log.String(), "session=a") {
		t.Fatalf("a flush past its wait is not logged:\n%s", log.String())
	}

	flushed := make(chan struct{})
	go func() { o.flushed(ctx, "a", testenv.WaitLong); close(flushed) }()
	select {
	case <-flushed:
		t.Fatal("flushed before the Hub took the held message")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case <-flushed:
	case <-time.After(testenv.WaitShort):
		t.Fatal("not flushed once the Hub took the held message")
	}
	if !tk.are("a:1", "a:held") {
		t.Fatalf("the Hub took %v, want a:1, a:held", tk.texts)
	}
}
