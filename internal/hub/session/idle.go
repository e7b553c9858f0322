package session

import (
	"context"
	"fmt"
	"time"
)

// sweepIdle puts to sleep each Active Session with no Turn of a prompt
// the Hub sent running, nothing on its way or queued, and Keep awake off,
// once the idle clock (run.since) has run Idle; and looks for a queue that waits with nothing to wait for.
func (o *Owner) sweepIdle(ctx context.Context) {
	every := min(max(min(o.opts.Idle, o.opts.DeliveryDeadline)/10, 50*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var idle []string
		var waits []stall
		o.mu.Lock()
		for id, r := range o.runs {
			if r.idle() && time.Since(r.since) >= o.opts.Idle {
				idle = append(idle, id)
			}
			if st, ok := o.stalled(id, r); ok {
				waits = append(waits, st)
			}
		}
		o.mu.Unlock()
		for _, id := range idle {
			o.sleepIfIdle(ctx, id)
		}
		for _, st := range waits {
			o.sayStall(ctx, st)
		}
	}
}

// A queue should never wait with nothing to wait for. The sweep looks for
// an awake Session whose queue has not moved: between Turns with nothing
// on its way for DeliveryDeadline (no path of the queue's should leave it
// so: it is said, and the next prompt sent), or in a Turn the Hub has heard
// nothing of for turnQuiet (said once a Turn, with who told it began: a
// long tool call is silent too, but the Hub cannot tell a Turn that ended
// unheard from one).

// turnQuiet is, in DeliveryDeadlines, how long a Turn is heard nothing of
// before the sweep says a queue waits on it.
const turnQuiet = 5

// stall is what the sweep saw of a Session whose queue may be stuck.
type stall struct {
	id      string
	busy    bool
	busyBy  string
	began   time.Duration // since the Turn began, as the Hub heard
	heard   time.Duration // since the Session's last Event
	waiting time.Duration // since its queue last moved
}

// stalled reports a run whose queue may be stuck, at most once a
// DeliveryDeadline; call with o.mu held.
func (o *Owner) stalled(id string, r *run) (stall, bool) {
	after := o.opts.DeliveryDeadline
	// A prompt put back waits its backoff on a timer of its own.
	if !r.settled() || r.delivery.givenUp > 0 || time.Since(r.since) < after || time.Since(r.looked) < after {
		return stall{}, false
	}
	if r.busy && (r.stallSaid || time.Since(r.heard) < turnQuiet*after) { // a Turn heard of lately, or said
		return stall{}, false
	}
	r.looked = time.Now()
	return stall{id: id, busy: r.busy, busyBy: r.busyBy, began: since(r.turnAt), heard: since(r.heard), waiting: since(r.since)}, true
}

// sayStall logs a stall the sweep saw, if a prompt waits: between Turns it
// sends the prompt, in a Turn it says once what the queue waits for.
func (o *Owner) sayStall(ctx context.Context, st stall) {
	q, err := o.store.Prompts(ctx, st.id)
	if err != nil || len(q) == 0 {
		return
	}
	if !st.busy {
		o.mu.Lock()
		r := o.runs[st.id]
		still := r != nil && r.waitsForPrompt()
		o.mu.Unlock()
		if !still { // it moved while the queue was read
			return
		}
		o.log.Warn("a prompt waited with nothing on its way and no Turn running; sending it now", "session", st.id, "waited", st.waiting.Round(time.Second), "queued", len(q))
		o.dispatch(st.id)
		return
	}
	o.mu.Lock()
	if r := o.runs[st.id]; r != nil && r.busy {
		r.stallSaid = true
	}
	o.mu.Unlock()
	o.log.Warn("the queue waits for a Turn the Hub has heard nothing of", "session", st.id, "queued", len(q),
		"began", st.began.Round(time.Second), "told_by", st.busyBy, "last_event", st.heard.Round(time.Second))
}

// since is how long ago t was, 0 for never.
func since(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Since(t)
}

func (o *Owner) sleepIfIdle(ctx context.Context, id string) {
	s, err := o.store.SessionByID(ctx, id)
	q, qerr := o.store.Prompts(ctx, id)
	if err != nil || qerr != nil || s.State != Active || s.KeepAwake || len(q) > 0 {
		// Not idle after all: look again in a full Idle. A Session no
		// longer awake has no run, and gets none.
		o.mu.Lock()
		if r := o.runs[id]; r != nil {
			r.since = time.Now()
		}
		o.mu.Unlock()
		return
	}
	why := fmt.Sprintf("it was idle for %s", o.opts.Idle.Round(time.Second))
	if err := o.Sleep(ctx, id, why); err != nil {
		o.log.Warn("an idle session did not go to sleep", "session", id, "err", err)
	}
}
