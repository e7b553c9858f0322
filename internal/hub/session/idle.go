package session

import (
	"context"
	"fmt"
	"time"
)

// sweepIdle puts to sleep each Active Session with no Turn of a prompt
// the Hub sent running, nothing on its way or queued, and Keep awake off,
// once the idle clock (run.since) has run Idle; and raises the alarm for a
// queue that waits with nothing to wait for (alarm.go).
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
			if st, ok := r.stalled(id, o.opts.DeliveryDeadline); ok {
				waits = append(waits, st)
			}
		}
		o.mu.Unlock()
		for _, id := range idle {
			o.sleepIfIdle(ctx, id)
		}
		for _, st := range waits {
			o.alarm(ctx, st)
		}
	}
}

func (o *Owner) sleepIfIdle(ctx context.Context, id string) {
	s, err := o.store.Sessions.SessionByID(ctx, id)
	q, qerr := o.store.Prompts.List(ctx, id)
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
