package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// TestASessionPastASpendCapIsRefusedAtTheRelayAndSleeps: with a cap set
// (one Session's, a Repo's a day, a Member's a day), once what the relay
// counted passes it, the Runner's relay is told to refuse the Session's
// model requests naming the cap, the Session sleeps with a limit Event
// saying which and the way on, and a wake is refused while it holds.
func TestASessionPastASpendCapIsRefusedAtTheRelayAndSleeps(t *testing.T) {
	tests := []struct {
		name   string
		limits store.RepoLimits
		member float64
		names  string
	}{
		{"one Session's", store.RepoLimits{MaxTurns: 20, MaxTurnHours: 2, MaxSessionSpend: 0.5}, 0, "--max-session-spend"},
		{"a Repo's a day", store.RepoLimits{MaxTurns: 20, MaxTurnHours: 2, MaxSpend: 0.5}, 0, "--max-spend"},
		{"a Member's a day", store.RepoLimits{MaxTurns: 20, MaxTurnHours: 2}, 0.5, "HUB_MEMBER_MAX_SPEND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, th := limitedFixture(t, func(o *Options) { o.MemberMaxSpend = tt.member })
				ctx := context.Background()
				if err := f.st.Repos.SetRepoLimits(ctx, f.repo.ID, tt.limits); err != nil {
					t.Fatal(err)
				}
				s, _ := f.active("spend")
				spend := func(msg string, input int64) {
					t.Helper()
					u := protocol.Usage{Message: msg, Model: "claude-sonnet-5-5", Tokens: claude.Tokens{Input: input, Output: 10}}
					if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{SessionID: s.ID, Spent: []protocol.Usage{u}}); err != nil {
						t.Fatal(err)
					}
				}
				spend("msg_1", 1000) // well under the cap
				f.runner.quiet(100 * time.Millisecond)
				spend("msg_2", 1_000_000) // dollars' worth
				c := f.runner.next(protocol.TypeSessionCapped)
				if c.id != s.ID || !strings.Contains(c.why, tt.names) {
					t.Fatalf("the relay was told %q for %s, want the cap (%s) for %s", c.why, c.id, tt.names, s.ID)
				}
				f.runner.next(protocol.TypeSessionStop)
				f.waitState(s.ID, Asleep)
				testenv.Eventually(t, testenv.WaitShort, "the limit in the history", func() bool { return len(f.events(s.ID, protocol.EventLimit)) == 1 })
				if ev := f.events(s.ID, protocol.EventLimit)[0]; !strings.Contains(ev, tt.names) || !strings.Contains(ev, "To go on") {
					t.Fatalf("limit event %q, want the cap named and the way on", ev)
				}
				// The thread is told after the history: wait for it too.
				testenv.Eventually(t, testenv.WaitShort, "the thread told", func() bool { return len(th.of(s.ID)) > 0 })
				if said := th.of(s.ID); len(said) != 1 {
					t.Fatalf("the thread was told %q, want once", said)
				}
				if err := f.o.Wake(ctx, s.ID, "its Creator woke it"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), tt.names) {
					t.Fatalf("wake = %v, want a conflict naming the cap", err)
				}
			})
		})
	}
}

// TestWithNoSpendCapNothingIsRefused: the caps are off by default.
func TestWithNoSpendCapNothingIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _ := limitedFixture(t)
		ctx := context.Background()
		s, _ := f.active("spend")
		u := protocol.Usage{Message: "msg_1", Model: "claude-sonnet-5-5", Tokens: claude.Tokens{Input: 100_000_000}}
		if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{SessionID: s.ID, Spent: []protocol.Usage{u}}); err != nil {
			t.Fatal(err)
		}
		f.runner.quiet(200 * time.Millisecond)
		if st := f.session(s.ID).State; st != Active {
			t.Fatalf("state %s, want active", st)
		}
	})
}
