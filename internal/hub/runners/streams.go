package runners

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
)

// streams are connections a Runner dials back when the Hub asks it for a
// forwarded port or a Workspace file: one WebSocket each, of raw bytes.
// They are kept off the Runner's main connection so a large download or a
// busy forwarded app never holds up a Session's Events or its terminal, and
// each gets its own flow control. A stream id is 256 random bits, asked of
// one Runner, used once, and waited for at most StreamWait.
type streams struct {
	mu sync.Mutex
	m  map[string]*pendingStream
}

type pendingStream struct {
	runnerID string
	ch       chan *websocket.Conn
	done     chan struct{}
}

// StreamWait bounds how long a Runner takes to dial a stream back.
const StreamWait = 15 * time.Second

// OpenStream asks rc for a stream with the request req makes of the stream
// id, and returns it once both the reply and the stream have come.
func (cs *Conns) OpenStream(ctx context.Context, rc *Conn, typ string, req func(stream string) any, reply any) (net.Conn, error) {
	id, take := cs.ExpectStream(rc)
	ctx, cancel := context.WithTimeout(ctx, StreamWait)
	defer cancel()
	if err := rc.Conn.Request(ctx, typ, req(id), reply); err != nil {
		cancel()
		take(ctx) // forgets it
		return nil, err
	}
	return take(ctx)
}

// ExpectStream makes a stream id only rc may dial back, and take, which
// waits for that stream until ctx is done and forgets the id either way;
// call it once. The stream ends the request it serves when closed.
func (cs *Conns) ExpectStream(rc *Conn) (id string, take func(ctx context.Context) (net.Conn, error)) {
	id, _ = auth.NewToken(auth.Session)
	id = id[len("kndls_"):]
	ps := &pendingStream{runnerID: rc.Runner.ID, ch: make(chan *websocket.Conn, 1), done: make(chan struct{})}
	st := &cs.streams
	st.mu.Lock()
	st.m[id] = ps
	st.mu.Unlock()
	return id, func(ctx context.Context) (net.Conn, error) {
		defer func() {
			st.mu.Lock()
			delete(st.m, id)
			st.mu.Unlock()
		}()
		select {
		case ws := <-ps.ch:
			if ctx.Err() == nil {
				return &streamConn{Conn: websocket.NetConn(cs.opts.Life, ws, websocket.MessageBinary), done: ps.done}, nil
			}
			ws.CloseNow()
		case <-ctx.Done():
		}
		close(ps.done)
		return nil, fmt.Errorf("the Runner did not connect the stream within %s: %w", StreamWait, errdefs.ErrUnavailable)
	}
}

// streamConn is a stream as a net.Conn; closing it ends the Runner's
// request too.
type streamConn struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

func (c *streamConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// ServeStream is where the Runner runnerID dials a stream back. Only the
// Runner it was asked of can take it, and only once: for any other it
// returns ErrNotFound, having answered nothing.
func (cs *Conns) ServeStream(w http.ResponseWriter, r *http.Request, runnerID string) error {
	st := &cs.streams
	st.mu.Lock()
	ps := st.m[r.PathValue("id")]
	if ps != nil && ps.runnerID == runnerID {
		delete(st.m, r.PathValue("id"))
	} else {
		ps = nil
	}
	st.mu.Unlock()
	if ps == nil {
		return fmt.Errorf("no such stream is waiting for this Runner: %w", errdefs.ErrNotFound)
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept has answered
	}
	ws.SetReadLimit(-1)
	select {
	case ps.ch <- ws:
	default:
		ws.CloseNow()
		return nil
	}
	select {
	case <-ps.done:
	case <-r.Context().Done():
	}
	return nil
}

// Waiting counts the streams asked of Runners and not yet taken.
func (cs *Conns) Waiting() int {
	cs.streams.mu.Lock()
	defer cs.streams.mu.Unlock()
	return len(cs.streams.m)
}
