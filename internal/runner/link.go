package runner

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// link is the Runner's connection to the Hub: the one welcomed
// protocol.Conn, while there is one, and the streams dialled back to the
// Hub beside it. A Session's supervisor reaches the Hub through it.
type link struct {
	hubURL, token string

	mu      sync.Mutex
	conn    *protocol.Conn // while connected and welcomed
	changed chan struct{}  // closed when conn changes
}

// now is the connection and the channel closed when it changes.
func (l *link) now() (*protocol.Conn, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.conn, l.changed
}

func (l *link) set(c *protocol.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c != l.conn && l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	l.conn = c
}

func (l *link) current() *protocol.Conn {
	c, _ := l.now()
	return c
}

// welcomeWait bounds how long a request waits for a connection: the Hub
// may ask a start of a Runner whose hello it has answered before the
// Runner has read the welcome.
const welcomeWait = 10 * time.Second

// request asks the Hub something over the current connection, waiting
// briefly for one.
func (l *link) request(ctx context.Context, typ string, body, reply any) error {
	c, changed := l.now()
	if c == nil {
		t := time.NewTimer(welcomeWait)
		select {
		case <-changed:
			c = l.current()
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if c == nil {
		return fmt.Errorf("not connected to the Hub: %w", errdefs.ErrUnavailable)
	}
	return c.Request(ctx, typ, body, reply)
}

// live waits for a connection that is up, and returns nil once ctx is
// done.
func (l *link) live(ctx context.Context) *protocol.Conn {
	for {
		c, changed := l.now()
		if c != nil && c.Err() == nil {
			return c
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// dialStream dials the stream the Hub asked for back: one WebSocket of raw
// bytes, authenticated by the Runner's token.
func (l *link) dialStream(ctx context.Context, stream string) (*websocket.Conn, error) {
	if stream == "" || len(stream) > 128 || strings.ContainsAny(stream, "/?#%") {
		return nil, fmt.Errorf("stream %q: %w", stream, errdefs.ErrInvalid)
	}
	u := strings.Replace(strings.TrimSuffix(l.hubURL, "/"), "http", "ws", 1) + "/runner/stream/" + stream
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, u, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": []string{"Bearer " + l.token}},
	})
	if err != nil {
		return nil, fmt.Errorf("dial the Hub's stream: %w", err)
	}
	ws.SetReadLimit(-1)
	return ws, nil
}
