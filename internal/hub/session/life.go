package session

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// life starts, wakes, sleeps, restarts, archives and restores Sessions,
// each move a step of the Session's loop (act.go), through moveOn, the one
// writer of a Session's state.
type life struct {
	deps
	queue  *queue  // a move puts a prompt back; a start lets the queue go
	limits *limits // a wake is held by them; a move frees an awake place
	// launches numbers the starts asked of Runners (run.launched).
	launches atomic.Uint64
}

// Timeouts of what the owner asks a Runner.
const (
	startTimeout   = 30 * time.Minute // a cold Build and a Claude Code download
	stopTimeout    = 2 * time.Minute  // stopping Claude Code and the Sandbox
	archiveTimeout = 10 * time.Minute // the disks move by a rename, or a copy across filesystems
	restoreTimeout = 30 * time.Second // the Runner only unmarks them
)

// Why a Runner was removed for good, as RunnerRemoved is told: the
// Failed detail of each of its Sessions is the cause and workspaceGone.
const (
	RunnerRevoked      = "its Runner was removed"
	RunnerOwnerRemoved = "its Runner's owner was removed from the Hub, and their Runners with them"
)

const workspaceGone = "; its Workspace was on that machine"

// removedWhy is why a Session whose Runner was removed for good can
// neither wake nor come back from the archive (errRemoved).
const removedWhy = RunnerRevoked + workspaceGone

var errRemoved = fmt.Errorf("%s: %w", removedWhy, errdefs.ErrConflict)

// runnerOf returns the Session's Runner, or errRemoved if it was removed
// for good.
func (o *life) runnerOf(ctx context.Context, s *store.Session) (store.Runner, error) {
	rn, err := o.store.Runners.RunnerByID(ctx, s.RunnerID)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return rn, errRemoved
	case err != nil:
		return rn, err
	case !rn.RevokedAt.IsZero():
		return rn, errRemoved
	}
	return rn, nil
}

// runnerKept returns errRemoved if the Session's Runner was removed for
// good.
func (o *life) runnerKept(ctx context.Context, s *store.Session) error {
	_, err := o.runnerOf(ctx, s)
	return err
}

// runnerUsable refuses a Session whose Runner its Creator may no longer
// use (store.Runner.UsableBy: neither theirs nor shared, as after the
// Owner unshared it): it may not start there, since its Runner would get
// the Creator's setup token and Sensitive Variables.
func (o *life) runnerUsable(ctx context.Context, s *store.Session) error {
	rn, err := o.runnerOf(ctx, s)
	if err == nil && !rn.UsableBy(s.CreatorID) {
		err = fmt.Errorf("its Runner %s is no longer shared, and it is not its Creator's: it can wake there once the Owner shares the Runner again (its Workspace is on that machine): %w", rn.Name, errdefs.ErrConflict)
	}
	return err
}

// Create records a new Session with its first prompt and starts it, or,
// past its Creator's awake Sessions, records it asleep in their line.
func (o *life) Create(ctx context.Context, s store.Session, first store.Prompt) (store.Session, error) {
	o.limits.admit.Lock()
	room, err := o.limits.admits(ctx, s.CreatorID, "")
	if err == nil {
		if !room {
			s.State = Asleep
		}
		s, err = o.store.Sessions.CreateSession(ctx, s)
	}
	o.limits.admit.Unlock()
	if err != nil {
		return s, err
	}
	first.SessionID = s.ID
	if _, err := o.store.Prompts.EnqueuePrompt(ctx, o.queue.sealPrompt(first)); err != nil {
		return s, err
	}
	if !room {
		o.limits.saidInLine(ctx, s)
		return s, nil
	}
	a := &act{m: o.moves, id: s.ID, after: &later{}}
	o.runs.with(s.ID, func(r *run) {
		a.r = r
		r.to(starting, "created")
		o.launch(a, false)
	})
	a.after.run(ctx)
	o.changed(s.ID) // a new row in the Sessions list
	return s, nil
}

// Update records a Session's title, model and effort, and tells its
// watchers. Claude Code reads the model and effort only as it starts: the
// caller restarts an Active Session to make them take.
func (o *life) Update(ctx context.Context, id, title, model, effort string) error {
	if err := o.store.Sessions.UpdateSession(ctx, id, title, model, effort); err != nil {
		return err
	}
	o.changed(id)
	return nil
}

// Recover marks the Sessions the store says are awake Frozen: after a Hub
// restart no Runner is connected yet, and each says on hello what still
// runs. A Session whose Runner was removed for good while the Hub could
// not fail it (it stopped between the two, or a migration revoked the
// Runner) is Failed. A prompt the store has on its way is settled
// (takeUpDelivery). Call it before serving: a standby takes over only
// once it returns. So the Sessions that need nothing (asleep, nearly all
// of a large Hub's) cost no step and no read each: the prompts on their
// way are one read, each Runner one; the rest take their steps
// recoverSteps at a time.
func (o *life) Recover(ctx context.Context) error {
	ss, err := o.store.Sessions.List(ctx, store.SessionFilter{States: []store.SessionState{Starting, Active, Frozen, Asleep, Failed}})
	if err != nil {
		return err
	}
	delivering, err := o.store.Prompts.DeliveringSessions(ctx)
	if err != nil {
		return err
	}
	kept := map[string]error{} // runnerKept's answer, by Runner
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(recoverSteps)
	for _, s := range ss {
		k, ok := kept[s.RunnerID]
		if !ok {
			k = o.runnerKept(o.ctx, &s)
			kept[s.RunnerID] = k
		}
		if to, _, err := takeBack(s.State, k); err == nil && to == "" && !delivering[s.ID] {
			continue
		}
		g.Go(func() error { return o.moves.do(gctx, s.ID, o.takeBackStep) })
	}
	return g.Wait()
}

// recoverSteps is how many Sessions Recover takes back at once: a step
// waits mostly on the store, so a few overlap its round trips, well
// within its connections (64 on PostgreSQL).
const recoverSteps = 8

// takeBackStep is Recover's step for one Session.
func (o *life) takeBackStep(s *store.Session, a *act) error {
	if err := o.takeUpDelivery(s, a.r); err != nil {
		return err
	}
	to, why, err := takeBack(s.State, o.runnerKept(o.ctx, s))
	if err != nil || to == "" {
		return err
	}
	return o.moveOn(s, a, to, why, false)
}

// takeBack is where Recover moves a Session in state st whose Runner
// runnerKept answered kept: to Failed, Frozen, or nowhere ("").
func takeBack(st store.SessionState, kept error) (to store.SessionState, why string, err error) {
	switch {
	case errors.Is(kept, errRemoved):
		if awake(st) || st == Asleep {
			return Failed, removedWhy, nil
		}
		return "", "", nil
	case kept != nil:
		return "", "", kept
	case st == Starting || st == Active:
		return Frozen, "the Hub restarted; its Runner has not said yet whether Claude Code still runs", nil
	}
	return "", "", nil
}

// takeUpDelivery settles, at a Hub's start, the prompt the store has on
// its way, which no one now types: the Runner's session.deliver ended with
// the connection to the Hub before. The queue sends a prompt only between
// Turns, so a Turn open in an awake Session's history says Claude Code
// took it: it is delivered, and the machine has it taken (a sleep before
// the transcript writes it down puts it back). Otherwise it goes back to
// the head of the queue, as for a Runner gone mid-delivery. It is within
// a step, of the Session's run r.
func (o *life) takeUpDelivery(s *store.Session, r *run) error {
	ctx := o.ctx
	p, ok, err := o.store.Prompts.DeliveringPrompt(ctx, s.ID)
	if err != nil || !ok {
		return err
	}
	open := false
	if awake(s.State) {
		if open, err = o.store.Sessions.TurnOpen(ctx, s.ID); err != nil {
			return err
		}
	}
	if !open {
		o.queue.requeue(s.ID, p.ID)
		return nil
	}
	if p, err = o.queue.openPrompt(p); err != nil {
		return err
	}
	if !r.delivery.resumeTaken(p) {
		return fmt.Errorf("prompt %s is on its way in the store, yet this Hub's delivery for the Session has moved on already: %w", p.ID, errdefs.ErrConflict)
	}
	return setPrompt(ctx, o.store.Prompts, p.ID, store.Delivering, store.Delivered)
}

// launch asks the Session's Runner, on a goroutine, to start its Claude
// Code (resuming the conversation if asked), once the step's history lines
// are recorded; the step that takes its answer moves it Active, or Failed
// with the reason. The Session is Starting, within a move.
func (o *life) launch(a *act, resume bool) {
	id, n := a.id, o.launches.Add(1)
	a.r.launched = n
	a.later(func(context.Context) { o.spawn(func(ctx context.Context) { o.started(ctx, id, n, resume) }) })
}

// started is launch's goroutine: the start, then the step that takes its
// answer.
func (o *life) started(ctx context.Context, id string, n uint64, resume bool) {
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	startErr := o.startOnRunner(sctx, id, resume)
	if ctx.Err() != nil {
		return // the Hub is closing: Recover takes it up at the next start
	}
	err := o.moves.do(ctx, id, func(s *store.Session, a *act) error {
		switch {
		case s.State == Starting && a.r.launched == n:
		case !awake(s.State) && startErr == nil:
			// Slept or failed meanwhile: the Claude Code just
			// started must not run on.
			stopped := *s
			o.spawn(func(ctx context.Context) {
				if err := o.stopOnRunner(ctx, &stopped); err != nil {
					o.log.Warn("stop a session that started after it stopped being awake", "session", id, "err", err)
				}
			})
			return nil
		default:
			return nil // a later start of it is on its way, or it is up
		}
		if startErr != nil {
			transient := errors.Is(startErr, errdefs.ErrUnavailable)
			if err := o.moveOn(s, a, Failed, "the start failed: "+startErr.Error(), transient); err != nil {
				return err
			}
			if transient {
				a.later(func(ctx context.Context) { o.retryLater(ctx, id) })
			}
			return nil
		}
		return o.moveOn(s, a, Active, "Claude Code is up", false)
	})
	if err != nil && !errors.Is(err, errClosing) {
		o.log.Error("record a start", "session", id, "err", err)
	}
	o.queue.dispatch(id) // after the history says it is up

}

// startOnRunner is the start itself: the Installations this run takes, a
// fresh mod token, then the Runner's session.start.
func (o *life) startOnRunner(ctx context.Context, id string, resume bool) error {
	s, err := o.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		return err
	}
	rc := o.opts.Runners.Runner(s.RunnerID)
	if rc == nil {
		return fmt.Errorf("its Runner is not connected: %w", errdefs.ErrUnavailable)
	}
	if err := o.opts.Runners.Models(s.RunnerID).Takes(s.Model, s.Effort); err != nil {
		// Fail, not fall back to the default: a team picks a model for its
		// cost and its strength, and a Session should not change either
		// on its own.
		err = fmt.Errorf("its Runner no longer takes its model and effort (%w); choose a model it offers with kndl update --model or in the Session's settings, then wake it", err)
		o.note(ctx, id, protocol.EventLog, "The start failed: "+err.Error())
		return err
	}
	var servers []protocol.MCPServer
	if o.opts.MCPServers != nil {
		if servers, err = o.opts.MCPServers(ctx, s); err != nil {
			return err
		}
	}
	modToken, err := o.store.Sessions.IssueModToken(ctx, id)
	if err != nil {
		return err
	}
	offsets, err := o.store.Sessions.TranscriptOffsets(ctx, id)
	if err != nil {
		return err
	}
	var env *protocol.Environment
	if o.opts.Environments != nil {
		if env, err = o.opts.Environments.ForStart(ctx, id, s.RepoID); err != nil {
			return err
		}
	}
	return rc.Request(ctx, protocol.TypeSessionStart, protocol.SessionStart{SessionID: id, RepoURL: s.RepoURL,
		Model: s.Model, Effort: s.Effort, Resume: resume, ModToken: modToken, Offsets: offsets, Environment: env, MCPServers: servers}, nil)
}

// stopOnRunner asks the Session's Runner to stop its Claude Code and
// Sandbox, if the Runner is connected.
func (o *life) stopOnRunner(ctx context.Context, s *store.Session) error {
	rc := o.opts.Runners.Runner(s.RunnerID)
	if rc == nil {
		return nil // it stops the Session when it is back: the Hub does not take it back
	}
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	if err := rc.Request(ctx, protocol.TypeSessionStop, protocol.SessionRef{SessionID: s.ID}, nil); err != nil {
		return fmt.Errorf("the Runner did not stop the Session: %w", err)
	}
	return nil
}

// retryLater retries a start that failed for a cause a retry may mend,
// with backoff, each try in the start log. The count is the store's, so a
// Hub restarted meanwhile goes on with it.
func (o *life) retryLater(ctx context.Context, id string) {
	n, err := o.store.Sessions.RetryStart(ctx, id)
	if err != nil {
		o.log.Error("count a retry of a start", "session", id, "err", err)
		return
	}
	if n > o.opts.RetryTries {
		o.note(o.ctx, id, protocol.EventLog, fmt.Sprintf("Gave up retrying the start after %d tries: a prompt or kndl wake tries again.", o.opts.RetryTries))
		return
	}
	d := min(o.opts.RetryMin<<(n-1), o.opts.RetryMax)
	o.note(o.ctx, id, protocol.EventLog, fmt.Sprintf("Retrying the start in %s (try %d of %d).", d.Round(time.Millisecond), n, o.opts.RetryTries))
	o.after(d, func(ctx context.Context) {
		err := o.wake(ctx, id, fmt.Sprintf("retry %d of the start", n), func(s *store.Session) bool { return s.State == Failed && s.Transient })
		if err != nil && !errors.Is(err, errdefs.ErrConflict) {
			o.log.Warn("start retry", "session", id, "err", err)
		}
	})
}

// Wake starts an Asleep or Failed Session's Claude Code again, resuming
// its conversation if Claude Code wrote it down.
func (o *life) Wake(ctx context.Context, id, why string) error {
	return o.wake(ctx, id, why, nil)
}

// wake moves a Session Starting and launches it; if only is set, it wakes
// only a Session only accepts.
func (o *life) wake(ctx context.Context, id, why string, only func(*store.Session) bool) error {
	return o.moves.do(ctx, id, func(s *store.Session, a *act) error {
		if only != nil && !only(s) {
			return fmt.Errorf("the Session is %s: %w", s.State, errdefs.ErrConflict)
		}
		return o.wakeOn(s, a, why)
	})
}

// wakeOn is a wake within a step.
func (o *life) wakeOn(s *store.Session, a *act, why string) error {
	ctx := o.ctx
	if s.State != Asleep && s.State != Failed {
		return fmt.Errorf("the Session is %s, not asleep or failed: %w", s.State, errdefs.ErrConflict)
	}
	if err := o.runnerUsable(ctx, s); err != nil {
		return err
	}
	switch why, err := o.limits.limitReached(ctx, *s); {
	case err != nil:
		return err
	case why != "":
		if s.Place > 0 { // it would hold up its Creator's others in line
			if err := o.store.Limits.LeaveLine(ctx, s.ID); err != nil {
				return err
			}
			o.changed(s.ID)
		}
		return limitedWake(why)
	}
	if o.opts.Runners.Runner(s.RunnerID) == nil {
		return fmt.Errorf("the Session's Runner is not connected; it wakes when the Runner is back and a prompt waits: %w", errdefs.ErrUnavailable)
	}
	o.limits.admit.Lock()
	defer o.limits.admit.Unlock()
	switch room, err := o.limits.admits(ctx, s.CreatorID, s.ID); {
	case err != nil:
		return err
	case !room:
		return o.limits.waitInLine(s, a)
	}
	from := s.State
	if err := o.moveOn(s, a, Starting, why, false); err != nil {
		return err
	}
	if from == Asleep && !s.Conversation {
		a.note(protocol.EventNote, "Claude Code never wrote this conversation down, so it starts afresh with the same id; the history above is not in its memory.")
	}
	o.launch(a, s.Conversation)
	return nil
}

// Sleep stops an awake Session's Claude Code and Sandbox, keeping its disks
// and Workspace, even mid-Turn; it is Asleep once its Runner says it has
// stopped. A prompt queued meanwhile wakes it again once it is (act.go).
func (o *life) Sleep(ctx context.Context, id, why string) error {
	return o.moves.do(ctx, id, func(s *store.Session, a *act) error { return o.sleepOn(s, a, why, nil) })
}

// sleepOn is a sleep within a step: the Runner stops the Session (the run
// stopping meanwhile), then it moves Asleep and then, if set, runs in the
// same step: nothing else moves the Session between.
func (o *life) sleepOn(s *store.Session, a *act, why string, then lifeMove) error {
	if !awake(s.State) {
		return fmt.Errorf("the Session is %s, not awake: %w", s.State, errdefs.ErrConflict)
	}
	if a.r.busy() {
		why += ", mid-Turn: the Turn was cut"
	}
	slept := func(s *store.Session, a *act) error {
		o.interruptAgents(a)
		if err := o.moveOn(s, a, Asleep, why, false); err != nil {
			return err
		}
		if then != nil {
			return then(s, a)
		}
		return nil
	}
	if s.State == Starting { // no Claude Code to stop yet: launch's answer stops what it started
		return slept(s, a)
	}
	stopped := *s
	return o.moves.ask(a, stopping, why, func(ctx context.Context) error { return o.stopOnRunner(ctx, &stopped) },
		func(s *store.Session, a *act, err error) error {
			if err != nil {
				a.r.to(a.r.before, "the stop failed")
				return err
			}
			return slept(s, a)
		})
}

// Restart stops an Active Session's Claude Code and starts it again into
// the same conversation, with what the Session says now (its model and
// effort, a fresh mod).
func (o *life) Restart(ctx context.Context, id, why string) error {
	return o.moves.do(ctx, id, func(s *store.Session, a *act) error {
		if s.State != Active {
			return fmt.Errorf("the Session is %s, not active: %w", s.State, errdefs.ErrConflict)
		}
		return o.sleepOn(s, a, why, func(s *store.Session, a *act) error { return o.wakeOn(s, a, why) })
	})
}

// Archive removes a Session's Sandbox on its Runner, which keeps its disks
// (Claude Code's state, the package cache) and Workspace for
// RUNNER_ARCHIVE_KEEP, then purges them. An awake Session is put to sleep
// first, in the same move, so nothing wakes it between. Its Runner must be
// connected; a Session whose Runner was removed for good has nothing left
// to keep there, and is Archived at once.
func (o *life) Archive(ctx context.Context, id, why string) error {
	return o.moves.do(ctx, id, func(s *store.Session, a *act) error {
		if s.State == Archived {
			return fmt.Errorf("the Session is already archived: %w", errdefs.ErrConflict)
		}
		switch err := o.runnerKept(o.ctx, s); {
		case errors.Is(err, errRemoved):
			return o.moveOn(s, a, Archived, why+"; "+removedWhy+", so nothing of it is kept", false)
		case err != nil:
			return err
		}
		if o.opts.Runners.Runner(s.RunnerID) == nil {
			return fmt.Errorf("the Session's Runner is not connected, and it keeps an archived Session's disks and Workspace: archive it once the Runner is back: %w", errdefs.ErrUnavailable)
		}
		archive := func(s *store.Session, a *act) error { return o.archiveOn(s, a, why) }
		if awake(s.State) {
			// A prompt queued meanwhile stays queued: a restore and a
			// prompt wake it.
			return o.sleepOn(s, a, why, archive)
		}
		return archive(s, a)
	})
}

// archiveOn asks the Runner to archive a Session no Claude Code runs for,
// the run archiving meanwhile.
func (o *life) archiveOn(s *store.Session, a *act, why string) error {
	if err := checkMove(s.State, Archived); err != nil {
		return err
	}
	id, runnerID := s.ID, s.RunnerID
	return o.moves.ask(a, archiving, why, func(ctx context.Context) error {
		return o.request(ctx, id, runnerID, archiveTimeout, protocol.TypeSessionArchive, "archive it")
	}, func(s *store.Session, a *act, err error) error {
		if err != nil {
			a.r.to(a.r.before, "the archive failed")
			return fmt.Errorf("the Runner did not archive the Session, which is %s: %w", s.State, err)
		}
		return o.moveOn(s, a, Archived, why, false)
	})
}

// Restore makes an Archived Session Asleep again, with its conversation,
// disks and Workspace as they were: a prompt wakes it into the same
// conversation. Once its Runner has purged it, the restore is refused with
// the Runner's words and the Session stays Archived.
func (o *life) Restore(ctx context.Context, id, why string) error {
	return o.moves.do(ctx, id, func(s *store.Session, a *act) error {
		if s.State != Archived {
			return fmt.Errorf("the Session is %s, not archived: %w", s.State, errdefs.ErrConflict)
		}
		if err := o.runnerKept(o.ctx, s); err != nil {
			return err
		}
		if o.opts.Runners.Runner(s.RunnerID) == nil {
			return fmt.Errorf("the Session's Runner is not connected, and its Workspace is there: restore it once the Runner is back: %w", errdefs.ErrUnavailable)
		}
		id, runnerID := s.ID, s.RunnerID
		return o.moves.ask(a, restoring, why, func(ctx context.Context) error {
			return o.request(ctx, id, runnerID, restoreTimeout, protocol.TypeSessionRestore, "restore it")
		}, func(s *store.Session, a *act, err error) error {
			if err != nil {
				a.r.to(a.r.before, "the restore failed")
				return fmt.Errorf("the Session stays archived: %w", err)
			}
			return o.moveOn(s, a, Asleep, why, false)
		})
	})
}

// request asks Session id's Runner, within d, what typ asks for it (what,
// for the error when its Runner went meanwhile).
func (o *life) request(ctx context.Context, id, runnerID string, d time.Duration, typ, what string) error {
	rc := o.opts.Runners.Runner(runnerID)
	if rc == nil {
		return fmt.Errorf("its Runner went before it could %s: %w", what, errdefs.ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return rc.Request(ctx, typ, protocol.SessionRef{SessionID: id}, nil)
}

// SleepAllOf puts a person's awake Sessions to sleep, saying why: when
// they are removed as a Member, or their setup token is removed or
// replaced. A failure is logged and the others still sleep.
func (o *life) SleepAllOf(ctx context.Context, creatorID, why string) {
	ss, err := o.store.Sessions.List(ctx, store.SessionFilter{States: []store.SessionState{Starting, Active, Frozen}})
	if err != nil {
		o.log.Error("list sessions to sleep", "err", err)
		return
	}
	for _, s := range ss {
		if s.CreatorID != creatorID {
			continue
		}
		if err := o.Sleep(ctx, s.ID, why); err != nil && !errors.Is(err, errdefs.ErrConflict) {
			o.log.Warn("session did not go to sleep", "session", s.ID, "err", err)
		}
	}
}

// SetKeepAwake sets the Creator's Keep awake switch.
func (o *life) SetKeepAwake(ctx context.Context, id string, on bool) error {
	if err := o.store.Sessions.SetKeepAwake(ctx, id, on); err != nil {
		return err
	}
	o.changed(id)
	return nil
}

// StopTurn interrupts the Turn that runs.
func (o *Owner) StopTurn(ctx context.Context, id string) error {
	rc, err := o.runnerOfActive(ctx, id, ": no Turn runs")
	if err != nil {
		return err
	}
	return rc.Request(ctx, protocol.TypeSessionStopTurn, protocol.SessionRef{SessionID: id}, nil)
}

// runnerOfActive returns the Runner of an Active Session; otherwise an
// error saying it is not active (why: what that means) or its
// Runner is not connected.
func (o *Owner) runnerOfActive(ctx context.Context, id, why string) (Requester, error) {
	s, err := o.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.State != Active {
		return nil, fmt.Errorf("the Session is %s, not active%s: %w", s.State, why, errdefs.ErrConflict)
	}
	rc := o.opts.Runners.Runner(s.RunnerID)
	if rc == nil {
		return nil, fmt.Errorf("the Session's Runner is not connected: %w", errdefs.ErrUnavailable)
	}
	return rc, nil
}
