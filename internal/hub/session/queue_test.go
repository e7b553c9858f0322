package session

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// Every branch of prompt delivery, against a Runner on the real protocol.

func TestDeliveryConfirmedThenTheNextGoesAfterTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, d := f.active("first\tline\r\n")
		if d.deliver.Text != "first\tline\r\n" || d.deliver.Command || d.deliver.Within() != f.o.opts.DeliveryDeadline {
			t.Fatalf("sent %+v, want the prompt exactly, with the time the Runner has", d.deliver)
		}
		if _, err := f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: "second"}); err != nil {
			t.Fatal(err)
		}
		f.runner.quiet(50 * time.Millisecond) // one prompt on its way at a time
		f.o.Accepted(s.ID)
		if got := f.o.Activity(s.ID); got != "turn" {
			t.Fatalf("activity = %q, want turn", got)
		}
		f.runner.quiet(50 * time.Millisecond) // not during the Turn
		f.o.TurnEnded(s.ID)
		if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "second" {
			t.Fatalf("typed %q, want second", d.deliver.Text)
		}
		// On its way, or delivered already: the fake's reply is at once.
		if q := f.prompts(s.ID); len(q[store.Queued]) != 0 || slices.Contains(q[store.Delivering], "first\tline\r\n") {
			t.Fatalf("queue = %v, want only the second on its way", q)
		}
	})
}

// TestAPromptIsSentOnceAndTheRunnerTypesItAgain: the Hub sends a prompt
// once, with the time its Runner has; while the Runner types it (again, as
// often as Claude Code does not take it) the Hub sends it no more, however
// long that is, and the hook delivers it.
func TestAPromptIsSentOnceAndTheRunnerTypesItAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.runner.holdDeliveries()
		s, _ := f.active("hello")
		f.runner.quiet(4 * f.o.opts.DeliveryDeadline)
		if q := f.prompts(s.ID); len(q[store.Delivering]) != 1 {
			t.Fatalf("queue = %v, want the prompt on its way", q)
		}
		f.o.Accepted(s.ID)
		if q := f.prompts(s.ID); len(q) != 0 {
			t.Fatalf("queue = %v, want it delivered", q)
		}
	})
}

// TestAPromptNotTakenGoesBackToTheHeadOfTheQueue: the Runner answers that
// Claude Code did not take the prompt in the time given; it goes back to
// the head of the queue, the history says why, and it is sent afresh after
// a wait, even with nothing else happening.
func TestAPromptNotTakenGoesBackToTheHeadOfTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.runner.answerDeliveries(func(context.Context) (protocol.SessionDelivered, error) {
			return protocol.SessionDelivered{Tries: 9, Why: "the input never showed it"}, nil
		})
		s, _ := f.active("hello")
		// The prompt goes back, then the note says so: wait for both.
		var errs []string
		testenv.Eventually(t, testenv.WaitShort, "the prompt back in the queue, and said", func() bool {
			errs = f.events(s.ID, protocol.EventError)
			return len(f.prompts(s.ID)[store.Queued]) == 1 && len(errs) > 0
		})
		gaveUp := time.Now()
		if len(errs) != 1 || !strings.Contains(errs[0], "the input never showed it") || !strings.Contains(errs[0], "back at the head of the queue") {
			t.Fatalf("errors = %q, want one saying why it went back", errs)
		}
		f.runner.answerDeliveries(nil)
		if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "hello" {
			t.Fatalf("sent %+v, want hello afresh", d.deliver)
		}
		if waited := time.Since(gaveUp); waited < f.o.opts.DeliveryDeadline/2 {
			t.Errorf("sent again %s after giving up, want a wait (%s here)", waited, f.o.opts.DeliveryDeadline)
		}
		f.o.Accepted(s.ID)
		f.runner.quiet(2 * f.o.opts.DeliveryDeadline)
		if q := f.prompts(s.ID); len(q) != 0 {
			t.Fatalf("queue = %v, want it delivered", q)
		}
	})
}

func TestSleptMidDeliveryThePromptWaitsForTheWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		f.runner.holdDeliveries()
		s, _ := f.active("hello")
		if err := f.o.Sleep(ctx, s.ID, "its Creator put it to sleep"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStop)
		f.waitState(s.ID, Asleep)
		if q := f.prompts(s.ID); len(q[store.Queued]) != 1 {
			t.Fatalf("queue = %v, want the prompt back", q)
		}
		if _, err := f.st.Sessions.SessionByModToken(ctx, f.start.ModToken); err == nil {
			t.Fatal("the mod token of a Session asleep still works")
		}
		f.runner.quiet(2 * f.o.opts.DeliveryDeadline) // no retry of a Session asleep
		if err := f.o.Wake(ctx, s.ID, "test"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStart)
		if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "hello" {
			t.Fatalf("typed %q after the wake, want hello", d.deliver.Text)
		}
	})
}

func TestRunnerGoneMidDeliveryThePromptGoesWhenItIsBack(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.runner.holdDeliveries()
	s, _ := f.active("hello")
	f.runners.set(f.runnerID, nil)
	f.runner.gone()
	f.o.RunnerGone(ctx, f.runnerID)
	f.waitState(s.ID, Frozen)
	if q := f.prompts(s.ID); len(q[store.Queued]) != 1 {
		t.Fatalf("queue = %v, want the prompt back while the Runner is away", q)
	}
	back := newFakeRunner(t)
	f.runners.set(f.runnerID, back)
	resumed := f.o.RunnerBack(ctx, f.runnerID, []string{s.ID})
	if len(resumed) != 1 || resumed[0].SessionID != s.ID || resumed[0].ModToken == "" {
		t.Fatalf("resumed = %+v, want the Session with a fresh mod token", resumed)
	}
	f.waitState(s.ID, Active)
	if d := back.next(protocol.TypeSessionDeliver); d.deliver.Text != "hello" {
		t.Fatalf("typed %q once back, want hello", d.deliver.Text)
	}
}

// TestAPromptOnItsWayWhenTheHubStopsIsNotLost: a prompt the Runner was
// still typing when the Hub stopped (its session.deliver ends with the
// connection) goes back to the head of the queue at the next start, and is
// typed once the Runner is back; one whose Turn the history shows open was
// taken, and only the prompt after it is typed, once that Turn ends.
func TestAPromptOnItsWayWhenTheHubStopsIsNotLost(t *testing.T) {
	for _, tt := range []struct {
		name   string
		open   bool
		queued []string // after the restart
		typed  string   // first, once the Runner is back
	}{
		{"still typing", false, []string{"hello", "next"}, "hello"},
		{"its Turn open", true, []string{"next"}, "next"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t)
				ctx := context.Background()
				f.runner.holdDeliveries()
				s, _ := f.active("hello")
				if tt.open {
					if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventTurnStart}}}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: "next"}); err != nil {
					t.Fatal(err)
				}
				f.restartHub()
				if q := f.prompts(s.ID); !slices.Equal(q[store.Queued], tt.queued) || len(q[store.Delivering]) != 0 {
					t.Fatalf("after the restart: queue = %v, want queued %q and none on its way", q, tt.queued)
				}
				f.o.RunnerBack(ctx, f.runnerID, []string{s.ID})
				f.waitState(s.ID, Active)
				if tt.open {
					f.runner.quiet(100 * time.Millisecond) // not during the Turn
					if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventTurnEnd, Reason: "done"}}}); err != nil {
						t.Fatal(err)
					}
				}
				if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != tt.typed {
					t.Fatalf("typed %q once back, want %q", d.deliver.Text, tt.typed)
				}
			})
		})
	}
}

// TestAPromptTheRunnerTookBeforeBeginsNoTurn: the Hub stopped while a
// prompt was on its way, so the next Hub sends it again, and the Runner
// answers that Claude Code took it at the first session.deliver, whose
// reply was lost (runner TestAPromptSentAgainIsTypedOnceAcrossAHubAndARunnerRestart).
// The prompt is delivered, and no Turn begins for it (what its Turn did
// came in the Events): the next prompt goes at once.
func TestAPromptTheRunnerTookBeforeBeginsNoTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		f.runner.holdDeliveries()
		s, _ := f.active("hello")
		if _, err := f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: "next"}); err != nil {
			t.Fatal(err)
		}
		f.restartHub()
		answered := 0
		f.runner.answerDeliveries(func(context.Context) (protocol.SessionDelivered, error) {
			if answered++; answered == 1 { // deliveries go one at a time
				return protocol.SessionDelivered{Taken: true, Before: true}, nil
			}
			return protocol.SessionDelivered{Taken: true, Tries: 1}, nil
		})
		f.o.RunnerBack(ctx, f.runnerID, []string{s.ID})
		f.waitState(s.ID, Active)
		for _, want := range []string{"hello", "next"} {
			if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != want {
				t.Fatalf("typed %q, want %q", d.deliver.Text, want)
			}
		}
		synctest.Wait()
		if q := f.prompts(s.ID); len(q) != 0 {
			t.Fatalf("prompts = %v, want none waiting or on its way: both delivered", q)
		}
	})
}

// TestACutPromptIsNeverLost: a prompt Claude Code took but never wrote
// down goes back to the head of the queue when a sleep cuts its Turn; one
// it wrote down does not, whichever told of it first: the hook, or the
// transcript's batch that writes it down and says it was the one typed.
func TestACutPromptIsNeverLost(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	hook := func(id string) { f.o.Accepted(id) }
	written := func(id string) {
		if err := f.o.Events(ctx, f.session(id), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventPrompt, Text: "do the thing"}}, Typed: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		acks []func(id string)
		back bool
	}{
		{"taken, never written", []func(string){hook}, true},
		{"taken, then written", []func(string){hook, written}, false},
		{"written, with no hook", []func(string){written}, false},
		{"written, then the hook", []func(string){written, hook}, false},
	} {
		s, _ := f.active("do the thing")
		for _, ack := range tt.acks {
			ack(s.ID)
		}
		if err := f.o.Sleep(ctx, s.ID, "its Creator put it to sleep"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStop)
		q := f.prompts(s.ID)[store.Queued]
		if !tt.back && len(q) != 0 {
			t.Errorf("%s: written down, yet queued again: %q", tt.name, q)
		}
		if tt.back && (len(q) != 1 || q[0] != "do the thing") {
			t.Errorf("%s: not written down: queue = %q, want the prompt back", tt.name, q)
		}
	}
}

// TestASessionSleptMidTurnTypesTheCutPromptFirst is the Hub's side of
// tests/e2e TestASessionSleptMidTurnKeepsItsPrompt, where a stall of 1 in
// 48 runs was found: a sleep cuts a Turn whose prompt Claude Code took and
// never wrote down; a prompt that comes next wakes the Session, the cut
// prompt is typed first, and the new one after its Turn. No fault is named
// on the way (the fixture fails on one).
func TestASessionSleptMidTurnTypesTheCutPromptFirst(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := f.active("cut me short")
	f.o.Accepted(s.ID)
	if err := f.o.Sleep(ctx, s.ID, "its Creator put it to sleep"); err != nil {
		t.Fatal(err)
	}
	f.runner.next(protocol.TypeSessionStop)
	if !slices.ContainsFunc(f.events(s.ID, protocol.EventNote), func(n string) bool { return strings.Contains(n, "mid-Turn: the Turn was cut") }) {
		t.Errorf("the history does not say the Turn was cut: %q", f.events(s.ID, protocol.EventNote))
	}
	if _, err := f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: "after the cut"}); err != nil {
		t.Fatal(err)
	}
	f.runner.next(protocol.TypeSessionStart)
	for _, want := range []string{"cut me short", "after the cut"} {
		if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != want {
			t.Fatalf("typed %q, want %q", d.deliver.Text, want)
		}
		f.o.Accepted(s.ID)
		f.o.TurnEnded(s.ID)
	}
	if q := f.prompts(s.ID); len(q) != 0 {
		t.Errorf("left in the queue: %v, want nothing", q)
	}
}

// TestAPromptWakesAnAsleepSession: the prompt queues, the Session wakes,
// and the prompt goes once Claude Code is up.
func TestAPromptWakesAnAsleepSession(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := f.active("hello")
	f.o.Accepted(s.ID)
	f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventPrompt, Text: "hello"}}})
	f.o.TurnEnded(s.ID)
	f.o.Sleep(ctx, s.ID, "test")
	f.runner.next(protocol.TypeSessionStop)
	if _, err := f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: "again"}); err != nil {
		t.Fatal(err)
	}
	f.runner.next(protocol.TypeSessionStart)
	if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "again" {
		t.Fatalf("typed %q, want again", d.deliver.Text)
	}
}

// TestWhatASessionDoesReachesTheSessionsList: each change of what an
// Active Session is doing (a Turn runs, Claude waits on a question, by the
// mod's hook or the transcript, answered, the Turn over) is in Activity and
// reaches those watching every Session; an Event that changes nothing does
// not.
func TestWhatASessionDoesReachesTheSessionsList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("hello")
		all, cancel := f.o.Subscribe(All)
		defer cancel()
		tests := []struct {
			name   string
			do     func() error
			want   string
			change bool
		}{
			{"the prompt taken", func() error { f.o.Accepted(s.ID); return nil }, "turn", true},
			{"Claude's text", func() error {
				return f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventText, Text: "hi"}}})
			}, "turn", false},
			{"a question, by the hook", func() error { return f.o.Record(ctx, s.ID, protocol.Event{Kind: protocol.EventQuestion, Tool: "Bash"}) }, "question", true},
			{"answered: the tool's result", func() error {
				return f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventToolResult, Text: "ok"}}})
			}, "turn", true},
			{"a question, in the transcript", func() error {
				return f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventQuestion}}})
			}, "question", true},
			{"the Turn over", func() error { f.o.TurnEnded(s.ID); return nil }, "", true},
		}
		for _, tt := range tests {
			if err := tt.do(); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if got := f.o.Activity(s.ID); got != tt.want {
				t.Errorf("%s: activity %q, want %q", tt.name, got, tt.want)
			}
			var changed bool
		drain:
			for {
				select {
				case u := <-all:
					if u.Event != nil || u.ID != s.ID {
						t.Fatalf("%s: the list got %+v, want only changes of %s", tt.name, u, s.ID)
					}
					changed = true
				case <-time.After(50 * time.Millisecond):
					break drain
				}
			}
			if changed != tt.change {
				t.Errorf("%s: the list told of a change: %v, want %v", tt.name, changed, tt.change)
			}
		}
	})
}

// TestATurnThatEndsWhileItsPromptIsRecordedLetsTheNextGo: a Turn can end
// (the Stop hook) while the Hub is still writing down that its prompt was
// taken. The next prompt goes all the same, not at the next event that
// happens to look at the queue. The window is the store write's, so each
// round ends the Turn as soon as the Turn shows begun.
func TestATurnThatEndsWhileItsPromptIsRecordedLetsTheNextGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		f.runner.holdDeliveries()
		s, _ := f.active("round 0")
		for i := 1; i <= 30; i++ {
			next := fmt.Sprintf("round %d", i)
			if _, err := f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: next}); err != nil {
				t.Fatal(err)
			}
			go f.o.Accepted(s.ID)
			for f.o.Activity(s.ID) != "turn" {
				runtime.Gosched()
			}
			f.o.TurnEnded(s.ID)
			if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != next {
				t.Fatalf("typed %q after round %d's Turn, want %q", d.deliver.Text, i-1, next)
			}
		}
	})
}

// logged sends the Owner's log to buf as well as the test's.
func logged(t *testing.T, buf *testkit.Buffer) func(*Options) {
	return func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logTo{t}, buf), nil))
	}
}

// waitFault waits for the Owner to name faults, and returns them.
func (f *fixture) waitFault() []string {
	f.t.Helper()
	var got []string
	testenv.Eventually(f.t, testenv.WaitShort, "a fault named", func() bool {
		got = f.expectFaults()
		return len(got) > 0
	})
	return got
}

// TestAQueueLeftWaitingOnNothingIsNamedAFault: a prompt queued that no
// path of the queue's sends (here, one the store has that the Owner was
// never told of), in a Session between Turns with nothing on its way, is
// a fault: the alarm names it once, within about twice DeliveryDeadline,
// logged with the run's machines and their last moves, and sends nothing
// (a repair would hide the bug that left it so).
func TestAQueueLeftWaitingOnNothingIsNamedAFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log testkit.Buffer
		f := newFixture(t, logged(t, &log))
		f.expectFaults()
		ctx := context.Background()
		// The Runner's answer to the first delivery never comes: the hook alone
		// tells of it, and no answer arriving after the prompt below is stored
		// runs the queue's own dispatch.
		f.runner.holdDeliveries()
		s, _ := f.active("first")
		f.o.Accepted(s.ID)
		f.o.TurnEnded(s.ID)
		if _, err := f.st.Prompts.EnqueuePrompt(ctx, f.o.queue.sealPrompt(store.Prompt{SessionID: s.ID, AuthorID: f.user.ID, Text: "left behind"})); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if got := f.waitFault(); len(got) != 1 || got[0] != faultQueue {
			t.Fatalf("faults named: %q, want one %q", got, faultQueue)
		}
		if took := time.Since(start); took > 2*f.o.opts.DeliveryDeadline+time.Second {
			t.Errorf("named after %s, want within about %s", took, 2*f.o.opts.DeliveryDeadline)
		}
		f.runner.quiet(3 * f.o.opts.DeliveryDeadline)
		if got := f.expectFaults(); len(got) != 1 {
			t.Errorf("faults named: %q, want the one, once", got)
		}
		for _, want := range []string{"session fault: " + faultQueue, "run=idle", "delivery=queued", "turn -> idle (the Turn ended)", "delivery_moves="} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("the log does not say %q:\n%s", want, log.String())
			}
		}
	})
}

// TestATurnUnheardForFiveDeadlinesIsNamedOnce: a Turn the Hub was told
// began (by the Runner's reply or the hook, whichever came first) and
// hears nothing more of holds the queue; past turnQuiet DeliveryDeadlines
// the alarm names it once, with who told of the Turn. It sends nothing:
// the Turn may yet end, and then the next prompt goes.
func TestATurnUnheardForFiveDeadlinesIsNamedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log testkit.Buffer
		f := newFixture(t, logged(t, &log))
		f.expectFaults()
		ctx := context.Background()
		s, _ := f.active("first")
		f.o.Accepted(s.ID)
		if _, err := f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: "next"}); err != nil {
			t.Fatal(err)
		}
		if got := f.waitFault(); len(got) != 1 || got[0] != faultTurn {
			t.Fatalf("faults named: %q, want one %q", got, faultTurn)
		}
		// Unraised, the sweep would name it again a deadline after it looked.
		f.runner.quiet(3 * f.o.opts.DeliveryDeadline)
		if got := f.expectFaults(); len(got) != 1 {
			t.Errorf("faults named: %q, want one for the Turn", got)
		}
		if !strings.Contains(log.String(), "as the hook told") && !strings.Contains(log.String(), "as the reply told") {
			t.Errorf("the log does not name who told of the Turn:\n%s", log.String())
		}
		f.o.TurnEnded(s.ID)
		if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "next" {
			t.Fatalf("typed %q, want next", d.deliver.Text)
		}
	})
}
