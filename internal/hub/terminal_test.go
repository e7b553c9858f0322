package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// fakePane is a Runner's side of the terminal mirror, speaking the real
// protocol: it answers terminal.open with a snapshot in the frame stream and
// records what the Hub relays.
type fakePane struct {
	mu     sync.Mutex
	conn   *protocol.Conn
	opens  int
	snap   string
	inputs []protocol.TerminalInput
	sizes  []protocol.TerminalResize
}

func (p *fakePane) handle(session string) func(*protocol.Conn) {
	return func(c *protocol.Conn) {
		p.conn = c
		c.Handle(protocol.TypeTerminalOpen, false, func(ctx context.Context, body json.RawMessage) (any, error) {
			p.mu.Lock()
			p.opens++
			snap := p.snap
			p.mu.Unlock()
			return nil, c.Notify(ctx, protocol.TypeTerminalFrame, protocol.TerminalFrame{SessionID: session, Gen: 1, Snapshot: true, Cols: 80, Rows: 24, Data: []byte(snap)})
		})
		c.Handle(protocol.TypeTerminalClose, false, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
		c.Handle(protocol.TypeTerminalInput, false, func(ctx context.Context, body json.RawMessage) (any, error) {
			var in protocol.TerminalInput
			json.Unmarshal(body, &in)
			p.mu.Lock()
			p.inputs = append(p.inputs, in)
			p.mu.Unlock()
			return nil, nil
		})
		c.Handle(protocol.TypeTerminalResize, false, func(ctx context.Context, body json.RawMessage) (any, error) {
			var r protocol.TerminalResize
			json.Unmarshal(body, &r)
			p.mu.Lock()
			p.sizes = append(p.sizes, r)
			p.mu.Unlock()
			return nil, nil
		})
	}
}

func (p *fakePane) output(t *testing.T, session string, gen uint64, data string) {
	t.Helper()
	if err := p.conn.Notify(context.Background(), protocol.TypeTerminalFrame, protocol.TerminalFrame{SessionID: session, Gen: gen, Data: []byte(data)}); err != nil {
		t.Fatal(err)
	}
}

// tabConn is a Session view's WebSocket, reading only terminal messages and
// errors.
type tabConn struct {
	t  *testing.T
	ws *websocket.Conn
	ch chan viewMsg
}

func openView(t *testing.T, f *fixture, session string) *tabConn {
	t.Helper()
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/api/sessions/"+session+"/live",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + f.cli}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	c := &tabConn{t: t, ws: ws, ch: make(chan viewMsg, 100)}
	go func() {
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var m viewMsg
			json.Unmarshal(b, &m)
			if strings.HasPrefix(m.Type, "terminal") || m.Type == "error" {
				c.ch <- m
			}
		}
	}()
	return c
}

func (c *tabConn) send(m viewIn) {
	c.t.Helper()
	b, _ := json.Marshal(m)
	if err := c.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next message, as "type" or "type:data", or "snapshot
// COLSxROWS" for a snapshot's start.
func (c *tabConn) next() string {
	c.t.Helper()
	select {
	case m := <-c.ch:
		switch {
		case m.Snap:
			return "snapshot"
		case m.Type == "error":
			return "error:" + m.Message
		case len(m.Data) > 0:
			return string(m.Data)
		case m.Cols != 0:
			return "size"
		}
		return m.Type
	case <-time.After(testenv.WaitShort):
		c.t.Fatal("no message")
		return ""
	}
}

func (c *tabConn) quiet() {
	c.t.Helper()
	select {
	case m := <-c.ch:
		c.t.Fatalf("unexpected %+v", m)
	case <-time.After(200 * time.Millisecond):
	}
}

func (c *tabConn) expect(want ...string) {
	c.t.Helper()
	for _, w := range want {
		if got := c.next(); !strings.HasPrefix(got, w) {
			c.t.Fatalf("got %q, want %q", got, w)
		}
	}
}

func TestTerminalTabsAreDrawnFromASnapshotThenTakeOutputInOrder(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	repo, _ := f.store.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	f.store.Sessions.MoveSession(ctx, s.ID, store.Starting, store.Active, "", false)
	pane := &fakePane{snap: "SNAP1"}
	// The Runner says it runs the Session, so the Hub takes it back Active.
	helloWith(t, f, f.rtoken, []string{s.ID}, pane.handle(s.ID))
	testenv.Eventually(t, testenv.WaitShort, "the Runner connects", func() bool { return f.hub.Connected(f.runner.ID) })

	one := openView(t, f, s.ID)
	one.send(viewIn{Type: "terminal.input", Data: "x"})
	one.expect("error:open the terminal in this tab")
	pane.output(t, s.ID, 1, "before anyone opened it")
	one.quiet()

	one.send(viewIn{Type: "terminal.open"})
	one.expect("snapshot", "SNAP1")
	pane.output(t, s.ID, 1, "A")
	one.expect("A")

	// A second tab is drawn from a fresh snapshot; the first is not drawn
	// again, and both take what follows.
	pane.mu.Lock()
	pane.snap = "SNAP2"
	pane.mu.Unlock()
	two := openView(t, f, s.ID)
	two.send(viewIn{Type: "terminal.open"})
	two.expect("snapshot", "SNAP2")
	pane.output(t, s.ID, 1, "B")
	one.expect("B")
	two.expect("B")

	// The tab that types sets the size; a size it can't have is refused.
	one.send(viewIn{Type: "terminal.input", Data: "\x1b[A", Cols: 100, Rows: 30})
	one.send(viewIn{Type: "terminal.fit", Cols: 5, Rows: 30})
	one.expect("error:terminal size 5x30")
	two.send(viewIn{Type: "terminal.fit", Cols: 90, Rows: 20})
	testenv.Eventually(t, testenv.WaitShort, "the input and the fit reach the Runner", func() bool {
		pane.mu.Lock()
		defer pane.mu.Unlock()
		return len(pane.inputs) == 1 && len(pane.sizes) == 1
	})
	pane.mu.Lock()
	in, size := pane.inputs[0], pane.sizes[0]
	pane.mu.Unlock()
	if string(in.Data) != "\x1b[A" || in.Cols != 100 || in.Rows != 30 || size.Cols != 90 || size.Rows != 20 {
		t.Fatalf("the Runner got input %+v and size %+v", in, size)
	}

	// Output that broke off (another generation): each tab waits for a
	// fresh snapshot, which the Hub asks for.
	pane.output(t, s.ID, 2, "C")
	one.expect("terminal.wait")
	two.expect("terminal.wait")
	testenv.Eventually(t, testenv.WaitShort, "the Hub asks for a fresh snapshot", func() bool {
		pane.mu.Lock()
		defer pane.mu.Unlock()
		return pane.opens == 3
	})
	one.expect("snapshot", "SNAP2")
	two.expect("snapshot", "SNAP2")

	// A closed tab gets nothing more; keystrokes need an active Session.
	two.send(viewIn{Type: "terminal.close"})
	testenv.Eventually(t, testenv.WaitShort, "the Hub closes the second tab", func() bool {
		f.hub.web.mu.Lock()
		defer f.hub.web.mu.Unlock()
		return len(f.hub.web.terms[s.ID].tabs) == 1
	})
	f.store.Sessions.MoveSession(ctx, s.ID, store.Active, store.Asleep, "", false)
	one.send(viewIn{Type: "terminal.input", Data: "x"})
	one.expect("error:the Session is asleep")
	pane.output(t, s.ID, 1, "D")
	two.quiet()
}

func TestAStreamIsTakenOnlyByTheRunnerAskedAndOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, other, err := f.store.Runners.CreateRunner(ctx, "r2", "")
	if err != nil {
		t.Fatal(err)
	}
	s1, take := f.hub.runners.ExpectStream(&runners.Conn{Runner: f.runner})
	dial := func(token, id string) int {
		ctx, cancel := context.WithTimeout(ctx, testenv.WaitShort)
		defer cancel()
		ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/runner/stream/"+id,
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err == nil {
			ws.CloseNow()
		}
		if resp == nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	if code := dial(other, s1); code != http.StatusNotFound {
		t.Fatalf("another Runner took the stream: %d", code)
	}
	if code := dial(f.rtoken, "nope"); code != http.StatusNotFound {
		t.Fatalf("a stream nobody asked for: %d", code)
	}
	if code := dial(f.rtoken, s1); code != http.StatusSwitchingProtocols {
		t.Fatalf("the Runner asked: %d, want 101", code)
	}
	if conn, err := take(ctx); err == nil {
		conn.Close()
	}
	if code := dial(f.rtoken, s1); code != http.StatusNotFound {
		t.Fatalf("the stream taken twice: %d", code)
	}
}
