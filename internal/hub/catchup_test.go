package hub

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestACatchUpTurnEndsByItself: a watcher that stops reading mid-catch-up
// keeps its turn at most catchUpTurn, so stalled watchers can't hold every
// other one off for good.
func TestACatchUpTurnEndsByItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCatchUps()
		for range maxCatchUps {
			if _, ok := c.enter(t.Context()); !ok {
				t.Fatal("got no turn, want one of the free ones")
			}
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		leave, ok := c.enter(ctx)
		if !ok {
			t.Fatal("got no turn within an hour, want one once a stalled turn ended")
		}
		leave()
		if waited := time.Since(start); waited != catchUpTurn {
			t.Errorf("got a turn after %v, want after %v, as the stalled ones end", waited, catchUpTurn)
		}
	})
}
