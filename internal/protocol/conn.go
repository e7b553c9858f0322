package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/pprof"
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
	// ordered types are handled one at a time in arrival order per lane
	// (a Session's events), lanes side by side; others each in their own
	// goroutine. The read loop never waits for a handler, so one held
	// frame delays neither another lane nor a reply.
	ordered map[string]bool

	// writing is the turn to write, one frame at a time, waited for as
	// long as the caller's context allows.
	writing chan struct{}
	nextID  atomic.Uint64
	mu      sync.Mutex
	pending map[string]chan Frame
	// lanes holds the ordered frames waiting in each lane that has a
	// goroutine handling them; taken the once each lane took last.
	lanes  map[string][]Frame
	taken  *Taken
	closed chan struct{}
	err    error
	// closing is set when this side closes the connection (Close, a bad
	// frame refused); dropped, when it ended without a close either side
	// asked for (Dropped).
	closing, dropped bool
	// lastRead is when the read loop last took a frame, as Unix
	// nanoseconds: a connection dropped says how long the peer was
	// silent.
	lastRead atomic.Int64
	// handling counts the handlers and the pings still running: Serve
	// does not wait for them, Wait does.
	handling sync.WaitGroup
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
		pending: map[string]chan Frame{}, lanes: map[string][]Frame{}, taken: &Taken{}, closed: make(chan struct{}), pingEvery: PingEvery,
		writing: make(chan struct{}, 1)}
}

// Handle registers h for frames of type typ. Ordered handlers run one
// frame of a lane at a time, in arrival order.
func (c *Conn) Handle(typ string, ordered bool, h Handler) {
	c.handlers[typ] = h
	c.ordered[typ] = ordered
}

// Taken remembers the once each lane took last, and which lanes a
// handler holds now. A Conn keeps one of its own unless given one that
// outlives it (the Hub keeps one per Runner), so a message sent again on
// the next connection is taken once too, and a lane whose handler still
// runs on an old connection (its end cuts none) waits on the new one.
type Taken struct {
	mu   sync.Mutex
	once map[string]string
	held map[string]chan struct{} // closed when its holder lets the lane go
}

// hold waits until no connection remembering in t handles lane, then
// holds it until release is called; ok is false if ctx ended first.
func (t *Taken) hold(ctx context.Context, lane string) (release func(), ok bool) {
	for {
		t.mu.Lock()
		ch, busy := t.held[lane]
		if !busy {
			if t.held == nil {
				t.held = map[string]chan struct{}{}
			}
			ch = make(chan struct{})
			t.held[lane] = ch
			t.mu.Unlock()
			return func() {
				t.mu.Lock()
				delete(t.held, lane)
				t.mu.Unlock()
				close(ch)
			}, true
		}
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// again reports whether lane took once last.
func (t *Taken) again(lane, once string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return once != "" && t.once[lane] == once
}

func (t *Taken) took(lane, once string) {
	if once == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.once == nil {
		t.once = map[string]string{}
	}
	t.once[lane] = once
}

// Remember makes c keep what its lanes took in t; call it before Serve.
func (c *Conn) Remember(t *Taken) { c.taken = t }

// SetPingEvery makes c ping every d instead of PingEvery, and wait as long
// for each pong; zero keeps PingEvery. Call it before Serve. Each side
// times its own pings (nothing is negotiated), so a silent line is seen by
// each side within two of its own periods.
func (c *Conn) SetPingEvery(d time.Duration) {
	if d > 0 {
		c.pingEvery = d
	}
}

// Request sends a request and decodes the reply's body into reply (which may
// be nil). It returns the peer's error with its class.
func (c *Conn) Request(ctx context.Context, typ string, body, reply any) error {
	return c.request(ctx, Frame{Type: typ}, body, reply)
}

// RequestOnce is Request in a lane (see Frame), for a message that may be
// sent again under the same once: the peer takes it once.
func (c *Conn) RequestOnce(ctx context.Context, lane, once, typ string, body, reply any) error {
	return c.request(ctx, Frame{Type: typ, Lane: lane, Once: once}, body, reply)
}

func (c *Conn) request(ctx context.Context, f Frame, body, reply any) error {
	typ := f.Type
	id := strconv.FormatUint(c.nextID.Add(1), 10)
	f.ID = id
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
	if err := c.send(ctx, f, body); err != nil {
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
	select {
	case c.writing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.writing }()
	// Not the caller's context: coder/websocket closes the whole
	// connection when a write's context ends mid-write, so one request
	// given up (its deadline past on a busy host) would cut every Session
	// on it. A write the peer never takes ends with the connection:
	// keepAlive's ping finds no way through and drops it.
	return c.ws.Write(context.WithoutCancel(ctx), websocket.MessageText, b)
}

// Serve reads frames until the connection ends or ctx is done, and returns
// why it ended. Bad frames never crash it: a malformed or binary frame gets
// an error frame and a close (the stream can't be trusted after it), an
// unknown type an error and nothing else.
//
// It returns as soon as the connection ends, so a Runner whose Hub died
// dials the next one at once. Handlers still running then run on to their
// end in ctx, which the connection's end does not cancel: what a handler
// does must not be cut half way (a prompt typed and not yet recorded as
// taken would be typed again when the Hub sends it again), and its reply
// on a dead connection is moot. Wait waits for them.
//
// When ctx ends, the connection is closed with StatusGoingAway (goAway),
// and Serve returns once the peer answers the close, or closeWait after.
func (c *Conn) Serve(ctx context.Context) error {
	// Not ctx: coder/websocket drops the connection, with no close frame,
	// when a read's context ends, and the peer would log this side's
	// clean stop as a lost connection.
	reading, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop() // the pings end with the read loop
	goneAway := make(chan struct{})
	unhook := context.AfterFunc(ctx, func() {
		defer close(goneAway)
		c.goAway(stop)
	})
	defer func() {
		if !unhook() {
			<-goneAway
		}
	}()
	c.handling.Go(func() { c.keepAlive(reading, ctx) })
	for {
		typ, b, err := c.ws.Read(reading)
		if err != nil {
			return c.fail(err)
		}
		c.lastRead.Store(time.Now().UnixNano())
		if ctx.Err() != nil {
			// Closing: what the peer sent before it saw the close starts
			// no handler (none was read after ctx's end before), but a
			// reply still reaches its request.
			if f, err := Decode(b); err == nil && typ == websocket.MessageText && f.Type == TypeReply {
				c.deliver(f)
			}
			continue
		}
		if typ != websocket.MessageText {
			return c.reject(ctx, fmt.Errorf("binary frame: frames are JSON text: %w", errdefs.ErrInvalid), websocket.StatusUnsupportedData)
		}
		f, err := Decode(b)
		if err != nil {
			return c.reject(ctx, err, websocket.StatusInvalidFramePayloadData)
		}
		if f.Type == TypeReply {
			c.deliver(f)
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
			c.queue(ctx, f)
			continue
		}
		c.handling.Go(func() {
			res, err := h(ctx, f.Body)
			c.answer(ctx, f, res, err)
		})
	}
}

// closeWait bounds how long a Conn whose Serve context ended waits for
// the peer to answer its close before it drops the connection: as long
// as coder/websocket waits for the answer, which may first have waited
// as long to write the close behind a frame a dead peer does not take.
const closeWait = 5 * time.Second

// goAway closes the connection with StatusGoingAway, so the peer sees
// this side stop, not a connection lost; a peer that does not answer
// within closeWait is dropped (stop ends the read, which drops it).
func (c *Conn) goAway(stop context.CancelFunc) {
	cut := time.AfterFunc(closeWait, stop)
	defer cut.Stop()
	c.Close(websocket.StatusGoingAway, "stopping")
}

// deliver hands a reply to the request waiting for it, if one still is.
func (c *Conn) deliver(f Frame) {
	c.mu.Lock()
	ch := c.pending[f.ID]
	c.mu.Unlock()
	if ch != nil {
		ch <- f
	}
}

// Wait waits for the handlers Serve started to return. The Hub waits
// before it lets a Runner's connection go, so a hello handled late cannot
// attach a connection already gone.
func (c *Conn) Wait() { c.handling.Wait() }

// queue adds an ordered frame to its lane, and starts the lane's
// goroutine if none runs.
func (c *Conn) queue(ctx context.Context, f Frame) {
	c.mu.Lock()
	q, running := c.lanes[f.Lane]
	c.lanes[f.Lane] = append(q, f)
	c.mu.Unlock()
	if running {
		return
	}
	c.handling.Go(func() { c.drain(ctx, f.Lane) })
}

// drain handles a lane's frames in order until none waits, holding the
// lane in c's Taken meanwhile: frames a Runner sent on an old connection,
// whose handler may still run, all come before those on its new one. A
// frame whose once the lane took last is answered without handling it
// again: it is the same message sent again after a reply that came late
// or was lost with its connection.
func (c *Conn) drain(ctx context.Context, lane string) {
	release, ok := c.taken.hold(ctx, lane)
	if !ok {
		c.mu.Lock()
		delete(c.lanes, lane)
		c.mu.Unlock()
		return
	}
	defer release()
	for {
		c.mu.Lock()
		q := c.lanes[lane]
		if len(q) == 0 || ctx.Err() != nil {
			delete(c.lanes, lane)
			c.mu.Unlock()
			return
		}
		f := q[0]
		c.lanes[lane] = q[1:]
		c.mu.Unlock()
		if c.taken.again(lane, f.Once) {
			c.answer(ctx, f, nil, nil)
			continue
		}
		var res any
		var err error
		pprof.Do(ctx, pprof.Labels("lane", lane, "type", f.Type), func(ctx context.Context) {
			res, err = c.handlers[f.Type](ctx, f.Body)
		})
		if err == nil {
			c.taken.took(lane, f.Once)
		}
		c.answer(ctx, f, res, err)
	}
}

// keepAlive pings the peer until ctx or serving is done, and drops the
// connection when a pong does not come in time: the read loop then ends
// with the failure. A ping is not cut by serving's end (a write whose
// context ends drops the connection); goAway bounds the close instead.
func (c *Conn) keepAlive(ctx, serving context.Context) {
	t := time.NewTicker(c.pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-serving.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, c.pingEvery)
		err := c.ws.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil && serving.Err() == nil {
			// The error says which: the ping not written (this side's
			// writes held the lock: "failed to acquire lock"), or no pong
			// read ("failed to wait for pong").
			c.log.Warn("the peer did not answer a ping; dropping the connection", "waited", c.pingEvery, "err", err,
				"last_frame_read", c.SinceRead().Round(time.Millisecond))
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
	c.closeHere()
	c.send(ctx, Frame{Type: TypeError, Error: ErrorOf(err)}, nil)
	c.ws.Close(status, truncate(err.Error(), 100))
	return c.fail(err)
}

// Close closes the connection with a reason the peer sees.
func (c *Conn) Close(status websocket.StatusCode, reason string) error {
	c.closeHere()
	err := c.ws.Close(status, truncate(reason, 100))
	c.fail(fmt.Errorf("closed: %s: %w", reason, errdefs.ErrUnavailable))
	return err
}

func (c *Conn) fail(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.dropped = !c.closing && websocket.CloseStatus(err) == -1
		if c.dropped || c.closing {
			c.err = fmt.Errorf("connection lost: %v: %w", err, errdefs.ErrUnavailable)
		} else {
			// The peer's close frame stays readable (websocket.CloseStatus):
			// a Hub that stops says so, and its Runner need not warn.
			c.err = fmt.Errorf("connection lost: %w: %w", err, errdefs.ErrUnavailable)
		}
		close(c.closed)
	}
	return c.err
}

func (c *Conn) closeHere() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing = true
}

// Dropped reports whether the connection ended without a close either
// side asked for: its TCP connection ended or was reset, a ping went
// unanswered, a pong could not be written. Err then says which, and
// SinceRead how long the peer had been silent.
func (c *Conn) Dropped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// SinceRead is how long ago the read loop last took a frame; 0 before
// the first.
func (c *Conn) SinceRead() time.Duration {
	if at := c.lastRead.Load(); at != 0 {
		return time.Since(time.Unix(0, at))
	}
	return 0
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
