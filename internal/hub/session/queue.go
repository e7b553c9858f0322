package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// queue is the prompt queue of every Session and the delivery of the
// prompt on its way.
type queue struct{ *Owner }

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
	o.mu.Lock()
	if r := o.runs[s.ID]; r != nil {
		r.since = time.Now()
		if r.phase == stopping {
			r.wakeAfter = true
		}
	}
	o.mu.Unlock()
	o.changed(s.ID)
	if s.State == Asleep || s.State == Failed {
		err := o.wake(ctx, s.ID, "a prompt woke it", func(cur *store.Session) bool { return cur.State == Asleep || cur.State == Failed })
		if err != nil && !errors.Is(err, errdefs.ErrUnavailable) && !errors.Is(err, errdefs.ErrConflict) {
			return p, err
		}
	}
	o.dispatch(s.ID)
	return p, nil
}

// EditPrompt changes a queued prompt's text, or cancels it for "" (along
// the prompt table). ErrConflict once it is on its way.
func (o *queue) EditPrompt(ctx context.Context, sessionID, promptID, text string) error {
	var err error
	if text != "" {
		err = o.store.Prompts.EditPrompt(ctx, sessionID, promptID, "", o.sealPrompt(store.Prompt{SessionID: sessionID, Text: text}).Sealed)
	} else if _, err = o.store.Prompts.PromptByID(ctx, sessionID, promptID); err == nil { // the Session's, not another's
		err = setPrompt(ctx, o.store, promptID, store.Queued, store.Cancelled)
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

// openPrompt opens a stored prompt's text; one stored before prompts were
// sealed has it in the clear.
func (o *queue) openPrompt(p store.Prompt) (store.Prompt, error) {
	if p.Sealed == nil {
		return p, nil
	}
	b, err := o.opts.Sealer.Open(p.Sealed, promptSeal(p.SessionID))
	if err != nil {
		return p, fmt.Errorf("open prompt %s: %w", p.ID, err)
	}
	p.Text, p.Sealed = string(b), nil
	return p, nil
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
// as one step of the Session's (steps.go).
func (o *queue) dispatch(id string) { o.steps.do(id, func() { o.dispatchNow(id) }) }

// dispatchNow is dispatch within a step. Only one prompt is on its way at
// a time; the queue is read without the Owner's lock held.
func (o *queue) dispatchNow(id string) {
	o.mu.Lock()
	r := o.runs[id]
	if r == nil || r.phase != idle || !r.delivery.to(claimed) {
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	if o.heldAtLimit(id) { // the Turn past a limit never starts
		o.mu.Lock()
		r.delivery.to(queued)
		o.mu.Unlock()
		return
	}

	p, ok, err := o.store.Prompts.TakePrompt(o.ctx, id)
	if err == nil && ok {
		p, err = o.openPrompt(p)
	}
	o.mu.Lock()
	if err != nil || !ok {
		r.delivery.to(queued)
		o.mu.Unlock()
		if err != nil && o.ctx.Err() == nil {
			o.log.Error("take a prompt", "session", id, "err", err)
		}
		return
	}
	if o.runs[id] != r || !r.up() || !r.delivery.to(typing) {
		// Moves and acknowledgements are steps too, so nothing moved the
		// run while the queue was read: a fault, named. The prompt goes
		// back so it is not lost meanwhile.
		ph, dl := r.phase, r.delivery.state
		r.delivery.to(queued)
		o.mu.Unlock()
		o.requeue(id, p.ID)
		o.fault(id, faultStep, fmt.Sprintf("the run moved to %s, its delivery to %s, while a dispatch read the queue", ph, dl))
		return
	}
	r.delivery.p = p
	o.mu.Unlock()
	o.promptSent(id, p)
	o.changed(id)
	o.deliver(id, p)
}

// replyGrace is how long past its deadline the Hub waits for the Runner's
// answer to session.deliver: the answer's way back.
const replyGrace = 10 * time.Second

// deliver sends a prompt to the Session's Runner, once, with the time it
// has to get Claude Code to take it, and takes its answer.
func (o *queue) deliver(id string, p store.Prompt) {
	s, err := o.store.Sessions.SessionByID(o.ctx, id)
	var rc Requester
	if err == nil {
		rc = o.opts.Runners.Runner(s.RunnerID)
	}
	if rc == nil {
		// The Runner went meanwhile: back to the head of the queue, sent
		// again once it is back. Not in this step: giveBack waits on the
		// Session's lock.
		o.spawn(func(context.Context) { o.giveBack(id, p.ID, nil) })
		return
	}
	o.spawn(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, o.opts.DeliveryDeadline+replyGrace)
		defer cancel()
		var got protocol.SessionDelivered
		err := rc.Request(ctx, protocol.TypeSessionDeliver, protocol.SessionDeliver{SessionID: id, PromptID: p.ID,
			Text: promptText(p), Command: p.IsCommand, WithinMS: o.opts.DeliveryDeadline.Milliseconds(), Attachments: deliveredAttachments(p)}, &got)
		switch {
		case err != nil:
			o.notTaken(id, p, "its Runner did not type it: "+err.Error())
		case !got.Taken:
			o.notTaken(id, p, got.Why)
		default:
			o.ack(id, fromReply, p.ID)
		}
	})
}

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
// queue, in memory and in the store under the Session's lock, as move
// does: a move that follows finds it queued in both, and one that came
// first has put it back already (giveBack then reports false). also runs,
// under the Owner's lock, on the delivery it put back.
func (o *queue) giveBack(id, promptID string, also func(d *delivery)) bool {
	l := o.sessionLock(id)
	l.Lock()
	defer l.Unlock()
	o.mu.Lock()
	r := o.runs[id]
	if r == nil || !r.delivery.typingOf(promptID) || !r.delivery.to(queued) {
		o.mu.Unlock()
		return false
	}
	if also != nil {
		also(&r.delivery)
	}
	o.mu.Unlock()
	o.requeue(id, promptID)
	return true
}

// requeue puts a prompt on its way back at the head of its queue (prompts
// are taken oldest first).
func (o *queue) requeue(id, promptID string) {
	if err := setPrompt(o.ctx, o.store, promptID, store.Delivering, store.Queued); err != nil && o.ctx.Err() == nil {
		o.log.Error("put a prompt back in the queue", "session", id, "prompt", promptID, "err", err)
	}
	o.changed(id)
}

// Typed is the Creator typing in the Session's terminal: the idle clock
// starts again, and a Turn the hook says begins next is theirs, which keeps
// the Session awake until it ends as one the Hub sent a prompt for does.
func (o *queue) Typed(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r := o.runs[id]; r != nil {
		r.typed, r.since = true, time.Now()
	}
}

// Accepted is the mod's UserPromptSubmit: Claude Code took the prompt on
// its way, if one is, and a Turn runs.
func (o *queue) Accepted(id string) { o.steps.do(id, func() { o.accepted(id) }) }

// accepted is Accepted within a step.
func (o *queue) accepted(id string) {
	o.mu.Lock()
	r := o.runs[id]
	var started bool // the transcript may have told of it first
	if r != nil {
		if r.typed && !r.delivery.onItsWay() { // typed in the terminal by its Creator
			r.typed, r.owed = false, true
		}
		started = r.began(fromHook.String())
	}
	o.mu.Unlock()
	if started {
		o.opts.Metrics.TurnStarted()
	}
	o.ackNow(id, fromHook, "")
	o.changed(id)
}

// ack moves a Session's delivery by an acknowledgement from src (of
// promptID, for the Runner's reply), with its effects: a Turn runs once a
// prompt is taken; a prompt that leaves typing is recorded delivered; then
// the next prompt may go. It is one step of the Session's.
func (o *queue) ack(id string, src ackSource, promptID string) {
	o.steps.do(id, func() { o.ackNow(id, src, promptID) })
}

// ackNow is ack within a step.
func (o *queue) ackNow(id string, src ackSource, promptID string) {
	o.mu.Lock()
	r := o.runs[id]
	if r == nil {
		o.mu.Unlock()
		return
	}
	d := &r.delivery
	from, ok := d.ack(src, promptID)
	if !ok {
		o.mu.Unlock()
		return
	}
	p := d.p
	turn := from == typing && !p.IsCommand // the transcript may tell of it before the hook
	started := turn && r.began(src.String())
	if from == typing {
		d.givenUp = 0
	}
	o.mu.Unlock()
	if started {
		o.opts.Metrics.TurnStarted()
	}
	if from == typing {
		o.markDelivered(id, p)
	}
	o.changed(id)
	// A command done lets the next prompt go; so does a Turn that ended
	// while the store was written, since TakePrompt passes over a prompt
	// still delivering. While the Turn runs, dispatch does nothing.
	o.dispatchNow(id)
}

// markDelivered records a prompt Claude Code took. The record outlives a
// Close begun meanwhile (which waits for the Runner's reply that told of
// it): a prompt left Delivering would be typed again by the next Hub's
// Recover, since no Turn may be in the store yet.
func (o *queue) markDelivered(id string, p store.Prompt) {
	o.opts.Metrics.PromptDelivered(time.Since(p.CreatedAt))
	if err := setPrompt(context.WithoutCancel(o.ctx), o.store, p.ID, store.Delivering, store.Delivered); err != nil {
		o.log.Error("record a prompt delivered", "session", id, "prompt", p.ID, "err", err)
	}
}

// TurnEnded is the end of a Turn (the mod's Stop or StopFailure, or an
// interrupt in the transcript): the next prompt may go. The Sandbox can
// tell of one it never ran, so it counts toward nothing: the idle clock
// starts again only at the first end after a prompt the Hub sent, and the
// Hours run on (limits.go). It is one step of the Session's.
func (o *queue) TurnEnded(id string) { o.steps.do(id, func() { o.turnEnded(id) }) }

// turnEnded is TurnEnded within a step.
func (o *queue) turnEnded(id string) {
	var was bool
	o.mu.Lock()
	if r := o.runs[id]; r != nil {
		was = r.busy()
		if r.owed {
			r.owed, r.since = false, time.Now()
		}
		if was {
			r.to(idle, "the Turn ended")
		}
		r.resync, r.turnAt = false, time.Time{}
		if r.delivery.state == taken {
			r.delivery.to(written) // Claude Code writes a prompt down before it answers
		}
	}
	o.mu.Unlock()
	if was { // a Stop hook and the transcript's interrupt may both tell of one end
		o.opts.Metrics.TurnEnded()
	}
	o.changed(id)
	o.dispatchNow(id)
}

// promptText is what is typed for a prompt: a leading ! or / would start
// Claude Code's bash mode or a slash command, so unless the person asked for
// one, a blank character goes first and Claude reads it as text. Measured on
// 2.1.328: Claude Code trims whitespace before it looks (so a space does not
// do), removes zero-width characters, and has no escape of its own; U+2800,
// the blank braille pattern, is kept.
func promptText(p store.Prompt) string {
	if !p.IsCommand && (strings.HasPrefix(p.Text, "!") || strings.HasPrefix(p.Text, "/")) {
		return textMark + p.Text
	}
	return p.Text
}

// deliveredAttachments are the files a prompt carries, as the Runner
// fetches and places them before it types the prompt.
func deliveredAttachments(p store.Prompt) []protocol.Attachment {
	var out []protocol.Attachment
	for _, a := range p.Attachments {
		out = append(out, protocol.Attachment{ID: a.ID, File: a.File, Size: a.Size})
	}
	return out
}

// textMark keeps a prompt's leading ! or / from being a command.
const textMark = "\u2800"
