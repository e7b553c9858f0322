package session

import (
	"context"
	"fmt"
	"strings"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// The prompt's way to the Runner, all in this file: a dispatch step
// (dispatchOn, on the Session's loop) takes the next queued prompt and
// hands it to deliver, whose goroutine sends session.deliver; the answer
// comes back to the queue as a step (ack, or notTaken's giveBack).

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

// dispatchOn is dispatch within a step: the queue is read, and the prompt
// taken in the store, while the machine has it claimed; only one prompt is
// on its way at a time. The Runner's answer comes back as a step (ack).
func (o *queue) dispatchOn(id string, r *run) {
	if r.phase != idle || !r.delivery.to(claimed) {
		return
	}
	if o.heldAtLimit(id) { // the Turn past a limit never starts
		r.delivery.to(queued)
		return
	}
	p, ok, err := o.store.Prompts.TakePrompt(o.ctx, id)
	if err == nil && ok {
		p, err = o.openPrompt(p)
	}
	if err != nil || !ok {
		r.delivery.to(queued)
		if err != nil && o.ctx.Err() == nil {
			o.log.Error("take a prompt", "session", id, "err", err)
		}
		return
	}
	r.delivery.to(typing)
	r.delivery.p = p
	o.limits.promptSent(id, r, p)
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
		// again once it is back. A step of its own, after this one.
		o.spawn(func(context.Context) { o.giveBack(id, p.ID, nil) })
		return
	}
	if !o.add() {
		return // closing: the next Hub's Recover takes the prompt up
	}
	// Its own goroutine, not spawn's, so the prompt's way to the Runner
	// stays in this file (docs/architecture.md).
	go func() {
		defer o.wg.Done()
		ctx, cancel := context.WithTimeout(o.ctx, o.opts.DeliveryDeadline+replyGrace)
		defer cancel()
		var got protocol.SessionDelivered
		err := rc.Request(ctx, protocol.TypeSessionDeliver, protocol.SessionDeliver{SessionID: id, PromptID: p.ID,
			Text: promptText(p), Command: p.IsCommand, WithinMS: o.opts.DeliveryDeadline.Milliseconds(), Attachments: deliveredAttachments(p)}, &got)
		switch {
		case err != nil:
			o.notTaken(id, p, "its Runner did not type it: "+err.Error())
		case !got.Taken:
			o.notTaken(id, p, got.Why)
		case got.Before:
			o.ack(id, fromBefore, p.ID)
		default:
			o.ack(id, fromReply, p.ID)
		}
	}()
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
