package session

import (
	"context"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// headline names each state in the history line a move leaves.
var headline = map[store.SessionState]string{
	Starting: "Starting",
	Active:   "Awake",
	Frozen:   "Frozen",
	Asleep:   "Asleep",
	Failed:   "Failed",
	Archived: "Archived",
}

// moveOn is the one place a Session's state changes, within a step of its
// loop (act.go), on s as stored and its run a.r. It checks the transition
// table, moves the stored state only if nothing moved it meanwhile, and
// carries every effect of entering the new state: the run moved or made
// afresh (its loop ends once nothing waits), a prompt on its way put back
// in the queue, the mod token revoked, ports and terminals dropped, the
// history line saying why, and word to every watcher. s is updated.
func (o *life) moveOn(s *store.Session, a *act, to store.SessionState, why string, transient bool) error {
	if err := checkMove(s.State, to); err != nil {
		return err
	}
	ctx := o.ctx
	detail := o.opts.Redactor.RedactText(ctx, s.ID, why)
	freeing := awake(s.State) && !awake(to) && o.opts.MemberMaxAwake > 0
	if freeing { // a wake counting the Creator's awake Sessions sees this one's move, or is in line before it
		o.limits.admit.Lock()
	}
	err := o.store.Sessions.MoveSession(ctx, s.ID, s.State, to, detail, transient)
	if freeing {
		o.limits.admit.Unlock()
	}
	if err != nil {
		return err
	}
	from := s.State
	s.State, s.StateDetail, s.Transient = to, detail, transient

	// The run follows, in the same step: no dispatch or acknowledgement
	// is half done, so the store has the prompt put back as the machine
	// has it.
	r := a.r
	var requeue string // the prompt to put back, from requeueFrom
	var requeueFrom store.PromptState
	var unanswered bool
	var took time.Duration // awake, toward its Hours
	var cut *time.Timer
	var fault error // a run that was where its table does not allow this move
	switch to {
	case Starting, Active:
		ph := starting
		if to == Active {
			ph = idle
		}
		fault = r.enter(ph, why)
		r.owed, r.since = false, time.Now()
	case Frozen:
		// Claude Code may still run: only the prompt not yet taken goes
		// back, to be typed again once the Runner is back.
		fault = r.enter(away, why)
		requeue, requeueFrom = r.delivery.putBack(true)
	default: // Asleep, Failed, Archived: no Claude Code runs.
		unanswered = r.phase == asking || (r.phase == stopping && r.before == asking)
		// One taken but never written down is not in the conversation a
		// wake resumes.
		requeue, requeueFrom = r.delivery.putBack(false)
		took, cut = r.awakeDone()
		fault = r.enter(down, why)
		r.reset()
	}
	if requeue != "" {
		if err := setPrompt(ctx, o.store.Prompts, requeue, requeueFrom, store.Queued); err != nil {
			o.log.Error("put a prompt back in the queue", "session", s.ID, "prompt", requeue, "err", err)
		}
	}
	if fault != nil {
		o.runs.faultOn(s.ID, r, faultMove, fault.Error())
	}
	id := s.ID
	if !awake(to) {
		if err := o.store.Sessions.RevokeModToken(ctx, id); err != nil {
			o.log.Error("revoke a mod token", "session", id, "err", err)
		}
		a.later(func(context.Context) { o.opts.Effects.Stopped(id) })
		o.limits.addTurnTime(ctx, id, took, cut)
	}
	if to == Active && s.Turns > 0 {
		o.limits.startAwakeOn(id, r) // its Hours run on from its first prompt
	}
	if freeing {
		creator := s.CreatorID
		o.spawn(func(ctx context.Context) { o.limits.wakeFromLine(ctx, creator) })
	}
	if from == Active {
		a.later(func(context.Context) { o.opts.Effects.LeftActive(id) })
	}
	kind := protocol.EventNote
	if to == Failed {
		kind = protocol.EventError
	}
	line := fmt.Sprintf("%s: %s.", headline[to], why)
	if requeue != "" && !awake(to) {
		line += " The prompt it was on goes back to the head of the queue, since Claude Code never wrote it down."
	}
	if unanswered {
		line += " Claude's question was left unanswered."
	}
	a.note(kind, line)
	o.changed(id)
	o.log.Info("session moved", "session", id, "from", from, "to", to, "why", detail)
	return nil
}
