package runner

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"runtime/pprof"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// The outbox holds what the Runner tells the Hub (a Session's Events, its
// exit, its ports; a Test build's log) until the Hub takes it: written to a
// socket is not taken, since a connection that dies (a pulled cable, a Hub
// killed) loses what was in flight. Each Session's messages go in a lane of
// their own, sent one at a time and in order by the lane's own goroutine,
// so a Session whose message the Hub holds delays no other; messages of no
// Session share the lane "". A reply has a deadline: past it the message
// goes again under the same once, which the Hub takes once, and the log
// names the message, its Session and how long it has waited.
type outbox struct {
	log *slog.Logger
	// conn waits for a connection that is up; nil once ctx is done.
	conn func(ctx context.Context) *protocol.Conn
	// spawn runs a lane's sender on a goroutine Run waits for.
	spawn func(func())
	// replyWait is how long a message waits for the Hub's reply before it
	// is sent again.
	replyWait time.Duration

	mu    sync.Mutex
	ctx   context.Context // set by start: until then messages wait
	lanes map[string]*lane
}

// replyWait's default: the Hub answers in milliseconds, and a batch it
// can't store comes back as an error, not as silence.
const replyWaitDefault = 30 * time.Second

// lane is one Session's messages waiting for the Hub, oldest first, and
// whether a goroutine sends them.
type lane struct {
	queue   []*outgoing
	sending bool
}

type outgoing struct {
	typ  string
	body any
	// once names the message on every try; first is when it was first
	// sent.
	once  string
	first time.Time
	// done is closed once the Hub took it (or refused it for good).
	done chan struct{}
}

// add queues a message in its Session's lane.
func (o *outbox) add(session, typ string, body any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lanes == nil {
		o.lanes = map[string]*lane{}
	}
	l := o.lanes[session]
	if l == nil {
		l = &lane{}
		o.lanes[session] = l
	}
	l.queue = append(l.queue, &outgoing{typ: typ, body: body, once: rand.Text(), done: make(chan struct{})})
	o.sendLocked(session, l)
}

// flushed waits until the Hub has taken every message of session's lane
// queued before the call, for at most wait; past it, it logs how many still
// wait and returns.
func (o *outbox) flushed(ctx context.Context, session string, wait time.Duration) {
	o.mu.Lock()
	l := o.lanes[session]
	var last *outgoing
	n := 0
	if l != nil && len(l.queue) > 0 {
		last, n = l.queue[len(l.queue)-1], len(l.queue)
	}
	o.mu.Unlock()
	if last == nil {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-last.done:
	case <-ctx.Done():
	case <-t.C:
		o.log.Warn("the Hub has not taken a Session's earlier messages in time; going on", "session", session, "waiting", n, "waited", wait)
	}
}

// start sends what waits, and from now on what comes, until ctx is done.
func (o *outbox) start(ctx context.Context) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ctx = ctx
	for session, l := range o.lanes {
		o.sendLocked(session, l)
	}
}

// sendLocked starts l's sender if none runs; o.mu is held.
func (o *outbox) sendLocked(session string, l *lane) {
	if o.ctx == nil || o.ctx.Err() != nil || l.sending {
		return
	}
	l.sending = true
	ctx := o.ctx
	o.spawn(func() { o.send(ctx, session, l) })
}

// send delivers a lane's messages in order until none waits.
func (o *outbox) send(ctx context.Context, session string, l *lane) {
	retry := backoffMin
	for {
		o.mu.Lock()
		if len(l.queue) == 0 {
			l.sending = false
			delete(o.lanes, session)
			o.mu.Unlock()
			return
		}
		m := l.queue[0]
		o.mu.Unlock()
		c := o.conn(ctx)
		if c == nil {
			return
		}
		err := o.deliver(ctx, c, session, m)
		switch {
		case err == nil:
			retry = backoffMin
			o.mu.Lock()
			l.queue = l.queue[1:]
			o.mu.Unlock()
			close(m.done)
		case ctx.Err() != nil:
			return
		case c.Err() != nil:
			// Kept for the next connection.
		case errors.Is(err, context.DeadlineExceeded):
			// Sent again at once: deliver said so.
		default:
			// The Hub is up but could not take it (its store failing,
			// say): ask again in a while.
			o.log.Warn("the Hub did not take a message; sending it again", "type", m.typ, "session", session, "in", retry, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
			retry = min(retry*2, backoffMax)
		}
	}
}

// deliver sends one message as a request and waits for the Hub's reply,
// up to replyWait. It returns nil once the Hub took it, or refused it for
// good (a message it can never take is dropped, saying so, rather than
// holding up those behind it). The Hub takes a message it took already as
// a no-op (the same once), so one sent again after a late or lost reply is
// not stored twice.
func (o *outbox) deliver(ctx context.Context, c *protocol.Conn, session string, m *outgoing) error {
	if m.first.IsZero() {
		m.first = time.Now()
	}
	var err error
	// Labelled, so a goroutine dump names what a stalled lane waits for.
	pprof.Do(ctx, pprof.Labels("session", session, "type", m.typ), func(ctx context.Context) {
		rctx, cancel := context.WithTimeout(ctx, o.replyWait)
		defer cancel()
		err = c.RequestOnce(rctx, session, m.once, m.typ, m.body, nil)
	})
	waited := time.Since(m.first).Round(time.Millisecond)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && c.Err() == nil:
		o.log.Warn("the Hub has not answered a message in time; sending it again", "type", m.typ, "session", session, "waited", waited)
		return err
	case err == nil && waited > o.replyWait:
		o.log.Info("the Hub took a message it held", "type", m.typ, "session", session, "after", waited)
	}
	for _, never := range []error{errdefs.ErrInvalid, errdefs.ErrNotFound, errdefs.ErrForbidden, errdefs.ErrTooLarge} {
		if errors.Is(err, never) && c.Err() == nil {
			o.log.Warn("the Hub refused a message; dropping it", "type", m.typ, "session", session, "err", err)
			return nil
		}
	}
	return err
}
