package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/errdefs"
)

// Handler answers a request; its result becomes the reply's body. For a
// notification the result is dropped and an error is reported back as an
// error frame.
type Handler func(ctx context.Context, body json.RawMessage) (any, error)

// Conn is one side of a Hub<->Runner connection.
type Conn struct {
	ws       *websocket.Conn
	log      *slog.Logger
	handlers map[string]Handler
	// ordered types are handled one at a time in arrival order on the read
	// loop (a Session's events); others each in their own goroutine.
	ordered map[string]bool

	writeMu sync.Mutex
	nextID  atomic.Uint64
	mu      sync.Mutex
	pending map[string]chan Frame
	closed  chan struct{}
	err     error
	// pingEvery is how often Serve asks the peer for a pong, and how long
	// it waits for one.
	pingEvery time.Duration
}

// PingEvery is how often each side pings the other, and how long it waits
// for the pong before it drops the connection. A pulled cable or a
// middlebox that drops packets without a reset leaves a TCP connection open
// for minutes, a write blocked and a read waiting forever; the ping makes
// both sides see it within two periods, so the Hub freezes the Runner's
// Sessions and the Runner dials again.
const PingEvery = 10 * time.Second

// NewConn wraps an accepted or dialled WebSocket. Register handlers with
// Handle before calling Serve.
func NewConn(ws *websocket.Conn, log *slog.Logger) *Conn {
	ws.SetReadLimit(MaxFrameBytes)
	return &Conn{ws: ws, log: log, handlers: map[string]Handler{}, ordered: map[string]bool{},
		pending: map[string]chan Frame{}, closed: make(chan struct{}), pingEvery: PingEvery}
}

// Handle registers h for frames of type typ. Ordered handlers run on the
// read loop, one frame at a time, so they must not block for long.
func (c *Conn) Handle(typ string, ordered bool, h Handler) {
	c.handlers[typ] = h
	c.ordered[typ] = ordered
}

// Request sends a request and decodes the reply's body into reply (which may
// be nil). It returns the peer's error with its class.
func (c *Conn) Request(ctx context.Context, typ string, body, reply any) error {
	id := strconv.FormatUint(c.nextID.Add(1), 10)
	ch := make(chan Frame, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.send(ctx, Frame{Type: typ, ID: id}, body); err != nil {
		return err
	}
	select {
	case f := <-ch:
		if f.Error != nil {
			return f.Error
		}
		if reply != nil && len(f.Body) > 0 {
			if err := json.Unmarshal(f.Body, reply); err != nil {
				return fmt.Errorf("%s reply: %w", typ, err)
			}
		}
		return nil
	case <-c.closed:
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Notify sends a one-way message.
func (c *Conn) Notify(ctx context.Context, typ string, body any) error {
	return c.send(ctx, Frame{Type: typ}, body)
}

func (c *Conn) send(ctx context.Context, f Frame, body any) error {
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s: %w", f.Type, err)
		}
		f.Body = b
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if len(b) > MaxFrameBytes {
		return fmt.Errorf("%s frame of %d bytes is over the %d-byte limit: %w", f.Type, len(b), MaxFrameBytes, errdefs.ErrInvalid)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// Serve reads frames until the connection ends or ctx is done, and returns
// why it ended. Bad frames never crash it: a malformed or binary frame gets
// an error frame and a close (the stream can't be trusted after it), an
// unknown type an error and nothing else.
func (c *Conn) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	// Its own context: the handlers are waited for before ctx ends, and
	// the pings must stop first.
	pings, stopPings := context.WithCancel(ctx)
	defer stopPings()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.keepAlive(pings)
	}()
	for {
		typ, b, err := c.ws.Read(ctx)
		if err != nil {
			return c.fail(err)
		}
		if typ != websocket.MessageText {
			return c.reject(ctx, fmt.Errorf("binary frame: frames are JSON text: %w", errdefs.ErrInvalid), websocket.StatusUnsupportedData)
		}
		f, err := Decode(b)
		if err != nil {
			return c.reject(ctx, err, websocket.StatusInvalidFramePayloadData)
		}
		if f.Type == TypeReply {
			c.mu.Lock()
			ch := c.pending[f.ID]
			c.mu.Unlock()
			if ch != nil {
				ch <- f
			}
			continue
		}
		if f.Type == TypeError {
			c.log.Warn("peer reported an error", "code", codeOf(f.Error), "message", msgOf(f.Error))
			continue
		}
		h := c.handlers[f.Type]
		if h == nil {
			c.answer(ctx, f, nil, fmt.Errorf("unknown message type %q: %w", f.Type, errdefs.ErrInvalid))
			continue
		}
		if c.ordered[f.Type] {
			res, err := h(ctx, f.Body)
			c.answer(ctx, f, res, err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h(ctx, f.Body)
			c.answer(ctx, f, res, err)
		}()
	}
}

// keepAlive pings the peer until ctx is done, and drops the connection
// when a pong does not come in time: the read loop then ends with the
// failure.
func (c *Conn) keepAlive(ctx context.Context) {
	t := time.NewTicker(c.pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, c.pingEvery)
		err := c.ws.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			c.log.Warn("the peer did not answer a ping; dropping the connection", "waited", c.pingEvery, "err", err)
			c.fail(fmt.Errorf("no pong within %s: %w", c.pingEvery, err))
			c.ws.CloseNow()
			return
		}
	}
}

// answer replies to a request, or reports a failed notification.
func (c *Conn) answer(ctx context.Context, f Frame, res any, err error) {
	var werr error
	switch {
	case f.ID != "" && err != nil:
		werr = c.send(ctx, Frame{Type: TypeReply, ID: f.ID, Error: ErrorOf(err)}, nil)
	case f.ID != "":
		werr = c.send(ctx, Frame{Type: TypeReply, ID: f.ID}, res)
	case err != nil:
		werr = c.send(ctx, Frame{Type: TypeError, Error: ErrorOf(fmt.Errorf("%s: %w", f.Type, err))}, nil)
	}
	if werr != nil && ctx.Err() == nil {
		c.log.Debug("reply not sent", "type", f.Type, "err", werr)
	}
}

func (c *Conn) reject(ctx context.Context, err error, status websocket.StatusCode) error {
	c.send(ctx, Frame{Type: TypeError, Error: ErrorOf(err)}, nil)
	c.ws.Close(status, truncate(err.Error(), 100))
	return c.fail(err)
}

// Close closes the connection with a reason the peer sees.
func (c *Conn) Close(status websocket.StatusCode, reason string) error {
	err := c.ws.Close(status, truncate(reason, 100))
	c.fail(fmt.Errorf("closed: %s: %w", reason, errdefs.ErrUnavailable))
	return err
}

func (c *Conn) fail(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = fmt.Errorf("connection lost: %v: %w", err, errdefs.ErrUnavailable)
		close(c.closed)
	}
	return c.err
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.closed }

// Err says why the connection ended, or nil while it runs.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func codeOf(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Code
}

func msgOf(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Message
}
