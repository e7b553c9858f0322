package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// queue is the prompt queue of every Session and the delivery of the
// prompt on its way.
type queue struct {
	deps
	life   *life   // a prompt wakes its Session
	limits *limits // a prompt sent is a Turn; one past a limit never goes
}

// The prompt queue: a Session's prompts wait in the store and are sent to
// its Runner one at a time, only while Claude Code is ready and between
// Turns. The Runner types a prompt, again as often as Claude Code does not
// take it, for DeliveryDeadline at most; not taken by then, it goes back to
// the head of the queue. Where the prompt on its way is, is the delivery
// machine's (delivery.go).

// Prompt queues a prompt. It wakes an Asleep or Failed Session whose Runner
// is connected; otherwise it waits for the Runner.
func (o *queue) Prompt(ctx context.Context, s store.Session, p store.Prompt) (store.Prompt, error) {
	if s.State == Archived {
		return store.Prompt{}, fmt.Errorf("the Session is archived: restore it first (kndl restore): %w", errdefs.ErrConflict)
	}
	p.SessionID = s.ID
	text := p.Text
	p, err := o.store.Prompts.EnqueuePrompt(ctx, o.sealPrompt(p))
	if err != nil {
		return p, err
	}
	p.Text, p.Sealed = text, nil
	o.changed(s.ID)
	// A move of the Session's, on it as it is then: one that came while
	// it went to sleep is made once it is asleep, and wakes it.
	err = o.moves.do(ctx, s.ID, func(s *store.Session, a *act) error {
		switch {
		case awake(s.State):
			a.r.since = time.Now()
			o.dispatchOn(s.ID, a.r)
		case s.State == Asleep || s.State == Failed:
			return o.life.wakeOn(s, a, "a prompt woke it")
		}
		return nil
	})
	if err != nil && !errors.Is(err, errdefs.ErrUnavailable) && !errors.Is(err, errdefs.ErrConflict) {
		return p, err
	}
	return p, nil
}

// EditPrompt changes a queued prompt's text, or cancels it for "" (along
// the prompt table). ErrConflict once it is on its way.
func (o *queue) EditPrompt(ctx context.Context, sessionID, promptID, text string) error {
	var err error
	if text != "" {
		err = o.store.Prompts.EditPrompt(ctx, sessionID, promptID, "", o.sealPrompt(store.Prompt{SessionID: sessionID, Text: text}).Sealed)
	} else if _, err = o.store.Prompts.PromptByID(ctx, sessionID, promptID); err == nil { // the Session's, not another's
		err = setPrompt(ctx, o.store.Prompts, promptID, store.Queued, store.Cancelled)
	}
	if err != nil {
		return err
	}
	o.changed(sessionID)
	return nil
}

// MovePrompt moves a queued prompt to place to (from 1) in the queue.
func (o *queue) MovePrompt(ctx context.Context, sessionID, promptID string, to int) error {
	if err := o.store.Prompts.MovePrompt(ctx, sessionID, promptID, to); err != nil {
		return err
	}
	o.changed(sessionID)
	return nil
}

// promptSeal binds a prompt's sealed text to its Session.
func promptSeal(sessionID string) string { return "prompt:" + sessionID }

// sealPrompt seals a prompt's text for the store.
func (o *queue) sealPrompt(p store.Prompt) store.Prompt {
	p.Sealed, p.Text = o.opts.Sealer.Seal([]byte(p.Text), promptSeal(p.SessionID)), ""
	return p
}

// Queue is a Session's waiting prompts as the API shows them: opened, and
// masked like its Events (a watcher sees the queue too).
func (o *queue) Queue(ctx context.Context, id string) ([]store.Prompt, error) {
	q, err := o.store.Prompts.List(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]store.Prompt, 0, len(q))
	for _, p := range q {
		p, err := o.openPrompt(p)
		if err != nil {
			return nil, err
		}
		p.Text = o.opts.Redactor.RedactText(ctx, id, p.Text)
		out = append(out, p)
	}
	return out, nil
}

// dispatch types the Session's next queued prompt if Claude Code is idle,
// as a step of its loop.
func (o *queue) dispatch(id string) { o.runs.on(id, func(r *run) { o.dispatchOn(id, r) }) }

// notTaken puts a prompt Claude Code did not take in the time given back
// at the head of the queue, saying why, and sends it again after a wait
// that doubles with each prompt put back since one was last taken.
func (o *queue) notTaken(id string, p store.Prompt, why string) {
	var wait time.Duration
	if !o.giveBack(id, p.ID, func(d *delivery) {
		d.givenUp++
		wait = min(o.opts.DeliveryDeadline<<(d.givenUp-1), o.opts.RetryMax)
	}) {
		return // taken meanwhile (the hook told of it first), or put back by a move
	}
	o.log.Warn("prompt not taken", "session", id, "prompt", p.ID, "why", why)
	o.note(o.ctx, id, protocol.EventError, fmt.Sprintf("Claude Code did not take a prompt (%s); it is back at the head of the queue, sent again in %s.",
		o.opts.Redactor.RedactText(o.ctx, id, why), wait.Round(time.Millisecond)))
	// Sent again later even if nothing else happens (no Turn ends, no
	// prompt comes): a Claude Code slow to take it, on a loaded host, is
	// not left with its queue waiting for ever.
	o.after(wait, func(context.Context) { o.dispatch(id) })
}

// giveBack puts the prompt typing, promptID, back at the head of the
// queue, in memory and in the store in one step, as a move's does: a move
// that follows finds it queued in both, and one that came first has put it
// back already (giveBack then reports false). also runs on the delivery it
// put back.
func (o *queue) giveBack(id, promptID string, also func(d *delivery)) bool {
	var back bool
	o.runs.on(id, func(r *run) {
		if !r.delivery.typingOf(promptID) || !r.delivery.to(queued) {
			return
		}
		if also != nil {
			also(&r.delivery)
		}
		o.requeue(id, promptID)
		back = true
	})
	return back
}

// requeue puts a prompt on its way back at the head of its queue (prompts
// are taken oldest first).
func (o *queue) requeue(id, promptID string) {
	if err := setPrompt(o.ctx, o.store.Prompts, promptID, store.Delivering, store.Queued); err != nil && o.ctx.Err() == nil {
		o.log.Error("put a prompt back in the queue", "session", id, "prompt", promptID, "err", err)
	}
	o.changed(id)
}

// Typed is the Creator typing in the Session's terminal: the idle clock
// starts again, and a Turn the hook says begins next is theirs, which keeps
// the Session awake until it ends as one the Hub sent a prompt for does.
func (o *queue) Typed(id string) {
	o.runs.on(id, func(r *run) { r.typed, r.since = true, time.Now() })
}

// Accepted is the mod's UserPromptSubmit: Claude Code took the prompt on
// its way, if one is, and a Turn runs.
func (o *queue) Accepted(id string) {
	o.runs.on(id, func(r *run) {
		if r.typed && !r.delivery.onItsWay() { // typed in the terminal by its Creator
			r.typed, r.owed = false, true
		}
		if r.began(fromHook.String()) { // the transcript may have told of it first
			o.opts.Metrics.TurnStarted()
		}
		o.ackOn(id, r, fromHook, "")
	})
	o.changed(id)
}

// ack moves a Session's delivery by an acknowledgement from src (of
// promptID, for the Runner's reply), with its effects: a Turn runs once a
// prompt is taken; a prompt that leaves typing is recorded delivered; then
// the next prompt may go. It is a step of the Session's loop.
func (o *queue) ack(id string, src ackSource, promptID string) {
	o.runs.on(id, func(r *run) { o.ackOn(id, r, src, promptID) })
}

// ackOn is ack within a step.
func (o *queue) ackOn(id string, r *run, src ackSource, promptID string) {
	d := &r.delivery
	from, ok := d.ack(src, promptID)
	if !ok {
		return
	}
	p := d.p
	// The transcript may tell of the Turn before the hook; a prompt taken
	// before began its Turn then.
	if from == typing && !p.IsCommand && src != fromBefore && r.began(src.String()) {
		o.opts.Metrics.TurnStarted()
	}
	if from == typing {
		d.givenUp = 0
		o.markDelivered(id, p)
	}
	o.changed(id)
	// A command done lets the next prompt go. While the Turn runs,
	// dispatch does nothing.
	o.dispatchOn(id, r)
}

// markDelivered records a prompt Claude Code took. The record outlives a
// Close begun meanwhile (which waits for the Runner's reply that told of
// it): a prompt left Delivering would be typed again by the next Hub's
// Recover, since no Turn may be in the store yet.
func (o *queue) markDelivered(id string, p store.Prompt) {
	o.opts.Metrics.PromptDelivered(time.Since(p.CreatedAt))
	if err := setPrompt(context.WithoutCancel(o.ctx), o.store.Prompts, p.ID, store.Delivering, store.Delivered); err != nil {
		o.log.Error("record a prompt delivered", "session", id, "prompt", p.ID, "err", err)
	}
}

// TurnEnded is the end of a Turn (the mod's Stop or StopFailure, or an
// interrupt in the transcript): the next prompt may go. The Sandbox can
// tell of one it never ran, so it counts toward nothing: the idle clock
// starts again only at the first end after a prompt the Hub sent, and the
// Hours run on (limits.go). It is a step of the Session's loop.
func (o *queue) TurnEnded(id string) {
	if !o.runs.on(id, func(r *run) {
		was := r.busy()
		if r.owed {
			r.owed, r.since = false, time.Now()
		}
		if was {
			r.to(idle, "the Turn ended")
			o.opts.Metrics.TurnEnded() // a Stop hook and the transcript's interrupt may both tell of one end
		}
		r.resync, r.turnAt = false, time.Time{}
		if r.delivery.state == taken {
			r.delivery.to(written) // Claude Code writes a prompt down before it answers
		}
		o.changed(id)
		o.dispatchOn(id, r)
	}) {
		o.changed(id)
	}
}
