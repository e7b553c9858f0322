package session

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/protocol"
)

// Scenarios that tests/e2e ran with a real System but that only the Hub's
// logic decides, here on a synctest bubble's clock: minutes of Options'
// timings pass in milliseconds. docs/testing.md's "Moved from e2e" table
// names each with the e2e test it replaced.

// TestAnIdleSessionSleepsSayingHowLongUnlessKeptAwake: past Idle (3 s, as
// the e2e test set HUB_SESSION_IDLE) with no Turn running and nothing
// queued, a Session sleeps saying for how long it was idle; one its Creator
// keeps awake stays Active with Keep awake on.
func TestAnIdleSessionSleepsSayingHowLongUnlessKeptAwake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.Idle = 3 * time.Second })
		ctx := context.Background()
		kept, _ := f.active("keep me awake")
		if err := f.o.SetKeepAwake(ctx, kept.ID, true); err != nil {
			t.Fatal(err)
		}
		idle, _ := f.active("let me sleep")
		for _, id := range []string{kept.ID, idle.ID} {
			f.o.Accepted(id)
			f.o.Events(ctx, f.session(id), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventPrompt}}})
			f.o.TurnEnded(id)
		}
		f.runner.next(protocol.TypeSessionStop)
		if got := f.waitState(idle.ID, Asleep).StateDetail; !strings.Contains(got, "idle for 3s") {
			t.Fatalf("slept saying %q, want idle for 3s", got)
		}
		f.runner.quiet(4 * f.o.opts.Idle)
		if s := f.session(kept.ID); s.State != Active || !s.KeepAwake {
			t.Fatalf("the Session kept awake is %s (keep awake %v), want active with it on", s.State, s.KeepAwake)
		}
	})
}
