package session

import (
	"context"
	"fmt"
	"time"
)

// The alarm: a queue should never wait with nothing to wait for, and no
// path of the queue's leaves it so. The idle sweep looks for an awake
// Session whose queue has not moved: between Turns with nothing on its
// way for a DeliveryDeadline, or in a Turn the Hub has heard nothing of
// for turnQuiet DeliveryDeadlines (a long tool call is silent too, but
// the Hub cannot tell a Turn that ended unheard from one). It repairs
// nothing: it names the fault (fault), with the run's machines and their
// last moves, so the bug behind it is found rather than hidden. The
// recoveries the design calls for are elsewhere: a Runner gone (Frozen,
// RunnerBack) and a Hub restarted (Recover).

// turnQuiet is, in DeliveryDeadlines, how long a Turn is heard nothing of
// before the alarm names it.
const turnQuiet = 5

// The kinds of fault the Owner names, as /metrics counts them.
const (
	faultQueue = "queue waits on nothing"
	faultTurn  = "turn unheard"
	faultMove  = "move off the table"
)

// stall is what the sweep saw of a Session whose queue may be stuck.
type stall struct {
	id      string
	busy    bool
	busyBy  string
	began   time.Duration // since the Turn began, as the Hub heard
	heard   time.Duration // since the Session's last Event
	waiting time.Duration // since its queue last moved
}

// stalled reports a run whose queue may be stuck, at most once each
// DeliveryDeadline after and once a Turn.
func (r *run) stalled(id string, after time.Duration) (stall, bool) {
	// A prompt put back waits its backoff on a timer of its own.
	if !r.settled() || r.raised || r.delivery.givenUp > 0 || time.Since(r.since) < after || time.Since(r.looked) < after {
		return stall{}, false
	}
	busy := r.phase == turn
	if busy && time.Since(r.heard) < turnQuiet*after { // a Turn heard of lately
		return stall{}, false
	}
	r.looked = time.Now()
	return stall{id: id, busy: busy, busyBy: r.busyBy, began: since(r.turnAt), heard: since(r.heard), waiting: since(r.since)}, true
}

// alarm names a stall the sweep saw, if a prompt waits and the run is
// still as the sweep saw it once the queue is read.
func (o *sweep) alarm(ctx context.Context, st stall) {
	q, err := o.store.Prompts.List(ctx, st.id)
	if err != nil || len(q) == 0 {
		return
	}
	var still bool
	o.runs.on(st.id, func(r *run) {
		if still = r.settled() && !r.raised && (r.phase == turn) == st.busy; still {
			r.raised = true
		}
	})
	switch {
	case !still: // it moved while the queue was read
	case st.busy:
		o.runs.fault(st.id, faultTurn, fmt.Sprintf("%d prompt(s) wait for a Turn the Hub has heard nothing of: it began %s ago, as %s told; the last Event %s ago",
			len(q), st.began.Round(time.Millisecond), st.busyBy, st.heard.Round(time.Millisecond)))
	default:
		o.runs.fault(st.id, faultQueue, fmt.Sprintf("%d prompt(s) wait with nothing on their way and no Turn running, for %s", len(q), st.waiting.Round(time.Millisecond)))
	}
}

// since is how long ago t was, 0 for never.
func since(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Since(t)
}
