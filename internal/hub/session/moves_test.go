package session

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// The races a per-Session lock held off before a Session's moves were
// steps of its loop (act.go): each test holds the Runner's answer to a
// move, asks others meanwhile, and checks they are made after it, in
// order, and nothing between.

// TestAPromptThatComesWhileItGoesToSleepWakesItOnceAsleep: a prompt
// queued while the Runner stops the Session is kept; once the Session is
// Asleep the prompt wakes it, and it is the prompt typed. The loop answers
// meanwhile: the stop holds no step.
func TestAPromptThatComesWhileItGoesToSleepWakesItOnceAsleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("hello")
		f.o.Accepted(s.ID)
		f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventPrompt, Text: "hello"}}})
		f.o.TurnEnded(s.ID)

		release := f.runner.hold(protocol.TypeSessionStop)
		slept := make(chan error, 1)
		go func() { slept <- f.o.Sleep(ctx, s.ID, "its Creator put it to sleep") }()
		f.runner.next(protocol.TypeSessionStop)
		prompted := make(chan error, 1)
		go func() {
			_, err := f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: "after the sleep"})
			prompted <- err
		}()
		synctest.Wait()
		if got := f.o.Activity(s.ID); got != "" {
			t.Errorf("activity while it stops = %q, want none", got)
		}
		if got := f.session(s.ID).State; got != Active {
			t.Fatalf("before the Runner stopped it the Session is %s, want active", got)
		}
		release()
		if err := <-slept; err != nil {
			t.Fatal(err)
		}
		if err := <-prompted; err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStart)
		f.waitState(s.ID, Active)
		if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "after the sleep" {
			t.Fatalf("typed %q, want the prompt that came during the sleep", d.deliver.Text)
		}
		notes := strings.Join(f.events(s.ID, protocol.EventNote), "\n")
		if i, j := strings.Index(notes, "Asleep: its Creator put it to sleep"), strings.Index(notes, "Starting: a prompt woke it"); i < 0 || j < i {
			t.Fatalf("history, want the sleep then the prompt's wake:\n%s", notes)
		}
	})
}

// TestAnArchiveMidTurnLetsNothingWakeItBetween: an Active Session archived
// mid-Turn is stopped, then archived, in one move: a prompt, a wake and
// Claude Code's exit asked while the Runner stops it are made once it is
// Archived, so nothing starts it between; the prompt and the one the Turn
// was on wait in its queue.
func TestAnArchiveMidTurnLetsNothingWakeItBetween(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("long job")
		f.o.Accepted(s.ID) // a Turn runs

		release := f.runner.hold(protocol.TypeSessionStop)
		archived := make(chan error, 1)
		go func() { archived <- f.o.Archive(ctx, s.ID, "its Creator archived it") }()
		f.runner.next(protocol.TypeSessionStop)
		asked := make(chan error, 3)
		go func() {
			_, err := f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: "meanwhile"})
			asked <- err
		}()
		go func() { asked <- f.o.Exited(ctx, s.ID, "it exited") }()
		synctest.Wait()
		woke := make(chan error, 1)
		go func() { woke <- f.o.Wake(ctx, s.ID, "its Creator woke it") }()
		synctest.Wait()
		release()
		if err := <-archived; err != nil {
			t.Fatalf("archive: %v", err)
		}
		f.runner.next(protocol.TypeSessionArchive)
		for range 2 {
			if err := <-asked; err != nil {
				t.Fatal(err)
			}
		}
		if err := <-woke; !errors.Is(err, errdefs.ErrConflict) {
			t.Errorf("a wake asked during the archive: %v, want a conflict once it is archived", err)
		}
		f.runner.quiet(50 * f.o.opts.RetryMin)
		if got := f.session(s.ID); got.State != Archived || got.StateDetail != "its Creator archived it" {
			t.Fatalf("after the archive: %s %q, want archived as its Creator asked", got.State, got.StateDetail)
		}
		if q := f.prompts(s.ID)[store.Queued]; strings.Join(q, ",") != "long job,meanwhile" {
			t.Fatalf("queued %q, want the Turn's prompt put back, then the one sent meanwhile", q)
		}
	})
}

// TestAWakeAskedWhileItGoesToSleepWakesItOnceAsleep: a wake is not
// refused for finding the Session still awake mid-stop: it is made once
// the sleep is, and starts it.
func TestAWakeAskedWhileItGoesToSleepWakesItOnceAsleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("hello")
		f.o.Accepted(s.ID)
		release := f.runner.hold(protocol.TypeSessionStop)
		slept := make(chan error, 1)
		go func() { slept <- f.o.Sleep(ctx, s.ID, "its Creator put it to sleep") }()
		f.runner.next(protocol.TypeSessionStop)
		woke := make(chan error, 1)
		go func() { woke <- f.o.Wake(ctx, s.ID, "its Creator woke it") }()
		synctest.Wait()
		release()
		if err := <-slept; err != nil {
			t.Fatal(err)
		}
		if err := <-woke; err != nil {
			t.Fatalf("a wake asked during the sleep: %v, want it made after", err)
		}
		f.runner.next(protocol.TypeSessionStart)
		f.waitState(s.ID, Active)
	})
}

// TestTwoWakesAtOnceMakeOneRun: of two wakes asked at once, one starts the
// Session and the other finds it starting; the Runner is asked once.
func TestTwoWakesAtOnceMakeOneRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("hello")
		if err := f.o.Sleep(ctx, s.ID, "test"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStop)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { errs[i] = f.o.Wake(ctx, s.ID, "its Creator woke it") })
		}
		wg.Wait()
		if woke := (errs[0] == nil) != (errs[1] == nil); !woke || !errors.Is(errors.Join(errs...), errdefs.ErrConflict) {
			t.Fatalf("two wakes at once: %v, want one nil and one conflict", errs)
		}
		f.runner.next(protocol.TypeSessionStart)
		f.waitState(s.ID, Active)
		f.runner.next(protocol.TypeSessionDeliver) // the first prompt, put back by the sleep
		f.runner.quiet(50 * f.o.opts.RetryMin)
	})
}

// TestACallerGoneMidSleepLeavesTheSleepToFinish: a caller whose context
// ends while the Runner stops the Session gets its context's error; the
// sleep still ends Asleep once the Runner answers.
func TestACallerGoneMidSleepLeavesTheSleepToFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		s, _ := f.active("hello")
		release := f.runner.hold(protocol.TypeSessionStop)
		ctx, cancel := context.WithCancel(context.Background())
		slept := make(chan error, 1)
		go func() { slept <- f.o.Sleep(ctx, s.ID, "its Creator put it to sleep") }()
		f.runner.next(protocol.TypeSessionStop)
		cancel()
		if err := <-slept; !errors.Is(err, context.Canceled) {
			t.Fatalf("sleep with its caller gone: %v, want the context's error", err)
		}
		release()
		f.waitState(s.ID, Asleep)
	})
}
