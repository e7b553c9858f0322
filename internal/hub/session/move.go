package session

import (
	"context"
	"fmt"
	"sync"
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

// move is the one place a Session's state changes. It checks the
// transition table, moves the stored state only if nothing moved it
// meanwhile, and carries every effect of entering the new state: the run
// state made or dropped, a prompt on its way put back in the queue, the mod
// token revoked, ports and terminals dropped, the history line saying why,
// and word to every watcher. Call with the Session's lock held; s is
// updated.
func (o *life) move(ctx context.Context, s *store.Session, to store.SessionState, why string, transient bool) error {
	if err := checkMove(s.State, to); err != nil {
		return err
	}
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

	var requeue string // the prompt to put back, from requeueFrom
	var requeueFrom store.PromptState
	var unanswered bool
	var took time.Duration // awake, toward its Hours
	var cut *time.Timer
	var fault error // a run that was where its table does not allow this move
	// One step of the Session's loop: no dispatch or acknowledgement is
	// half done, so the store has the prompt put back as the machine has
	// it. A Session becoming awake gets its loop; one that stops being
	// awake ends it.
	effects := func(r *run) {
		switch to {
		case Starting, Active:
			ph := starting
			if to == Active {
				ph = idle
			}
			fault = r.enter(ph, why)
			r.owed, r.since = false, time.Now()
		case Frozen:
			// Claude Code may still run: only the prompt not yet taken
			// goes back, to be typed again once the Runner is back.
			fault = r.enter(away, why)
			requeue, requeueFrom = r.delivery.putBack(true)
		default: // Asleep, Failed, Archived: no Claude Code runs.
			unanswered = r.phase == asking || (r.phase == stopping && r.before == asking)
			// One taken but never written down is not in the
			// conversation a wake resumes.
			requeue, requeueFrom = r.delivery.putBack(false)
			took, cut = r.awakeDone()
			r.dropped = true
		}
		if requeue != "" {
			if err := setPrompt(ctx, o.store.Prompts, requeue, requeueFrom, store.Queued); err != nil {
				o.log.Error("put a prompt back in the queue", "session", s.ID, "prompt", requeue, "err", err)
			}
		}
	}
	if awake(to) && to != Frozen {
		o.runs.with(s.ID, effects)
	} else {
		o.runs.on(s.ID, effects)
	}
	if fault != nil {
		o.runs.fault(s.ID, faultMove, fault.Error())
	}
	if !awake(to) {
		if err := o.store.Sessions.RevokeModToken(ctx, s.ID); err != nil {
			o.log.Error("revoke a mod token", "session", s.ID, "err", err)
		}
		o.opts.Effects.Stopped(s.ID)
		o.limits.addTurnTime(ctx, s.ID, took, cut)
	}
	if to == Active && s.Turns > 0 {
		o.limits.startAwake(s.ID) // its Hours run on from its first prompt
	}
	if freeing {
		creator := s.CreatorID
		o.spawn(func(ctx context.Context) { o.limits.wakeFromLine(ctx, creator) })
	}
	if from == Active {
		o.opts.Effects.LeftActive(s.ID)
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
	o.note(ctx, s.ID, kind, line)
	o.changed(s.ID)
	o.log.Info("session moved", "session", s.ID, "from", from, "to", to, "why", detail)
	return nil
}

// locked runs f with the Session's lock held and the Session as stored.
func (o *life) locked(ctx context.Context, id string, f func(s *store.Session) error) error {
	l := o.sessionLock(id)
	l.Lock()
	defer l.Unlock()
	s, err := o.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		return err
	}
	return f(&s)
}

// sessionLock returns the lock that serialises one Session's moves.
func (o *life) sessionLock(id string) *sync.Mutex {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.lock[id]
	if l == nil {
		l = &sync.Mutex{}
		o.lock[id] = l
	}
	return l
}
