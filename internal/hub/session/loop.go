package session

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"kndl.dev/kndl/internal/protocol"
)

// The Session loop: a Session's run state belongs to one goroutine, its
// loop. An awake Session has one from its start or wake until it stops
// being awake; any other gets one when something must happen to it (a
// wake, an archive, a restore, a Runner's word), ended after the step
// that leaves no run (down) and no move waiting. Whatever reads or moves
// the run reaches it as a step, handled one at a time in the order it
// came: the moves of its life (act.go), a dispatch and each
// acknowledgement, a Turn's end, the Events heard, the timers, the sweep,
// the API's questions. The caller waits for its step's reply. A step never
// waits on the Runner, nor on a lock held across anything but the store:
// a request goes on a goroutine of its own, the machine showing it on its
// way (typing, stopping, archiving, restoring), and the answer comes back
// as a step (ack, giveBack, ask). It may call the store, which never calls
// back. It never posts a step to its own loop (it calls the inner form:
// dispatchOn, ackOn, wakeOn) and never records an Event (record waits on
// the loop): a life move leaves that for after the step (act.later).

// runs are the Sessions' loops, by Session id.
type runs struct {
	g   *group
	log *slog.Logger
	// metrics and faulted are told of each fault (fault).
	metrics Metrics
	faulted func(sessionID, kind, what string)

	mu    sync.Mutex
	loops map[string]*loop
}

// loop is one Session's loop.
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

// of returns the Session's loop, starting one with a fresh run (down) if
// it has none and start is set; nil if it has none (or the Owner is
// closing).
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
// leaves no run and no move waiting, or when the Owner closes (the moves
// waiting then are answered errClosing).
func (o *runs) serve(ctx context.Context, id string, l *loop) {
	defer close(l.done)
	for {
		select {
		case <-ctx.Done():
			o.unregister(id, l)
			for _, m := range l.r.pending {
				m.reply <- errClosing
			}
			return
		case s := <-l.in:
			s.f(l.r)
			over := l.r.phase == down && len(l.r.pending) == 0
			if over { // gone from the registry before its caller goes on
				o.unregister(id, l)
			}
			close(s.ran)
			if over {
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
// ran: false for a Session with no loop (not awake, nothing under way).
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
// fresh run if the Session has none, and reports whether it ran (not once
// the Owner is closing); never within a step.
func (o *runs) with(id string, f func(*run)) bool {
	for {
		l := o.of(id, true)
		if l == nil || o.g.ctx.Err() != nil {
			return false
		}
		if l.send(o.g.ctx, f) {
			return true
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

// heard is the stream's heard: it moves the run of a Session with a loop
// by the Events heard (none once it sleeps: its notes move nothing).
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
// not ask for). Never within a step: there, faultOn.
func (o *runs) fault(id, kind, what string) {
	if !o.on(id, func(r *run) { o.faultOn(id, r, kind, what) }) {
		o.faultOn(id, &run{}, kind, what)
	}
}

// faultOn is fault within a step, of the Session's run r.
func (o *runs) faultOn(id string, r *run, kind, what string) {
	o.log.Error("session fault: "+kind, "session", id, "what", what, "run", r.phase.String(), "delivery", r.delivery.state.String(),
		"run_moves", r.trail.String(), "delivery_moves", r.delivery.moves.String())
	o.metrics.SessionFault(kind)
	if o.faulted != nil {
		o.faulted(id, kind, what)
	}
}
