package session

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"kndl.dev/kndl/internal/protocol"
)

// The Session loop: an awake Session's run state belongs to one goroutine,
// its loop, started with the run (a start, a wake, its Runner back with it)
// and ended when the run is dropped (Asleep, Failed, Archived) or the Owner
// closes. Whatever reads or moves the run reaches it as a step, handled one
// at a time in the order it came: a dispatch and each acknowledgement, a
// Turn's end, the Events heard, a move's effects, the timers, the sweep, the
// API's questions. The caller waits for its step's reply. A step never waits
// on the Runner: a request goes on a goroutine of its own, the machine
// showing it on its way (typing), and the answer comes back as a step (ack,
// giveBack). It may call the store, which never calls back. It never posts
// a step to its own loop (it calls the inner form: dispatchOn, ackOn) and
// never records an Event (record waits on the loop).

// runs are the awake Sessions' loops, by Session id.
type runs struct {
	g   *group
	log *slog.Logger
	// metrics and faulted are told of each fault (fault).
	metrics Metrics
	faulted func(sessionID, kind, what string)

	mu    sync.Mutex
	loops map[string]*loop
}

// loop is one awake Session's loop.
type loop struct {
	r    *run
	in   chan step
	done chan struct{} // closed once the loop has ended
}

// step is one message to a loop: f runs on the loop, then ran is closed.
type step struct {
	f   func(*run)
	ran chan struct{}
}

// of returns the Session's loop, starting one with a fresh run if it
// has none and start is set; nil if it has none (or the Owner is closing).
func (o *runs) of(id string, start bool) *loop {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.loops[id]
	if l != nil || !start {
		return l
	}
	l = &loop{r: &run{since: time.Now()}, in: make(chan step), done: make(chan struct{})}
	if !o.g.spawn(func(ctx context.Context) { o.serve(ctx, id, l) }) {
		return nil
	}
	o.loops[id] = l
	return l
}

// serve is the loop itself: it runs each step, and ends after one that
// drops the run, or when the Owner closes.
func (o *runs) serve(ctx context.Context, id string, l *loop) {
	defer close(l.done)
	for {
		select {
		case <-ctx.Done():
			o.unregister(id, l)
			return
		case s := <-l.in:
			s.f(l.r)
			if l.r.dropped { // gone from the registry before its caller goes on
				o.unregister(id, l)
			}
			close(s.ran)
			if l.r.dropped {
				return
			}
		}
	}
}

func (o *runs) unregister(id string, l *loop) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.loops[id] == l {
		delete(o.loops, id)
	}
}

// send runs f as a step of l and waits for it to have run; false if the
// loop ended first or ctx did before the loop took it. A step taken is
// waited for: it is bounded by the store's calls.
func (l *loop) send(ctx context.Context, f func(*run)) bool {
	s := step{f: f, ran: make(chan struct{})}
	select {
	case l.in <- s:
	case <-l.done:
		return false
	case <-ctx.Done():
		return false
	}
	<-s.ran
	return true
}

// on runs f as a step of the Session's loop and reports whether it
// ran: false for a Session with no run (not awake).
func (o *runs) on(id string, f func(*run)) bool {
	for {
		l := o.of(id, false)
		if l == nil {
			return false
		}
		if l.send(o.g.ctx, f) {
			return true
		}
		if o.g.ctx.Err() != nil {
			return false
		}
	}
}

// with runs f as a step of the Session's loop, starting the loop with a
// fresh run if the Session has none; never within a step.
func (o *runs) with(id string, f func(*run)) {
	for {
		l := o.of(id, true)
		if l == nil || l.send(o.g.ctx, f) || o.g.ctx.Err() != nil {
			return
		}
	}
}

// ids are the Sessions with a loop now.
func (o *runs) ids() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := make([]string, 0, len(o.loops))
	for id := range o.loops {
		ids = append(ids, id)
	}
	return ids
}

// heard is the stream's heard: it moves the run of an awake Session by
// the Events heard (none once it sleeps: its notes move nothing).
func (o *runs) heard(id string, evs []protocol.Event) (ended, changed bool) {
	o.on(id, func(r *run) {
		r.heard = time.Now()
		was := r.activity()
		ended = r.follow(evs)
		changed = r.activity() != was
	})
	return ended, changed
}

// fault names a state the Session's machines should never be in: logged
// with the run's machines and their last moves, counted in /metrics, and
// told to Options.Faulted (every test of this package fails on one it did
// not ask for). Never within a step.
func (o *runs) fault(id, kind, what string) {
	var ph, dl, runMoves, deliveryMoves string
	o.on(id, func(r *run) {
		ph, dl, runMoves, deliveryMoves = r.phase.String(), r.delivery.state.String(), r.trail.String(), r.delivery.moves.String()
	})
	o.log.Error("session fault: "+kind, "session", id, "what", what, "run", ph, "delivery", dl, "run_moves", runMoves, "delivery_moves", deliveryMoves)
	o.metrics.SessionFault(kind)
	if o.faulted != nil {
		o.faulted(id, kind, what)
	}
}
