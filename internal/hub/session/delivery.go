package session

import (
	"slices"

	"kndl.dev/kndl/internal/store"
)

// The delivery machine: where the one prompt on its way to an awake
// Session's Claude Code is. Three sources tell that Claude Code took it, in
// any order, and any of them may never come: the Runner's reply to
// session.deliver, the mod's UserPromptSubmit hook, and the transcript
// writing the prompt down (Typed). ack takes each; the table says what may
// follow what, and a move it doesn't list changes nothing.

// deliveryState is where the prompt on its way is.
type deliveryState int

const (
	// queued: none is on its way; the next queued prompt may go.
	queued deliveryState = iota
	// claimed: dispatch reads the queue for the next prompt.
	claimed
	// typing: the Runner has p to type, as often as Claude Code does not
	// take it, until the Hub's deadline.
	typing
	// taken: Claude Code took p, and its transcript has not written it
	// down yet, so a sleep now puts it back in the queue: the
	// conversation a wake resumes doesn't have it.
	taken
	// written: the transcript has p (or p was a command, which it never
	// has): nothing of it is left to do.
	written
)

var deliveryNames = [...]string{queued: "queued", claimed: "claimed", typing: "typing", taken: "taken", written: "written"}

func (st deliveryState) String() string { return deliveryNames[st] }

// deliveryNext lists, for each state, the states that may follow it.
var deliveryNext = map[deliveryState][]deliveryState{
	// Claimed by dispatch.
	queued: {claimed},
	// An empty queue, or the Session left Active while it was read; or
	// the prompt read is typed.
	claimed: {queued, typing},
	// Put back in the queue (not taken in time, the Runner gone, a
	// sleep); taken (the reply, the hook); written (the transcript, or a
	// command's reply).
	typing: {queued, taken, written},
	// Written down (the transcript, or its Turn's end: Claude Code
	// writes a prompt down before it answers); or put back by a sleep.
	taken: {written, queued},
	// The next prompt; or a sleep, which has nothing to put back.
	written: {claimed, queued},
}

// delivery is one Session's delivery machine, held by its run.
type delivery struct {
	state deliveryState
	// p is the prompt typing, taken or written.
	p store.Prompt
	// givenUp counts the prompts put back after their last try since
	// Claude Code last took one: the wait before typing again doubles.
	givenUp int
	// moves are its last moves, for a fault (alarm.go).
	moves trail
}

// to moves the machine to next if the table allows it, and reports
// whether it did; an illegal move changes nothing.
func (d *delivery) to(next deliveryState) bool {
	if !slices.Contains(deliveryNext[d.state], next) {
		return false
	}
	d.moves.add("%s -> %s", d.state, next)
	d.state = next
	return true
}

// onItsWay reports whether a prompt is being claimed or typed: no other
// may go meanwhile, and the Session is not idle.
func (d *delivery) onItsWay() bool { return d.state == claimed || d.state == typing }

// typingOf reports whether prompt id is being typed.
func (d *delivery) typingOf(id string) bool { return d.state == typing && d.p.ID == id }

// ackSource is who tells that Claude Code took the prompt on its way.
type ackSource int

const (
	// fromReply is the Runner's reply to session.deliver for one prompt.
	fromReply ackSource = iota
	// fromHook is the mod's UserPromptSubmit, naming no prompt.
	fromHook
	// fromTranscript is the transcript writing down the prompt on its way.
	fromTranscript
	// fromBefore is the Runner's reply that Claude Code took the prompt at
	// an earlier session.deliver of it, whose reply was lost (a Hub before
	// this one sent it): nothing was typed now, and the Events of the Turn
	// it began came before the reply. It begins no Turn.
	fromBefore
)

var ackNames = [...]string{fromReply: "the reply", fromHook: "the hook", fromTranscript: "the transcript", fromBefore: "the reply of a prompt taken before"}

func (src ackSource) String() string { return ackNames[src] }

// ackTarget is where an acknowledgement from src moves a delivery in
// state st of prompt p, and whether it moves it at all. The hook and the
// transcript name no prompt: they count for the one on its way. The
// Runner's reply names one, promptID. A prompt taken before is done: its
// Turn and the transcript's record of it came in the Events before.
//
// A command (a slash command or a bash-mode line) fires no hook and is
// never written as a prompt: only the reply tells of it, and it is done.
func ackTarget(st deliveryState, p store.Prompt, src ackSource, promptID string) (deliveryState, bool) {
	switch {
	case (src == fromReply || src == fromBefore) && (st != typing || p.ID != promptID):
		return st, false
	case src == fromBefore || src == fromReply && p.IsCommand:
		return written, true
	case src == fromReply:
		return taken, true
	case p.IsCommand:
		return st, false
	case st == typing && src == fromHook:
		return taken, true
	case (st == typing || st == taken) && src == fromTranscript:
		return written, true
	}
	return st, false
}

// ack moves the machine by an acknowledgement and returns the state it
// left, ok false when it did not move (the acknowledgement is of nothing on
// its way, or comes after another said as much).
func (d *delivery) ack(src ackSource, promptID string) (from deliveryState, ok bool) {
	next, ok := ackTarget(d.state, d.p, src, promptID)
	if !ok {
		return d.state, false
	}
	from = d.state
	return from, d.to(next)
}

// resumeTaken takes up p, which a Hub before this one sent and Claude
// Code took, in a machine made afresh: taken, not yet known written.
func (d *delivery) resumeTaken(p store.Prompt) bool {
	if !d.to(claimed) || !d.to(typing) || !d.to(taken) {
		return false
	}
	d.p = p
	return true
}

// putBack ends the delivery for a Session that stops taking prompts (a
// sleep, a freeze, the Runner gone) and returns the prompt to put back in
// the queue with the store state it is in, if any: one typing, or one
// taken that the transcript never wrote down. Frozen keeps a taken one:
// its Claude Code may still run and write it.
func (d *delivery) putBack(keepTaken bool) (id string, from store.PromptState) {
	switch {
	case d.state == typing:
		id, from = d.p.ID, store.Delivering
	case d.state == taken && !keepTaken:
		id, from = d.p.ID, store.Delivered
	case d.state == taken:
		return "", ""
	}
	d.to(queued)
	return id, from
}
