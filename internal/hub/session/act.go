package session

import (
	"context"
	"errors"
	"fmt"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// The moves of a Session's life (a start's answer, a wake, a sleep, a
// restart, an archive, a restore, a Runner's word that moves it) are steps
// of its loop, one at a time, each on the Session as stored then. A move
// that needs the Runner's answer (a stop, an archive, a restore) asks on a
// goroutine of its own, the run showing it (stopping, archiving,
// restoring), and goes on in the step that takes the answer; a move asked
// meanwhile waits in the run's pending and is made after it, in order. So
// nothing wakes a Session between its sleep and its archive, and a prompt
// that comes while it goes to sleep wakes it once it is asleep. The caller
// waits for the move's answer with its context.

// errClosing answers a move the Owner's Close cut short.
var errClosing = fmt.Errorf("the Hub is shutting down; try again once it is back: %w", errdefs.ErrUnavailable)

// errAsked is what a move returns when it asked the Runner: its answer
// comes from the step that takes the Runner's.
var errAsked = errors.New("asked the Runner")

// lifeMove is one move's work within a step, on the Session as stored.
type lifeMove func(s *store.Session, a *act) error

// queuedMove is a move asked while another waits on the Runner.
type queuedMove struct {
	f     lifeMove
	reply chan error
}

// moves makes the moves of Sessions' lives steps of their loops: do, ask.
type moves struct {
	*group
	runs     *runs
	sessions *store.Sessions // each move reads its Session as stored
	stream   *stream         // its notes, after the step
}

// act is a move within one step: its Session's run, what the step leaves
// for after it, and its caller's reply.
type act struct {
	m     *moves
	id    string
	r     *run
	after *later
	reply chan error
}

// later is what steps leave for after them, run off the loop by the
// goroutine that posted the step, once it has run: what may not be done
// within one (record an Event, tell Effects), then the answers.
type later []func(ctx context.Context)

func (l *later) run(ctx context.Context) {
	for _, f := range *l {
		f(ctx)
	}
}

// later leaves f for after the step.
func (a *act) later(f func(ctx context.Context)) { *a.after = append(*a.after, f) }

// note records what the Hub says about the Session, after the step.
func (a *act) note(kind, text string) {
	st, id := a.m.stream, a.id
	a.later(func(ctx context.Context) { st.note(ctx, id, kind, text) })
}

// answer answers the move's caller, after what the step left before it.
func (a *act) answer(err error) {
	reply := a.reply
	a.later(func(context.Context) { reply <- err })
}

// do makes a move as a step of the Session's loop, starting one if it has
// none, and waits with ctx for its answer.
func (o *moves) do(ctx context.Context, id string, f lifeMove) error {
	a := &act{m: o, id: id, after: &later{}, reply: make(chan error, 1)}
	if !o.runs.with(id, func(r *run) { a.r = r; o.attempt(a, f) }) {
		return errClosing
	}
	a.after.run(context.WithoutCancel(ctx)) // what the move did is told, whatever the caller does now
	select {
	case err := <-a.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attempt makes a move now, or, while another waits on the Runner, queues
// it to be made after that one.
func (o *moves) attempt(a *act, f lifeMove) {
	if a.r.waiting() {
		a.r.pending = append(a.r.pending, queuedMove{f: f, reply: a.reply})
		return
	}
	s, err := o.sessions.SessionByID(o.ctx, a.id)
	if err == nil {
		err = f(&s, a)
	}
	if !errors.Is(err, errAsked) {
		a.answer(err)
	}
}

// ask shows the run in ph while req asks the Runner, on a goroutine of its
// own, and returns errAsked. The step that takes the Runner's answer runs
// then with it, on the Session as stored; then leaves ph, back to where
// the run was (run.before) for a refusal. The moves queued meanwhile are
// made after it.
func (o *moves) ask(a *act, ph phase, why string, req func(ctx context.Context) error, then func(s *store.Session, a *act, err error) error) error {
	r := a.r
	r.before = r.phase
	if err := r.enter(ph, why); err != nil {
		o.runs.faultOn(a.id, r, faultMove, err.Error())
	}
	id, reply := a.id, a.reply
	// Asked once the step's notes are recorded: the answer's step would
	// otherwise record its own first (Archived before Asleep) and answer
	// the caller before the first is in the history.
	a.later(func(context.Context) {
		if !o.spawn(func(ctx context.Context) {
			err := req(ctx)
			next := &act{m: o, id: id, after: &later{}, reply: reply}
			if !o.runs.on(id, func(r *run) { next.r = r; o.answered(next, then, err) }) {
				reply <- errClosing
			}
			next.after.run(ctx)
		}) {
			reply <- errClosing // the loop ends with the Owner
		}
	})
	return errAsked
}

// answered is the step that takes the Runner's answer to ask.
func (o *moves) answered(a *act, then func(s *store.Session, a *act, err error) error, runnerErr error) {
	s, err := o.sessions.SessionByID(o.ctx, a.id)
	if err == nil {
		err = then(&s, a, runnerErr)
	} else {
		a.r.to(a.r.before, "the Session could not be read")
	}
	if !errors.Is(err, errAsked) {
		a.answer(err)
	}
	for len(a.r.pending) > 0 && !a.r.waiting() {
		m := a.r.pending[0]
		a.r.pending = a.r.pending[1:]
		o.attempt(&act{m: o, id: a.id, r: a.r, after: a.after, reply: m.reply}, m.f)
	}
}
