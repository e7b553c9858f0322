package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// TestAFailedStartIsFailedWithItsReasonAndAWakeRetriesIt: a start the
// Runner refuses is Failed with the Runner's words, not Asleep; it is not
// retried on its own, and kndl wake tries again.
func TestAFailedStartIsFailedWithItsReasonAndAWakeRetriesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.runner.setStartErr(fmt.Errorf("clone: repository not found: %w", errdefs.ErrInvalid))
		s := f.create("hello")
		got := f.waitState(s.ID, Failed)
		if !strings.Contains(got.StateDetail, "repository not found") || got.Transient {
			t.Fatalf("failed with %q (transient %v), want the Runner's reason, not transient", got.StateDetail, got.Transient)
		}
		f.runner.quiet(3 * f.o.opts.RetryMin)
		f.runner.setStartErr(nil)
		if err := f.o.Wake(context.Background(), s.ID, "its Creator woke it"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStart)
		f.waitState(s.ID, Active)
		if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "hello" {
			t.Fatalf("typed %q, want the first prompt", d.deliver.Text)
		}
	})
}

// TestASessionWhoseModelItsRunnerNoLongerOffersFailsSayingTheWayOut: a
// Runner that comes back with a Claude Code that no longer takes the
// Session's model gets no start: the Session is Failed, not retried, with
// a note naming the model and how to choose another, and once its Creator
// does, a wake starts it on the new one.
func TestASessionWhoseModelItsRunnerNoLongerOffersFailsSayingTheWayOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		pinned := claude.Models()
		def, _ := pinned.Default()
		var older claude.Table // the pinned version's table without its last model
		older.Version, older.Models = "older", pinned.Models[:len(pinned.Models)-1]
		gone := pinned.Models[len(pinned.Models)-1]
		f.runners.report(f.runnerID, older)
		s, err := f.o.Create(context.Background(), store.Session{RepoID: f.repo.ID, CreatorID: f.user.ID, RunnerID: f.runnerID, Title: "t", Model: gone.Alias},
			store.Prompt{AuthorID: f.user.ID, Text: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		got := f.waitState(s.ID, Failed)
		for _, want := range []string{`model "` + gone.Alias + `" is not offered`, def.Alias, "kndl update --model"} {
			if !strings.Contains(got.StateDetail, want) {
				t.Errorf("failed with %q, want it to say %q", got.StateDetail, want)
			}
		}
		if got.Transient {
			t.Error("a model the Runner does not take is retried, as if it might mend on its own")
		}
		if notes := f.events(s.ID, protocol.EventLog); len(notes) != 1 || !strings.Contains(notes[0], "kndl update --model") {
			t.Errorf("the Session's history says %q, want a note naming the way out", notes)
		}
		f.runner.quiet(3 * f.o.opts.RetryMin)

		if err := f.o.Update(context.Background(), s.ID, "t", def.Alias, ""); err != nil {
			t.Fatal(err)
		}
		if err := f.o.Wake(context.Background(), s.ID, "its Creator woke it"); err != nil {
			t.Fatal(err)
		}
		if start := f.runner.next(protocol.TypeSessionStart).start; start.Model != def.Alias {
			t.Fatalf("started with model %q, want %q", start.Model, def.Alias)
		}
		f.waitState(s.ID, Active)
	})
}

// TestATransientStartFailureIsRetriedWithBackoff: a cause a retry may mend
// (the Runner unavailable) is retried by the Hub, each try in the start
// log, until the start succeeds.
func TestATransientStartFailureIsRetriedWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.runner.setStartErr(fmt.Errorf("the registry did not answer: %w", errdefs.ErrUnavailable))
		s := f.create("hello")
		f.runner.next(protocol.TypeSessionStart) // retry 1
		f.runner.setStartErr(nil)
		f.runner.next(protocol.TypeSessionStart) // retry 2 succeeds
		f.waitState(s.ID, Active)
		logs := f.events(s.ID, protocol.EventLog)
		if len(logs) != 2 || !strings.Contains(logs[0], "try 1 of 8") || !strings.Contains(logs[1], "try 2 of 8") {
			t.Fatalf("start log = %q, want two retries", logs)
		}
	})
}

// TestAHubRestartGoesOnWithTheStartsRetries: the count of a start's
// retries is the store's, so after a restart of the Hub the next retry is
// the second, with its longer backoff, not the first again; the start
// coming up ends the count.
func TestAHubRestartGoesOnWithTheStartsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.RetryMin, o.RetryMax = time.Hour, 4*time.Hour })
		ctx := context.Background()
		f.runner.setStartErr(fmt.Errorf("the registry did not answer: %w", errdefs.ErrUnavailable))
		s := f.create("hello")
		testenv.Eventually(t, testenv.WaitShort, "the first retry in the start log", func() bool { return len(f.events(s.ID, protocol.EventLog)) == 1 })
		f.restartHub()
		f.runner.setStartErr(fmt.Errorf("the registry did not answer: %w", errdefs.ErrUnavailable))
		f.o.RunnerBack(ctx, f.runnerID, nil)
		f.runner.next(protocol.TypeSessionStart) // its Runner is back: tried again
		testenv.Eventually(t, testenv.WaitShort, "the second retry in the start log", func() bool { return len(f.events(s.ID, protocol.EventLog)) == 2 })
		if logs := f.events(s.ID, protocol.EventLog); !strings.Contains(logs[0], "in 1h0m0s (try 1 of 8)") || !strings.Contains(logs[1], "in 2h0m0s (try 2 of 8)") {
			t.Fatalf("start log = %q, want the count and the backoff to go on", logs)
		}
		f.runner.setStartErr(nil)
		if err := f.o.Wake(ctx, s.ID, "its Creator woke it"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStart)
		f.waitState(s.ID, Active)
		if got := f.session(s.ID).StartRetries; got != 0 {
			t.Fatalf("retries after the start came up = %d, want 0", got)
		}
	})
}

// TestIdleSessionsSleepUnlessKeptAwake: with nothing running or queued, a
// Session sleeps after Idle; with Keep awake on, it does not.
func TestIdleSessionsSleepUnlessKeptAwake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.Idle = 200 * time.Millisecond })
		ctx := context.Background()
		idle, _ := f.active("one")
		kept, _ := f.active("two")
		if err := f.o.SetKeepAwake(ctx, kept.ID, true); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{idle.ID, kept.ID} {
			f.o.Accepted(id)
			f.o.Events(ctx, f.session(id), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventPrompt}}})
			f.o.TurnEnded(id)
		}
		f.runner.next(protocol.TypeSessionStop)
		got := f.waitState(idle.ID, Asleep)
		if !strings.Contains(got.StateDetail, "idle") {
			t.Fatalf("slept saying %q, want idle", got.StateDetail)
		}
		f.runner.quiet(4 * f.o.opts.Idle)
		if s := f.session(kept.ID); s.State != Active {
			t.Fatalf("a Session with Keep awake is %s", s.State)
		}
	})
}

// TestAfterAHubRestartRunningSessionsComeBackAndTheOthersSleep: Recover
// freezes what the store says is awake; the Runner's hello makes a
// Session it still runs Active again, and one it does not Asleep, woken at
// once since a prompt waits.
func TestAfterAHubRestartRunningSessionsComeBackAndTheOthersSleep(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	running, _ := f.active("one")
	stopped, _ := f.active("two")
	f.o.Accepted(running.ID)
	f.o.Accepted(stopped.ID)
	f.o.Events(ctx, f.session(stopped.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventPrompt}, {Kind: protocol.EventSubagentStart, Agent: "a1"}}})

	f.restartHub()
	for _, id := range []string{running.ID, stopped.ID} {
		if s := f.session(id); s.State != Frozen {
			t.Fatalf("after the restart %s is %s, want frozen", id, s.State)
		}
	}
	f.o.Prompt(ctx, f.session(stopped.ID), store.Prompt{AuthorID: f.user.ID, Text: "waiting"})
	resumed := f.o.RunnerBack(ctx, f.runnerID, []string{running.ID})
	if len(resumed) != 1 || resumed[0].SessionID != running.ID {
		t.Fatalf("resumed %+v, want only the running one", resumed)
	}
	f.waitState(running.ID, Active)
	f.runner.next(protocol.TypeSessionStart) // the stopped one wakes: a prompt waits
	f.waitState(stopped.ID, Active)
	notes := strings.Join(f.events(stopped.ID, protocol.EventNote), "\n")
	for _, want := range []string{"Frozen: the Hub restarted", "Asleep: Claude Code was not running when its Runner came back", "Starting: its Runner is back and prompts wait"} {
		if !strings.Contains(notes, want) {
			t.Errorf("history lacks %q:\n%s", want, notes)
		}
	}
}

// TestARemovedRunnersSessionsFailSayingWhy: they are Failed, not wedged,
// with the cause the Hub gives (the Runner revoked, or its owner removed
// with it), and a wake says why it cannot.
func TestARemovedRunnersSessionsFailSayingWhy(t *testing.T) {
	for _, cause := range []string{RunnerRevoked, RunnerOwnerRemoved} {
		t.Run(cause, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t)
				ctx := context.Background()
				s, _ := f.active("hello")
				if err := f.st.Runners.RevokeRunner(ctx, f.runnerID); err != nil {
					t.Fatal(err)
				}
				f.o.RunnerRemoved(ctx, f.runnerID, cause)
				got := f.waitState(s.ID, Failed)
				if want := cause + "; its Workspace was on that machine"; got.StateDetail != want {
					t.Fatalf("failed with %q, want %q", got.StateDetail, want)
				}
				const why = "its Runner was removed; its Workspace was on that machine"
				if err := f.o.Wake(ctx, s.ID, "test"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), why) {
					t.Fatalf("wake: %v, want a conflict saying %q", err, why)
				}
			})
		})
	}
}

// TestAHubRestartFailsTheSessionsOfARunnerRemovedMeanwhile: a Runner
// revoked while the Hub could not fail its Sessions (it stopped between
// the two, or a migration revoked it) leaves none of them waiting on it.
func TestAHubRestartFailsTheSessionsOfARunnerRemovedMeanwhile(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	awake, _ := f.active("one")
	asleep, _ := f.active("two")
	if err := f.o.Sleep(ctx, asleep.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Runners.RevokeRunner(ctx, f.runnerID); err != nil {
		t.Fatal(err)
	}
	f.restartHub()
	for _, id := range []string{awake.ID, asleep.ID} {
		if s := f.session(id); s.State != Failed || s.StateDetail != removedWhy {
			t.Errorf("after the restart %s is %s (%q), want failed saying %q", id, s.State, s.StateDetail, removedWhy)
		}
	}
}

// TestAHubRestartReadsNoAsleepSessionOnItsOwn: a standby serves only once
// Recover returns, so a Session that needs nothing of it (asleep, its
// Runner kept, no prompt on its way), nearly all of a large Hub's, costs
// no read of its own; the awake one is still Frozen.
func TestAHubRestartReadsNoAsleepSessionOnItsOwn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	awake, _ := f.active("one")
	const asleep = 20
	for range asleep {
		s := store.Session{RepoID: f.repo.ID, CreatorID: f.user.ID, RunnerID: f.runnerID, Title: "t", State: Asleep}
		if _, err := f.st.Sessions.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var reads atomic.Int32
	f.st.Observe(func(op string, _ time.Duration) {
		if op == "session_by_id" {
			reads.Add(1)
		}
	})
	f.restartHub()
	f.st.Observe(nil)
	if got := reads.Load(); got >= asleep {
		t.Errorf("got %d Sessions read one by one at a restart with %d asleep and 1 awake, want only the awake one's", got, asleep)
	}
	if s := f.session(awake.ID); s.State != Frozen {
		t.Errorf("after the restart the awake Session is %s, want frozen", s.State)
	}
}

// TestAnUnsharedRunnersOtherSessionsSleepAndCannotWake: once a Runner is
// one a Session's Creator may no longer use (store.Runner.UsableBy), the
// Session sleeps saying why, and neither a wake nor a prompt starts it
// there; its owner's Sessions run on.
func TestAnUnsharedRunnersOtherSessionsSleepAndCannotWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		secret, _ := f.st.Members.NewSetupLink(ctx)
		other, err := f.st.Members.ClaimSetupLink(ctx, secret, store.GitHubIdentity{ID: 7, Login: "carol"})
		if err != nil {
			t.Fatal(err)
		}
		f.st.Runners.SetRunnerShared(ctx, f.runnerID, true)
		theirs, err := f.o.Create(ctx, store.Session{RepoID: f.repo.ID, CreatorID: other.ID, RunnerID: f.runnerID, Title: "t"}, store.Prompt{AuthorID: other.ID, Text: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStart)
		f.runner.next(protocol.TypeSessionDeliver)
		f.waitState(theirs.ID, Active)
		own, _ := f.active("mine")

		f.st.Runners.SetRunnerShared(ctx, f.runnerID, false)
		f.o.RunnerNarrowed(ctx, f.runnerID, "the Owner unshared it")
		f.runner.next(protocol.TypeSessionStop)
		if got := f.waitState(theirs.ID, Asleep); !strings.Contains(got.StateDetail, "the Owner unshared it") {
			t.Fatalf("slept saying %q, want why", got.StateDetail)
		}
		if s := f.session(own.ID); s.State != Active {
			t.Fatalf("the Runner's owner's own Session is %s, want active", s.State)
		}
		if err := f.o.Wake(ctx, theirs.ID, "test"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "no longer shared") {
			t.Fatalf("wake: %v, want a conflict saying the Runner is no longer shared", err)
		}
		if _, err := f.o.Prompt(ctx, f.session(theirs.ID), store.Prompt{AuthorID: other.ID, Text: "again"}); err != nil {
			t.Fatal(err)
		}
		f.runner.quiet(50 * time.Millisecond)
		if s := f.session(theirs.ID); s.State != Asleep {
			t.Fatalf("after a prompt the Session is %s, want asleep still", s.State)
		}
	})
}

// TestExitingOnItsOwnSleepsAndKeepsKeepAwake: Claude Code that exits on
// its own leaves the Session Asleep with Keep awake as it was, so it is
// not restarted over and over; its Runner's next hello wakes it.
func TestExitingOnItsOwnSleepsAndKeepsKeepAwake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("hello")
		f.o.SetKeepAwake(ctx, s.ID, true)
		if err := f.o.Exited(ctx, s.ID, "it exited on its own"); err != nil {
			t.Fatal(err)
		}
		got := f.waitState(s.ID, Asleep)
		if !got.KeepAwake || got.StateDetail != "Claude Code ended: it exited on its own" {
			t.Fatalf("after exiting: keep awake %v, %q", got.KeepAwake, got.StateDetail)
		}
		f.runner.quiet(50 * time.Millisecond)
		f.o.RunnerBack(ctx, f.runnerID, nil)
		f.runner.next(protocol.TypeSessionStart)
		f.waitState(s.ID, Active)
	})
}

// TestRestartStartsTheSameConversationAgain: the Runner is told to stop,
// then to start resuming.
func TestRestartStartsTheSameConversationAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := f.active("hello")
	f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Offsets: map[string]int64{s.ID + ".jsonl": 10}})
	if err := f.o.Restart(ctx, s.ID, "its Creator restarted it"); err != nil {
		t.Fatal(err)
	}
	f.runner.next(protocol.TypeSessionStop)
	f.runner.next(protocol.TypeSessionStart)
	f.waitState(s.ID, Active)
}

// TestCloseEndsEveryGoroutine: an Owner with a delivery waiting an hour
// for its Runner, a start's retry armed an hour off and a start in flight
// leaves nothing running once closed, at once.
func TestCloseEndsEveryGoroutine(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.DeliveryDeadline, o.RetryMin, o.RetryMax = time.Hour, time.Hour, time.Hour })
	f.runner.holdDeliveries()
	f.active("hello") // a delivery waiting an hour for the Runner's answer
	f.runner.setStartErr(fmt.Errorf("away: %w", errdefs.ErrUnavailable))
	f.create("other") // a retry timer armed
	testenv.Eventually(t, testenv.WaitShort, "the retry's timer armed", func() bool {
		f.o.g.wgMu.Lock()
		defer f.o.g.wgMu.Unlock()
		return len(f.o.g.timers) == 1
	})
	done := make(chan struct{})
	go func() { f.o.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(testenv.WaitShort):
		t.Fatal("Close did not return")
	}
	if f.o.g.after(time.Millisecond, func(context.Context) {}) != nil {
		t.Fatal("a closed Owner armed a timer")
	}
}

// TestATurnTakenBackHoldsTheQueueUntilItEnds: after a restart, a Session
// whose Turn was running when the Hub last heard takes no prompt until the
// transcript says the Turn ended, though its Stop hook was lost.
func TestATurnTakenBackHoldsTheQueueUntilItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("long job")
		f.o.Accepted(s.ID)
		f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventTurnStart}, {Kind: protocol.EventPrompt, Text: "long job"}}})
		f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: "queued behind"})

		f.restartHub()
		f.o.RunnerBack(ctx, f.runnerID, []string{s.ID})
		f.waitState(s.ID, Active)
		f.runner.quiet(100 * time.Millisecond)
		if got := f.o.Activity(s.ID); got != "turn" {
			t.Fatalf("activity = %q, want turn", got)
		}
		f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventTurnEnd, Reason: "done"}}})
		if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "queued behind" {
			t.Fatalf("typed %q, want the queued prompt", d.deliver.Text)
		}
	})
}
