package session

import (
	"context"
	"fmt"
	"time"
)

// sweep is the Owner's one timer over every awake Session: it sleeps the
// idle and raises the alarm (alarm.go).
type sweep struct {
	deps
	life *life
}

// sweepIdle puts to sleep each Active Session with no Turn of a prompt
// the Hub sent running, nothing on its way or queued, and Keep awake off,
// once the idle clock (run.since) has run Idle; and raises the alarm for a
// queue that waits with nothing to wait for (alarm.go).
func (o *sweep) sweepIdle(ctx context.Context) {
	every := min(max(min(o.opts.Idle, o.opts.DeliveryDeadline)/10, 50*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, id := range o.runs.ids() {
			var idle, stalled bool
			var st stall
			o.runs.on(id, func(r *run) {
				idle = r.idle() && time.Since(r.since) >= o.opts.Idle
				st, stalled = r.stalled(id, o.opts.DeliveryDeadline)
			})
			if idle {
				o.sleepIfIdle(ctx, id)
			}
			if stalled {
				o.alarm(ctx, st)
			}
		}
	}
}

func (o *sweep) sleepIfIdle(ctx context.Context, id string) {
	s, err := o.store.Sessions.SessionByID(ctx, id)
	q, qerr := o.store.Prompts.List(ctx, id)
	if err != nil || qerr != nil || s.State != Active || s.KeepAwake || len(q) > 0 {
		// Not idle after all: look again in a full Idle. A Session no
		// longer awake has no run, and gets none.
		o.runs.on(id, func(r *run) { r.since = time.Now() })
		return
	}
	why := fmt.Sprintf("it was idle for %s", o.opts.Idle.Round(time.Second))
	if err := o.life.Sleep(ctx, id, why); err != nil {
		o.log.Warn("an idle session did not go to sleep", "session", id, "err", err)
	}
}
