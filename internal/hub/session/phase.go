package session

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The run machine: what a Session's Claude Code is doing, as the Hub
// hears it, and which of the Runner's answers a move of its life waits for
// (stopping, archiving, restoring). It is one field of the run (phase),
// moved only by to, which checks the table below, and by enter, for a move
// of the Session's life, which the run follows whatever it was. Where the prompt on its way
// is, is the delivery machine's (delivery.go); the two together are what
// the queue reads.

// phase is what a Session's Claude Code is doing, or what its Runner is
// asked to do for it.
type phase int

const (
	// down: no Claude Code runs (Asleep, Failed, Archived), nor is asked
	// for: the loop ends once nothing waits for it.
	down phase = iota
	// starting: its Runner starts Claude Code; no prompt goes.
	starting
	// idle: Claude Code is up between Turns: the next prompt may go.
	idle
	// turn: a Turn runs.
	turn
	// asking: a Turn waits on a person's answer to Claude's question.
	asking
	// away: its Runner is not connected (Frozen); Claude Code may still
	// run, and nothing is sent until the Runner is back.
	away
	// stopping: the Runner stops Claude Code for a sleep.
	stopping
	// archiving: the Runner removes the Sandbox of an archive.
	archiving
	// restoring: the Runner takes an archived Session back.
	restoring
)

var phaseNames = [...]string{down: "down", starting: "starting", idle: "idle", turn: "turn", asking: "asking", away: "away",
	stopping: "stopping", archiving: "archiving", restoring: "restoring"}

func (p phase) String() string { return phaseNames[p] }

// phaseNext lists, for each phase, the phases that may follow it.
var phaseNext = map[phase][]phase{
	// A start or a wake; a Hub that restarted takes up a Session the
	// store has awake (Frozen); an archive; a restore.
	down: {starting, away, archiving, restoring},
	// Claude Code is up (Active); its Runner went (Frozen, as a Hub that
	// restarted marks it); the start failed, or a sleep before it was up.
	starting: {idle, away, down},
	// A Turn begins (the hook, the Runner's reply, the transcript); the
	// Runner goes; a sleep; Claude Code exited, or its Runner was removed.
	idle: {turn, away, stopping, down},
	// Claude asks; the Turn ends; the Runner goes; a sleep; it ends.
	turn: {asking, idle, away, stopping, down},
	// Answered (or the tool's result, or a Turn that begins again); the
	// Turn ends; the Runner goes; a sleep; it ends.
	asking: {turn, idle, away, stopping, down},
	// Its Runner is back (Active; a Turn open in the history runs on);
	// a sleep; it ends.
	away: {idle, stopping, down},
	// Stopped (Asleep); or a stop the Runner refused: back to where it
	// was.
	stopping: {down, idle, turn, asking, away},
	// Archived, or refused.
	archiving: {down},
	// Asleep again, or refused.
	restoring: {down},
}

// trailLen is how many of its last moves a run keeps, for a fault's log.
const trailLen = 12

// trail is a run's last moves of both machines, newest last.
type trail []string

// add records one move, keeping the last trailLen.
func (t *trail) add(format string, args ...any) {
	*t = append(*t, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	if len(*t) > trailLen {
		*t = slices.Delete(*t, 0, len(*t)-trailLen)
	}
}

func (t trail) String() string { return strings.Join(t, "; ") }

// to moves the run to next, as why says, if the table allows it, and
// reports whether it did; an illegal move changes nothing. What the
// Sandbox tells (its hooks, its transcript) can ask any move, so a refused
// one is not a fault.
func (r *run) to(next phase, why string) bool {
	if r.phase == next {
		return true
	}
	if !slices.Contains(phaseNext[r.phase], next) {
		return false
	}
	r.trail.add("%s -> %s (%s)", r.phase, next, why)
	r.phase = next
	return true
}

// enter moves the run to next as the Session's life moves, and returns a
// fault if the table does not list the move: a move of the Session's life
// is the truth the run follows, so it is made anyway, and named.
func (r *run) enter(next phase, why string) error {
	if r.to(next, why) {
		return nil
	}
	err := fmt.Errorf("the run went %s -> %s (%s), which its table does not list", r.phase, next, why)
	r.trail.add("%s -> %s (%s), forced", r.phase, next, why)
	r.phase = next
	return err
}

// up reports whether Claude Code is up and its Runner connected, with no
// sleep under way.
func (r *run) up() bool { return r.phase == idle || r.phase == turn || r.phase == asking }

// waiting reports whether a move of the Session's life waits on the
// Runner's answer: other moves wait their turn (act.go).
func (r *run) waiting() bool {
	return r.phase == stopping || r.phase == archiving || r.phase == restoring
}

// busy reports whether a Turn runs (or waits on a question).
func (r *run) busy() bool { return r.phase == turn || r.phase == asking }
