package session

import (
	"context"
	"fmt"
	"time"
)

// sweepIdle puts to sleep each Active Session with no Turn running,
// nothing on its way or queued, and Keep awake off, once it has been so
// for Idle.
func (o *Owner) sweepIdle(ctx context.Context) {
	every := min(max(o.opts.Idle/10, 50*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var idle []string
		o.mu.Lock()
		for id, r := range o.runs {
			if r.ready && !r.busy && !r.question && !r.stopping && !r.delivery.onItsWay() && time.Since(r.since) >= o.opts.Idle {
				idle = append(idle, id)
			}
		}
		o.mu.Unlock()
		for _, id := range idle {
			o.sleepIfIdle(ctx, id)
		}
	}
}

func (o *Owner) sleepIfIdle(ctx context.Context, id string) {
	s, err := o.store.SessionByID(ctx, id)
	q, qerr := o.store.Prompts(ctx, id)
	if err != nil || qerr != nil || s.State != Active || s.KeepAwake || len(q) > 0 {
		// Not idle after all: look again in a full Idle.
		o.withRun(id, func(r *run) { r.since = time.Now() })
		return
	}
	why := fmt.Sprintf("it was idle for %s", o.opts.Idle.Round(time.Second))
	if err := o.Sleep(ctx, id, why); err != nil {
		o.log.Warn("an idle session did not go to sleep", "session", id, "err", err)
	}
}
