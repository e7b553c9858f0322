package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/testkit"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// pair returns a served server-side Conn (with an echo and a failing
// handler, and those handle registers) and a raw client WebSocket to poke
// it with.
func pair(t *testing.T, handle ...func(*Conn)) (*Conn, *websocket.Conn, chan error) {
	t.Helper()
	// Not the request's context, which ends as the server's handler
	// returns: the Conn's handlers may outlive Serve.
	return pairIn(t, context.Background(), handle...)
}

// pairIn is pair with the server-side Conn served in ctx.
func pairIn(t *testing.T, ctx context.Context, handle ...func(*Conn)) (*Conn, *websocket.Conn, chan error) {
	t.Helper()
	served := make(chan *Conn, 1)
	done := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := NewConn(ws, quiet)
		c.Handle("echo", false, func(ctx context.Context, b json.RawMessage) (any, error) { return b, nil })
		c.Handle("missing", false, func(ctx context.Context, b json.RawMessage) (any, error) {
			return nil, fmt.Errorf("no such thing: %w", errdefs.ErrNotFound)
		})
		for _, h := range handle {
			h(c)
		}
		served <- c
		done <- c.Serve(ctx)
	}))
	t.Cleanup(srv.Close)
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(MaxFrameBytes * 2)
	t.Cleanup(func() { ws.CloseNow() })
	return <-served, ws, done
}

func readFrame(t *testing.T, ws *websocket.Conn) Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	f, err := Decode(b)
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return f
}

func write(t *testing.T, ws *websocket.Conn, typ websocket.MessageType, s string) {
	t.Helper()
	if err := ws.Write(context.Background(), typ, []byte(s)); err != nil {
		t.Fatal(err)
	}
}

func TestRequestReplyAndErrorClass(t *testing.T) {
	_, ws, _ := pair(t)
	client := NewConn(ws, quiet)
	go client.Serve(context.Background())
	ctx := context.Background()
	var got map[string]int
	if err := client.Request(ctx, "echo", map[string]int{"n": 7}, &got); err != nil || got["n"] != 7 {
		t.Fatalf("echo = %v, %v; want n=7", got, err)
	}
	err := client.Request(ctx, "missing", nil, nil)
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound across the wire", err)
	}
}

func TestBadFrames(t *testing.T) {
	tests := []struct {
		name      string
		typ       websocket.MessageType
		frame     string
		wantCode  string
		wantClose websocket.StatusCode // -1: stays open
	}{
		{"unknown type", websocket.MessageText, `{"type":"no.such","id":"1"}`, "invalid", -1},
		{"unknown notification", websocket.MessageText, `{"type":"no.such"}`, "invalid", -1},
		{"not json", websocket.MessageText, `{"type":`, "invalid", websocket.StatusInvalidFramePayloadData},
		{"json array", websocket.MessageText, `[1,2]`, "invalid", websocket.StatusInvalidFramePayloadData},
		{"bad type", websocket.MessageText, `{"type":"<script>"}`, "invalid", websocket.StatusInvalidFramePayloadData},
		{"reply without id", websocket.MessageText, `{"type":"reply"}`, "invalid", websocket.StatusInvalidFramePayloadData},
		{"binary", websocket.MessageBinary, `{"type":"echo","id":"1"}`, "invalid", websocket.StatusUnsupportedData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ws, done := pair(t)
			write(t, ws, tt.typ, tt.frame)
			f := readFrame(t, ws)
			if f.Error == nil || f.Error.Code != tt.wantCode {
				t.Fatalf("got %+v, want an error with code %s", f, tt.wantCode)
			}
			if tt.wantClose == -1 {
				// Still serving: a good request is answered.
				write(t, ws, websocket.MessageText, `{"type":"echo","id":"9","body":{"ok":1}}`)
				if f := readFrame(t, ws); f.ID != "9" || f.Error != nil {
					t.Fatalf("after a bad frame, echo got %+v", f)
				}
				return
			}
			_, _, err := ws.Read(context.Background())
			if got := websocket.CloseStatus(err); got != tt.wantClose {
				t.Fatalf("close status = %v, want %v (err %v)", got, tt.wantClose, err)
			}
			if err := <-done; err == nil {
				t.Fatal("Serve returned nil after a fatal frame")
			}
		})
	}
}

func TestOversizedFrameCloses(t *testing.T) {
	_, ws, done := pair(t)
	big := `{"type":"echo","id":"1","body":"` + strings.Repeat("a", MaxFrameBytes) + `"}`
	write(t, ws, websocket.MessageText, big)
	_, _, err := ws.Read(context.Background())
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
		t.Fatalf("close status = %v, want %v", got, websocket.StatusMessageTooBig)
	}
	if err := <-done; err == nil {
		t.Fatal("Serve returned nil after an oversized frame")
	}
}

func TestNegotiate(t *testing.T) {
	tests := []struct {
		min, max, want int
		ok             bool
	}{
		{MinVersion, MinVersion, MinVersion, true},
		{1, 99, Version, true},
		{1, MinVersion - 1, 0, false}, // a Runner older than the Hub takes
		{Version + 1, Version + 5, 0, false},
		{0, 0, 0, false},
	}
	for _, tt := range tests {
		got, err := Negotiate(Hello{MinVersion: tt.min, MaxVersion: tt.max})
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Negotiate(%d..%d) = %d, %v; want %d, ok=%v", tt.min, tt.max, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"type":"hello","id":"1","body":{}}`, `{"type":"reply","id":"2","error":{"code":"x","message":"y"}}`, `{}`, `null`, `[]`, `{"type":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Decode(b)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("Decode error without class: %v", err)
			}
			return
		}
		if !typeRE().MatchString(fr.Type) || len(fr.ID) > 64 {
			t.Fatalf("Decode accepted a bad frame: %+v", fr)
		}
	})
}

// TestASilentLineIsDroppedOnBothSides cuts the line between two Conns with
// no reset and no close, as a pulled cable does: each side's ping goes
// unanswered and each drops the connection within two ping periods, where
// without pings both would wait for ever. An idle line that answers is
// kept.
func TestASilentLineIsDroppedOnBothSides(t *testing.T) {
	const every = 150 * time.Millisecond
	hubSide := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := NewConn(ws, quiet)
		c.SetPingEvery(every)
		hubSide <- c.Serve(context.Background())
	}))
	t.Cleanup(srv.Close)
	line := testkit.NewProxy(t, strings.TrimPrefix(srv.URL, "http://"))
	ws, _, err := websocket.Dial(context.Background(), "ws://"+line.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	client := NewConn(ws, quiet)
	client.SetPingEvery(every)
	runnerSide := make(chan error, 1)
	go func() { runnerSide <- client.Serve(context.Background()) }()

	select {
	case err := <-runnerSide:
		t.Fatalf("an idle line that answers pings was dropped: %v", err)
	case err := <-hubSide:
		t.Fatalf("an idle line that answers pings was dropped on the server: %v", err)
	case <-time.After(5 * every):
	}
	line.Cut()
	cut := time.Now()
	for _, side := range []struct {
		name string
		done chan error
	}{{"the dialling side", runnerSide}, {"the accepting side", hubSide}} {
		select {
		case err := <-side.done:
			if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "no pong") {
				t.Errorf("%s ended with %v, want a missing pong (unavailable)", side.name, err)
			}
		case <-time.After(4 * every):
			t.Fatalf("%s still waits %s after the line went silent", side.name, time.Since(cut).Round(time.Millisecond))
		}
	}
	if waited := time.Since(cut); waited > 3*every {
		t.Errorf("the drop took %s, want within two ping periods (%s) and a little", waited, 2*every)
	}
}

// TestAGitHubTokensLifeIsReadOnTheReceiversClock: a token's expiry is the
// seconds it had left from when it arrived, whatever the sender's clock
// said its ExpiresAt was; from a sender without ExpiresIn, its ExpiresAt.
func TestAGitHubTokensLifeIsReadOnTheReceiversClock(t *testing.T) {
	received := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	hubSaid := received.Add(-20 * time.Minute) // a Hub 80 minutes behind sent a one-hour token
	if got := (GitHubToken{ExpiresAt: hubSaid, ExpiresIn: 3600}).Expiry(received); !got.Equal(received.Add(time.Hour)) {
		t.Errorf("Expiry = %v, want an hour after it arrived", got)
	}
	if got := (GitHubToken{ExpiresAt: hubSaid}).Expiry(received); !got.Equal(hubSaid) {
		t.Errorf("Expiry without ExpiresIn = %v, want ExpiresAt", got)
	}
}

// serveOrdered serves Conns whose "ordered" type is handled by h, in
// order per lane, beside the echo, all remembering what their lanes took
// in one Taken, and returns a dialler of raw client WebSockets.
func serveOrdered(t *testing.T, h Handler) (dial func() *websocket.Conn) {
	t.Helper()
	var taken Taken
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := NewConn(ws, quiet)
		c.Remember(&taken)
		c.Handle("ordered", true, h)
		c.Handle("echo", false, func(ctx context.Context, b json.RawMessage) (any, error) { return b, nil })
		// As the Hub serves a Runner: the request, and so its context,
		// ends once the connection's handlers have.
		c.Serve(r.Context())
		c.Wait()
	}))
	t.Cleanup(srv.Close)
	return func() *websocket.Conn {
		ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.CloseNow() })
		return ws
	}
}

// TestAHeldLaneDelaysNoOtherLaneNorARequest: an ordered frame whose
// handler has not returned holds the frames of its own lane, and nothing
// else: another lane's frame and a request of another type are answered
// at once, and the held lane's next frame after the held one.
func TestAHeldLaneDelaysNoOtherLaneNorARequest(t *testing.T) {
	release := make(chan struct{})
	ws := serveOrdered(t, func(ctx context.Context, b json.RawMessage) (any, error) {
		if string(b) == `"held"` {
			<-release
		}
		return b, nil
	})()
	write(t, ws, websocket.MessageText, `{"type":"ordered","id":"1","lane":"a","body":"held"}`)
	write(t, ws, websocket.MessageText, `{"type":"ordered","id":"2","lane":"a","body":"after"}`)
	write(t, ws, websocket.MessageText, `{"type":"ordered","id":"3","lane":"b","body":"other"}`)
	write(t, ws, websocket.MessageText, `{"type":"echo","id":"4","body":"echo"}`)
	var got []string
	for range 2 {
		got = append(got, readFrame(t, ws).ID)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"3", "4"}) {
		t.Fatalf("answered %v while lane a is held, want 3 and 4", got)
	}
	close(release)
	for _, want := range []string{"1", "2"} {
		if f := readFrame(t, ws); f.ID != want {
			t.Fatalf("answered %s, want %s: a lane's frames in order", f.ID, want)
		}
	}
}

// TestAMessageSentAgainUnderItsOnceIsHandledOnce: a request sent again in
// its lane under the once it was taken with is answered without being
// handled again, on the same connection or the next one that remembers in
// the same Taken; a new once is handled.
func TestAMessageSentAgainUnderItsOnceIsHandledOnce(t *testing.T) {
	var handled atomic.Int32
	dial := serveOrdered(t, func(ctx context.Context, b json.RawMessage) (any, error) {
		handled.Add(1)
		return nil, nil
	})
	send := func(ws *websocket.Conn, once string) {
		write(t, ws, websocket.MessageText, fmt.Sprintf(`{"type":"ordered","id":"1","lane":"a","once":%q,"body":{}}`, once))
		if f := readFrame(t, ws); f.Error != nil {
			t.Fatalf("once %s: %v", once, f.Error)
		}
	}
	ws := dial()
	send(ws, "x")
	send(ws, "x")
	send(ws, "y")
	send(dial(), "y")
	if n := handled.Load(); n != 2 {
		t.Errorf("handled %d times, want 2: once x, once y", n)
	}
}

// TestALaneOnAnOldAndANewConnectionIsHandledInOrderOnce: a Runner that
// dials again while its old connection's handler of a lane still runs
// (the Hub's store slow) sends that message again, then the next, on the
// new connection. The new connection waits for the old one's handler to
// let the lane go, answers the message sent again as taken, without
// handling it twice, and handles the next one after it: one lane is
// handled one frame at a time across a Runner's connections, not per
// connection.
func TestALaneOnAnOldAndANewConnectionIsHandledInOrderOnce(t *testing.T) {
	entered, release := make(chan struct{}, 2), make(chan struct{})
	var mu sync.Mutex
	var handled []string
	dial := serveOrdered(t, func(ctx context.Context, b json.RawMessage) (any, error) {
		var body string
		json.Unmarshal(b, &body)
		entered <- struct{}{}
		if body == "first" {
			<-release
		}
		mu.Lock()
		handled = append(handled, body)
		mu.Unlock()
		return nil, nil
	})
	old := dial()
	write(t, old, websocket.MessageText, `{"type":"ordered","id":"1","lane":"a","once":"x","body":"first"}`)
	<-entered
	old.CloseNow() // its reply lost: the Runner sends it again on the next
	next := dial()
	write(t, next, websocket.MessageText, `{"type":"ordered","id":"1","lane":"a","once":"x","body":"first"}`)
	write(t, next, websocket.MessageText, `{"type":"ordered","id":"2","lane":"a","once":"y","body":"second"}`)
	// The echo's answer came after both frames were read and queued, so
	// a handler of either would have entered by then were it not held.
	write(t, next, websocket.MessageText, `{"type":"echo","id":"3","body":"echo"}`)
	if f := readFrame(t, next); f.ID != "3" {
		t.Fatalf("answered %s while lane a is held on the old connection, want only the echo (3)", f.ID)
	}
	select {
	case <-entered:
		t.Error("the new connection handled lane a while the old one's handler of it still ran")
	default:
	}
	close(release)
	for _, want := range []string{"1", "2"} {
		if f := readFrame(t, next); f.ID != want || f.Error != nil {
			t.Fatalf("answered %s (error %v), want %s: the lane's frames in order", f.ID, f.Error, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(handled, []string{"first", "second"}) {
		t.Errorf("handled %q, want first once, then second", handled)
	}
}

// TestAConnectionsEndWaitsForNoHandlerAndCutsNone: when the peer goes,
// Serve returns at once though a handler still runs (a Runner whose Hub
// died dials the next one without waiting for it), and the handler is not
// cut: its context stays live until it returns, so what it does is done
// whole. Wait returns once it has.
func TestAConnectionsEndWaitsForNoHandlerAndCutsNone(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	cut := make(chan error, 1)
	c, ws, served := pair(t, func(c *Conn) {
		c.Handle("held", false, func(ctx context.Context, b json.RawMessage) (any, error) {
			close(entered)
			<-release
			cut <- ctx.Err()
			return nil, nil
		})
	})
	write(t, ws, websocket.MessageText, `{"type":"held","id":"1","body":{}}`)
	<-entered
	ws.CloseNow()
	select {
	case err := <-served:
		if !errors.Is(err, errdefs.ErrUnavailable) {
			t.Errorf("Serve ended with %v, want the connection lost (unavailable)", err)
		}
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("Serve still waits for a handler 5 s after the peer went")
	}
	waited := make(chan struct{})
	go func() { c.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while a handler still runs")
	case <-time.After(50 * time.Millisecond): // Wait must still be waiting: a check of absence
	}
	close(release)
	if err := <-cut; err != nil {
		t.Errorf("the handler's context ended with the connection (%v), want it live until the handler returns", err)
	}
	<-waited
}

// TestADroppedConnectionIsToldFromAClosedOne: Dropped is true for a
// connection that ended with neither side closing it (the peer's TCP
// connection gone, as a killed process's), and false for one the peer
// closed or this side did, so the Hub logs only the first as lost, with
// why and how long the peer had been silent.
func TestADroppedConnectionIsToldFromAClosedOne(t *testing.T) {
	for _, c := range []struct {
		name    string
		end     func(c *Conn, ws *websocket.Conn)
		dropped bool
	}{
		{"the peer's TCP connection ends", func(c *Conn, ws *websocket.Conn) { ws.CloseNow() }, true},
		{"the peer closes", func(c *Conn, ws *websocket.Conn) { ws.Close(websocket.StatusNormalClosure, "bye") }, false},
		{"this side closes", func(c *Conn, ws *websocket.Conn) {
			ws.CloseRead(context.Background()) // the peer answers the close
			c.Close(websocket.StatusGoingAway, "going")
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, ws, served := pair(t)
			write(t, ws, websocket.MessageText, `{"type":"echo","id":"1","body":"x"}`)
			readFrame(t, ws)
			c.end(conn, ws)
			select {
			case <-served:
			case <-time.After(5 * time.Second):
				t.Fatal("Serve still runs 5 s after the end")
			}
			if got := conn.Dropped(); got != c.dropped {
				t.Errorf("Dropped() = %v (ended with %v), want %v", got, conn.Err(), c.dropped)
			}
			if conn.SinceRead() <= 0 {
				t.Errorf("SinceRead() = %v after a frame read, want above 0", conn.SinceRead())
			}
		})
	}
}

// TestARequestGivenUpMidWriteLeavesTheConnectionUp: a caller whose context
// ends while its frame is being written (the peer slow to read, the host
// busy) gives up alone. coder/websocket closes the whole connection when a
// write's context ends mid-write, which cut a Runner's every Session (its
// peer saw EOF) for one request past its deadline; the write goes on, and
// the connection with it.
func TestARequestGivenUpMidWriteLeavesTheConnectionUp(t *testing.T) {
	c, ws, _ := pair(t)
	big := strings.Repeat("x", MaxFrameBytes-1024)
	// The peer reads nothing yet: fill the line until a write is held.
	var held context.CancelFunc
	var heldDone chan error
	for i := 0; i < 64 && held == nil; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Notify(ctx, "big", big) }()
		select {
		case err := <-done:
			cancel()
			if err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
		case <-time.After(300 * time.Millisecond):
			held, heldDone = cancel, done
		}
	}
	if held == nil {
		t.Fatal("64 frames of 1 MiB written to a peer that reads none; want one held")
	}
	held() // its caller gives up mid-write
	time.Sleep(100 * time.Millisecond)
	ids := make(chan string, 128)
	go func() {
		defer close(ids)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			if f, err := Decode(b); err == nil {
				ids <- f.ID
			}
		}
	}()
	<-heldDone
	write(t, ws, websocket.MessageText, `{"type":"echo","id":"after","body":"still"}`)
	timeout := time.After(10 * time.Second)
	for {
		select {
		case id, ok := <-ids:
			if !ok {
				t.Fatalf("the connection ended when one caller gave up mid-write: %v", c.Err())
			}
			if id == "after" {
				return
			}
		case <-timeout:
			t.Fatal("no answer to a request 10 s after a caller gave up mid-write")
		}
	}
}

// TestAStoppedSideClosesTheConnectionItDoesNotDropIt: a Conn whose Serve
// context ends (a Runner or a Hub stopping) closes the connection with
// StatusGoingAway, so the peer reads a close (its Conn's error keeps the
// status), and the Hub does not log a Runner's clean stop as a connection
// lost; its handlers' context ends as
// before. A peer that does not answer the close holds the stop no longer
// than closeWait.
func TestAStoppedSideClosesTheConnectionItDoesNotDropIt(t *testing.T) {
	ended := func(t *testing.T, who string, served <-chan error, within time.Duration) {
		t.Helper()
		select {
		case <-served:
		case <-time.After(within):
			t.Fatalf("%s's Serve still runs %s after the stop", who, within)
		}
	}
	t.Run("the peer reads a close", func(t *testing.T) {
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		entered, handlerEnded := make(chan struct{}), make(chan error, 1)
		conn, ws, served := pairIn(t, ctx, func(c *Conn) {
			c.Handle("held", false, func(ctx context.Context, b json.RawMessage) (any, error) {
				close(entered)
				<-ctx.Done()
				handlerEnded <- ctx.Err()
				return nil, nil
			})
		})
		write(t, ws, websocket.MessageText, `{"type":"held","body":{}}`)
		<-entered
		stop()
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, _, err := ws.Read(rctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
			t.Errorf("the peer's read ended with %v, want a close with StatusGoingAway", err)
		}
		ended(t, "the stopped side", served, 2*time.Second)
		if conn.Dropped() {
			t.Errorf("the stopped side says Dropped (%v), want closed", conn.Err())
		}
		if err := <-handlerEnded; !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's context ended with %v, want Serve's cancelled", err)
		}
	})
	t.Run("the Hub's side is not dropped", func(t *testing.T) {
		hub, ws, hubServed := pair(t)
		runner := NewConn(ws, quiet)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		runnerServed := make(chan error, 1)
		go func() { runnerServed <- runner.Serve(ctx) }()
		if err := runner.Request(ctx, "echo", "x", nil); err != nil {
			t.Fatal(err)
		}
		stop()
		ended(t, "the Runner", runnerServed, 2*time.Second)
		ended(t, "the Hub", hubServed, 2*time.Second)
		if hub.Dropped() || runner.Dropped() {
			t.Errorf("Dropped() = %v on the Hub (%v), %v on the Runner (%v); want both closed",
				hub.Dropped(), hub.Err(), runner.Dropped(), runner.Err())
		}
		// The side that did not stop reads why from its error: a Hub
		// whose Runner stopped, as a Runner whose Hub did, needs no Warn.
		if got := websocket.CloseStatus(hub.Err()); got != websocket.StatusGoingAway || !errors.Is(hub.Err(), errdefs.ErrUnavailable) {
			t.Errorf("the Hub's error %v has status %v, want StatusGoingAway and unavailable", hub.Err(), got)
		}
	})
	t.Run("a peer that does not answer", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			NewConn(ws, quiet).Serve(r.Context())
		}))
		t.Cleanup(srv.Close)
		line := testkit.NewProxy(t, strings.TrimPrefix(srv.URL, "http://"))
		ws, _, err := websocket.Dial(context.Background(), "ws://"+line.Addr(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := NewConn(ws, quiet)
		ctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- c.Serve(ctx) }()
		line.Cut()
		stop()
		at := time.Now()
		ended(t, "the stopped side", served, closeWait+2*time.Second)
		if waited := time.Since(at); waited < closeWait-time.Second {
			t.Errorf("Serve returned after %s with no answer to the close, want after about closeWait (%s)", waited, closeWait)
		}
		c.Wait()
	})
}
