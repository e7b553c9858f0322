package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// The limits that fail closed, held here where a Session's state changes
// so no path goes around them:
//
//   - A Session a GitHub trigger started runs unattended, so its Repo's
//     limits hold it: at most MaxTurns Turns and MaxTurnHours awake from
//     its first prompt (counted below). The Turn past the limit never
//     starts: the queue sends no prompt and a wake starts no Claude Code;
//     the hours are cut where they run out, mid-Turn or not, since one Turn
//     has no other bound. It then sleeps, saying so in an
//     EventLimit, and Options.Limited tells its thread.
//   - A Member has at most MemberMaxAwake awake Sessions. A start or wake
//     past it waits in the Member's line, kept in the store, with its place;
//     when one of their Sessions sleeps or ends, the first in line wakes.

// limits holds a Session's Turns, Hours and spend to its caps, and its
// Creator's awake Sessions to theirs, with their line.
type limits struct {
	deps
	life *life // a Session at a limit sleeps; the first in line wakes
	// admit is held from counting a Member's awake Sessions to moving one
	// Starting, so two wakes of two Sessions cannot both take their last
	// awake place. It is held over store calls only, never over a wait on
	// a loop or the Runner.
	admit sync.Mutex
}

// errLimited marks a wake a Turn limit refused.
var errLimited = errors.New("limited")

// limitWayOn is what a person can do once a Turn limit holds a Session.
const limitWayOn = "To go on, someone who may push to the Repo raises its limits (kndl repo edit --repo URL --max-turns N --max-turn-hours H --max-spend USD --max-session-spend USD, or the Repo page; 0 is no limit; HUB_MEMBER_MAX_SPEND is the Hub operator's, and a day's spend starts again at midnight UTC), then wakes the Session or sends it a prompt."

// limitReached says which of its Repo's limits a triggered Session has
// reached, "" for none (or for a Session started by a person). A limit that
// cannot be read holds it: the error.
func (o *limits) limitReached(ctx context.Context, s store.Session) (string, error) {
	if why, err := spendReached(ctx, o.store, o.opts.MemberMaxSpend, s); why != "" || err != nil {
		return why, err
	}
	if !s.Triggered {
		return "", nil
	}
	l, err := o.store.Repos.RepoLimits(ctx, s.RepoID)
	if err != nil {
		return "", fmt.Errorf("read the Repo's limits for a Session started from GitHub: %w", err)
	}
	switch {
	case l.MaxTurns > 0 && s.Turns >= l.MaxTurns:
		return fmt.Sprintf("it ran its Repo's limit of %d Turns for a Session started from GitHub", l.MaxTurns), nil
	case l.MaxTurnHours > 0 && s.TurnTime >= l.TurnTime():
		return hoursReached(l), nil
	}
	return "", nil
}

// limitedWake is wake's answer for a Session at its Turn limit.
func limitedWake(why string) error {
	return fmt.Errorf("the Session stays asleep: %s. %s: %w", why, limitWayOn, errors.Join(errLimited, errdefs.ErrConflict))
}

// heldAtLimit reports whether the queue must send the Session no prompt
// now: it is at its Turn limit, or its limit could not be read. With a
// prompt waiting, the Session goes to sleep saying why.
func (o *queue) heldAtLimit(id string) bool {
	s, err := o.store.Sessions.SessionByID(o.ctx, id)
	why := ""
	if err == nil {
		why, err = o.limits.limitReached(o.ctx, s)
	}
	if err != nil {
		if o.ctx.Err() == nil {
			o.log.Error("check a session's limits before a turn", "session", id, "err", err)
		}
		return true
	}
	if why == "" {
		return false
	}
	if q, err := o.store.Prompts.List(o.ctx, id); err == nil && len(q) > 0 {
		o.spawn(func(ctx context.Context) { o.limits.stopAtLimit(ctx, id, why) })
	}
	return true
}

// stopAtLimit puts a Session at a Turn limit to sleep, and once it is, says
// why in its history and its thread. A second stop finds it asleep, and
// says nothing more.
func (o *limits) stopAtLimit(ctx context.Context, id, why string) {
	err := o.life.Sleep(ctx, id, why)
	if err != nil && !errors.Is(err, errLimited) {
		if !errors.Is(err, errdefs.ErrConflict) {
			o.log.Warn("a session at its limit did not go to sleep", "session", id, "err", err)
		}
		return
	}
	text := "Limit reached: " + why + ", so it sleeps and starts no more Turns. " + limitWayOn
	o.note(ctx, id, protocol.EventLimit, text)
	if o.opts.Limited != nil {
		o.opts.Limited(id, text)
	}
}

// Turns and Hours are counted from what the Hub does, never from what
// the Sandbox says: its hooks, its transcript and its terminal are all its
// own to forge (a Stop hook posted with its Session token, a turn_end
// written into its transcript). A Turn is a prompt the Hub sent to Claude
// Code, counted once however often it is typed again; Hours are the
// Session's time awake from its first prompt sent, from each wake until it
// stops being awake, whatever a hook says of its Turns. A Turn's end, told
// by anyone, moves only what a Session shows (its Turn no longer running)
// and lets the next prompt go, which is the next Turn counted.

// promptSent counts a prompt the Hub is about to send as a Turn, unless it
// was counted when typed before (put back and sent again), and starts the
// Session's awake clock. It is within a step.
func (o *limits) promptSent(id string, r *run, p store.Prompt) {
	if p.IsCommand {
		return
	}
	again := r.counted == p.ID
	r.counted, r.owed, r.since = p.ID, true, time.Now()
	if again {
		return
	}
	if _, err := o.store.Limits.CountTurn(o.ctx, id); err != nil {
		o.log.Error("count a turn", "session", id, "err", err)
	}
	o.startAwakeOn(id, r)
}

// startAwakeOn starts counting an awake Session's time toward its Hours,
// once a prompt has been sent to it (at the first, or at each wake after
// it), and for a triggered Session arms the cut where the Repo's limit runs
// out: mid-Turn or not, since nothing the Sandbox says stops the clock. It
// is within a step, of the Session's run r.
func (o *limits) startAwakeOn(id string, r *run) {
	if !r.awakeAt.IsZero() {
		return
	}
	at := time.Now()
	r.awakeAt = at
	s, err := o.store.Sessions.SessionByID(o.ctx, id)
	if err != nil || !s.Triggered {
		return
	}
	l, err := o.store.Repos.RepoLimits(o.ctx, s.RepoID)
	if err != nil || l.MaxTurnHours <= 0 {
		return
	}
	r.cut = o.after(max(l.TurnTime()-s.TurnTime, 0), func(ctx context.Context) {
		var same bool
		o.runs.on(id, func(r *run) { same = r.awakeAt.Equal(at) })
		if same {
			o.stopAtLimit(ctx, id, hoursReached(l))
		}
	})
}

// hoursReached says that a triggered Session ran its Repo's Hours.
func hoursReached(l store.RepoLimits) string {
	return fmt.Sprintf("it was awake its Repo's limit of %s hours for a Session started from GitHub, counted from its first prompt",
		strconv.FormatFloat(l.MaxTurnHours, 'f', -1, 64))
}

// awakeDone stops a run's awake clock: its time since it started, and the
// cut no longer armed; then addTurnTime with its answer.
func (r *run) awakeDone() (time.Duration, *time.Timer) {
	var d time.Duration
	if !r.awakeAt.IsZero() {
		d = time.Since(r.awakeAt)
	}
	t := r.cut
	r.awakeAt, r.cut = time.Time{}, nil
	return d, t
}

// addTurnTime records a span of time awake toward the Session's Hours
// (the store's turn time) and stops its cut.
func (o *limits) addTurnTime(ctx context.Context, id string, d time.Duration, cut *time.Timer) {
	o.stopTimer(cut)
	if d <= 0 {
		return
	}
	if err := o.store.Limits.AddTurnTime(context.WithoutCancel(ctx), id, d); err != nil {
		o.log.Error("record a session's time awake", "session", id, "err", err)
	}
}

// admits reports whether a Session of creator's may take an awake place:
// fewer than MemberMaxAwake of theirs are awake, counting those ahead of it
// in their line whose Runner is connected (a Session whose Runner is away
// keeps its place without holding up the others). Call with o.admit held.
func (o *limits) admits(ctx context.Context, creatorID, id string) (bool, error) {
	if o.opts.MemberMaxAwake <= 0 {
		return true, nil
	}
	n, err := o.store.Limits.AwakeOf(ctx, creatorID)
	if err != nil {
		return false, err
	}
	line, err := o.store.Limits.Line(ctx, creatorID)
	if err != nil {
		return false, err
	}
	for _, w := range line {
		if w.SessionID == id {
			break
		}
		if o.opts.Runners.Runner(w.RunnerID) != nil {
			n++
		}
	}
	return n < o.opts.MemberMaxAwake, nil
}

// waitInLine puts an asleep or failed Session in its Creator's line, and
// the first time, says so with its place. Call within a move, with o.admit
// held: a Session of the Creator's that stops being awake after finds it
// in line.
func (o *limits) waitInLine(s *store.Session, a *act) error {
	ctx := o.ctx
	was := s.Place
	if err := o.store.Limits.SetWaiting(ctx, s.ID); err != nil {
		return err
	}
	cur, err := o.store.Sessions.SessionByID(ctx, s.ID)
	if err != nil {
		return err
	}
	*s = cur
	if was == 0 {
		said := *s
		a.later(func(ctx context.Context) { o.saidInLine(ctx, said) })
	}
	return nil
}

// saidInLine tells the history, and the Session's watchers, its place in
// line.
func (o *limits) saidInLine(ctx context.Context, s store.Session) {
	o.note(ctx, s.ID, protocol.EventLimit, fmt.Sprintf(
		"Waiting in line, place %d: %d of its Creator's Sessions are awake, the Hub's limit (HUB_MEMBER_MAX_AWAKE). The first in line wakes when one of them sleeps or ends; putting one to sleep (kndl sleep) makes room.",
		s.Place, o.opts.MemberMaxAwake))
	o.changed(s.ID)
}

// wakeFromLine wakes the first of creator's Sessions in line, and the next
// while there is room. One whose Runner is away keeps its place: it wakes
// when its Runner is back.
func (o *limits) wakeFromLine(ctx context.Context, creatorID string) {
	line, err := o.store.Limits.Line(ctx, creatorID)
	if err != nil {
		o.log.Error("read a member's line", "member", creatorID, "err", err)
		return
	}
	for _, w := range line {
		defer o.changed(w.SessionID) // places moved up
	}
	for _, w := range line {
		if o.opts.Runners.Runner(w.RunnerID) == nil {
			continue
		}
		err := o.life.wake(ctx, w.SessionID, "its place in line came: one of its Creator's awake Sessions slept or ended",
			func(s *store.Session) bool { return s.Place > 0 })
		if err != nil {
			if !errors.Is(err, errdefs.ErrConflict) {
				o.log.Warn("wake a session from its line", "session", w.SessionID, "err", err)
			}
			continue
		}
		if s, err := o.store.Sessions.SessionByID(ctx, w.SessionID); err != nil || s.Place > 0 {
			return // no more room
		}
	}
}
