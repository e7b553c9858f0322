package session

import (
	"context"
	"errors"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// reports takes what a Runner says of its Sessions: its hello, its going,
// their Events, Claude Code's exit.
type reports struct {
	deps
	life    *life
	queue   *queue
	limits  *limits
	budgets *budgets
}

// RunnerBack answers a (re)connected Runner's hello. The Sessions it still
// runs become Active again, each with a fresh mod token; those the Hub
// thought awake on it that no longer run go to sleep, with their running
// subagents Interrupted. Then, on their own goroutine, the Sessions of the
// Runner that should be awake are woken: prompts wait, Keep awake is on,
// or a start failed for a cause a retry may mend. A Session it reports
// that is not in the answer, the Runner stops.
func (o *reports) RunnerBack(ctx context.Context, runnerID string, running []string) []protocol.ResumedSession {
	reported := map[string]bool{}
	for _, id := range running {
		reported[id] = true
	}
	ss, err := o.store.Sessions.List(ctx, store.SessionFilter{RunnerID: runnerID})
	if err != nil {
		o.log.Error("sessions of a reconnected runner", "err", err)
		return nil
	}
	var out []protocol.ResumedSession
	var wake []string
	for _, s := range ss {
		// Set by the move, and read only once it answered: a move made
		// after the caller gave up writes them for no one.
		var resumed *protocol.ResumedSession
		var wakeIt bool
		err := o.moves.do(ctx, s.ID, func(s *store.Session, a *act) error {
			ctx := o.ctx
			switch {
			case (s.State == Active || s.State == Frozen) && reported[s.ID]:
				tok, err := o.store.Sessions.IssueModToken(ctx, s.ID)
				if err != nil {
					return err
				}
				offsets, err := o.store.Sessions.TranscriptOffsets(ctx, s.ID)
				if err != nil {
					return err
				}
				open, err := o.store.Sessions.TurnOpen(ctx, s.ID)
				if err != nil {
					return err
				}
				agents, err := runningAgents(ctx, o.store.Sessions, s.ID)
				if err != nil {
					return err
				}
				if s.State == Frozen {
					if err := o.life.moveOn(s, a, Active, "its Runner is back and Claude Code still runs", false); err != nil {
						return err
					}
				}
				// A Turn that ran when the Hub last heard may still run, or
				// have ended while its hooks could not reach the Hub: the
				// transcript, read on from where the Hub has it, says which.
				var fault error
				r := a.r
				r.resync, r.agents, r.owed = open, agents, open
				switch {
				case open && !r.busy():
					fault = r.enter(turn, "a Turn open in the history when its Runner came back")
					r.busyBy, r.raised, r.turnAt = "a Turn open in the history when its Runner came back", false, time.Now()
				case !open && r.busy():
					fault = r.enter(idle, "no Turn open in the history when its Runner came back")
				}
				if fault != nil {
					o.runs.faultOn(s.ID, r, faultMove, fault.Error())
				}
				if s.Turns > 0 {
					o.limits.startAwakeOn(s.ID, r) // a Hub that restarted counts its Hours again from here
				}
				resumed = &protocol.ResumedSession{SessionID: s.ID, ModToken: tok, Offsets: offsets}
				wakeIt = true // its queue goes on
			case s.State == Active || s.State == Frozen:
				o.life.interruptAgents(a)
				if err := o.life.moveOn(s, a, Asleep, "Claude Code was not running when its Runner came back", false); err != nil {
					return err
				}
				wakeIt = true
			case s.State == Asleep || s.State == Failed:
				wakeIt = true
			}
			return nil
		})
		if err != nil {
			o.log.Error("take a session back", "session", s.ID, "err", err)
			continue
		}
		if resumed != nil {
			out = append(out, *resumed)
		}
		if wakeIt {
			wake = append(wake, s.ID)
		}
	}
	o.spawn(func(ctx context.Context) {
		for _, id := range wake {
			o.wakeIfWanted(ctx, id)
		}
	})
	return out
}

// wakeIfWanted wakes an Asleep or Failed Session whose Runner is back, if
// prompts wait for it, Keep awake is on, or its start failed for a cause
// a retry may mend; and lets an Active one's queue go on.
func (o *reports) wakeIfWanted(ctx context.Context, id string) {
	s, err := o.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		return
	}
	if s.State == Active {
		o.queue.dispatch(id)
		return
	}
	q, err := o.store.Prompts.List(ctx, id)
	if err != nil {
		o.log.Error("read a queue", "session", id, "err", err)
		return
	}
	var why string
	switch {
	case s.State == Failed && !s.Transient:
		return // a person retries it: a retry alone would fail the same way
	case len(q) > 0:
		why = "its Runner is back and prompts wait"
	case s.KeepAwake:
		why = "its Runner is back and Keep awake is on"
	case s.State == Failed:
		why = "its Runner is back, so its start is tried again"
	case s.Place > 0:
		why = "its Runner is back and it waits in line"
	default:
		return
	}
	err = o.life.wake(ctx, id, why, func(cur *store.Session) bool { return cur.State == s.State })
	if err != nil && !errors.Is(err, errdefs.ErrConflict) {
		o.log.Warn("wake a session whose runner is back", "session", id, "err", err)
	}
}

// RunnerGone marks a Runner's Active Sessions Frozen when its connection
// ends: their Claude Code keeps running in the Sandbox.
func (o *reports) RunnerGone(ctx context.Context, runnerID string) {
	o.moveEach(ctx, store.SessionFilter{RunnerID: runnerID, States: []store.SessionState{Active}}, "freeze a session",
		func(s *store.Session, a *act) error {
			if s.State != Active {
				return nil
			}
			return o.life.moveOn(s, a, Frozen, "its Runner is not connected", false)
		})
}

// RunnerRemoved fails every Session on a Runner whose pairing was removed
// for good, saying why (RunnerRevoked, RunnerOwnerRemoved): its Workspace
// was on that machine.
func (o *reports) RunnerRemoved(ctx context.Context, runnerID, cause string) {
	o.moveEach(ctx, store.SessionFilter{RunnerID: runnerID, States: []store.SessionState{Starting, Active, Frozen, Asleep}}, "fail a session of a removed runner",
		func(s *store.Session, a *act) error {
			if s.State == Failed || s.State == Archived {
				return nil
			}
			o.life.interruptAgents(a)
			return o.life.moveOn(s, a, Failed, cause+workspaceGone, false)
		})
}

// moveEach makes f a move of each Session the filter selects, on it as
// stored then (f checks it is still to move); a failure is logged, saying
// what, and the others still move.
func (o *reports) moveEach(ctx context.Context, filter store.SessionFilter, what string, f lifeMove) {
	ss, err := o.store.Sessions.List(ctx, filter)
	if err != nil {
		o.log.Error(what, "err", err)
		return
	}
	for _, s := range ss {
		if err := o.moves.do(ctx, s.ID, f); err != nil {
			o.log.Error(what, "session", s.ID, "err", err)
		}
	}
}

// RunnerNarrowed puts to sleep the awake Sessions on a Runner that their
// Creators may no longer use (store.Runner.UsableBy), as once the Owner
// unshared it, saying why; none of them can wake there until it is shared
// again (wakeOn). A failure is logged and the others still sleep.
func (o *reports) RunnerNarrowed(ctx context.Context, runnerID, why string) {
	rn, err := o.store.Runners.RunnerByID(ctx, runnerID)
	if err != nil {
		o.log.Error("a narrowed runner", "err", err)
		return
	}
	ss, err := o.store.Sessions.List(ctx, store.SessionFilter{RunnerID: runnerID, States: []store.SessionState{Starting, Active, Frozen}})
	if err != nil {
		o.log.Error("sessions of a narrowed runner", "err", err)
		return
	}
	for _, s := range ss {
		if rn.UsableBy(s.CreatorID) {
			continue
		}
		if err := o.life.Sleep(ctx, s.ID, why); err != nil && !errors.Is(err, errdefs.ErrConflict) {
			o.log.Warn("session did not go to sleep", "session", s.ID, "err", err)
		}
	}
}

// Events records a batch of a Session's one stream, which its Runner
// merged from the transcript and the mod's hooks, with how far it has read
// the transcript, and moves the Turn state they tell of. A transcript
// batch that reads nothing past what is stored is one the Runner sent
// again, its reply lost with a connection: it was recorded, so it is
// taken and not recorded twice.
func (o *reports) Events(ctx context.Context, s store.Session, m protocol.SessionEvents) error {
	if m.Offsets != nil {
		stored, err := o.store.Sessions.TranscriptOffsets(ctx, s.ID)
		if err != nil {
			return err
		}
		if !advances(stored, m.Offsets) {
			o.log.Debug("a transcript batch the store has; taken again, not recorded", "session", s.ID, "events", len(m.Events))
			return nil
		}
	}
	if len(m.Spent) > 0 {
		return o.limits.countSpent(ctx, s.ID, m.Spent)
	}
	var ended bool
	for i := range m.Events {
		if m.Events[i].Kind == protocol.EventLimit {
			// Only the Hub holds a limit: what watches for the kind
			// (a notification) trusts it.
			m.Events[i].Kind = protocol.EventNote
		}
		m.Events[i].Dropped = 0    // only the Hub's note of its budget says so
		m.Events[i].Requested = "" // only the Hub's note of a Request says so
	}
	if len(m.Events) > 0 {
		kept, dropped, err := o.budgets.spend(ctx, s.ID, m.Events)
		if err != nil {
			return err
		}
		if ended, err = o.record(ctx, s.ID, kept, m.Events); err != nil {
			return err
		}
		if err := o.budgets.noteDropped(ctx, s.ID, dropped); err != nil {
			// What fit is stored: the batch is not sent again for
			// the count, which the next drop brings up to date.
			o.log.Error("note a session's dropped events", "session", s.ID, "err", err)
		}
	}
	if m.Offsets != nil {
		if err := o.store.Sessions.SetTranscriptOffsets(ctx, s.ID, m.Offsets); err != nil {
			return err
		}
		// Written down: a wake resumes this conversation.
		if !s.Conversation && m.Offsets[s.ID+".jsonl"] > 0 {
			if err := o.store.Sessions.SetConversation(ctx, s.ID); err != nil {
				return err
			}
		}
	}
	if m.Typed {
		// The transcript says Claude Code took the prompt being typed,
		// whose hook may never come (the relay refusing), so it is not
		// typed again.
		o.queue.ack(s.ID, fromTranscript, "")
	}
	switch {
	case m.Hook == protocol.HookPromptSubmit:
		o.queue.Accepted(s.ID)
	case m.Hook == protocol.HookStop || ended:
		o.queue.TurnEnded(s.ID)
	}
	return nil
}

// advances reports whether a batch read any transcript file further than
// stored has it. Every batch the follower reads does: it reports where it
// read to.
func advances(stored, batch map[string]int64) bool {
	for file, off := range batch {
		if off > stored[file] {
			return true
		}
	}
	return false
}

// interruptAgents ends, within a move, the subagents a Session's
// transcript says still run, as Interrupted: their Claude Code no longer
// runs. It reads them from the store, which a Hub that restarted since they
// started still has; their ends are recorded after the step.
func (o *life) interruptAgents(a *act) {
	id := a.id
	agents, err := runningAgents(o.ctx, o.store.Sessions, id)
	if err != nil {
		o.log.Error("read a session's running subagents", "session", id, "err", err)
	}
	a.r.agents = nil
	for agent, sa := range agents {
		ev := protocol.Event{Kind: protocol.EventSubagentEnd, Agent: agent, Parent: sa.parent, Reason: protocol.SubagentInterrupted}
		a.later(func(ctx context.Context) {
			if err := o.Record(ctx, id, ev); err != nil {
				o.log.Error("record an interrupted subagent", "session", id, "err", err)
			}
		})
	}
}

// Exited is a Runner's word that Claude Code exited on its own: the
// Session is Asleep, Keep awake left as it was, so a crashing Claude Code
// is not restarted over and over.
func (o *reports) Exited(ctx context.Context, id, detail string) error {
	return o.moves.do(ctx, id, func(s *store.Session, a *act) error {
		if s.State != Active && s.State != Frozen {
			return nil // the Hub stopped it, or it was never up
		}
		o.life.interruptAgents(a)
		return o.life.moveOn(s, a, Asleep, "Claude Code ended: "+detail, false)
	})
}
