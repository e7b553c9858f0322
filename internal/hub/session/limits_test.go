package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// told records what Options.Limited is told, as a thread would be.
type told struct {
	mu   sync.Mutex
	said map[string][]string
}

func (t *told) limited(id, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.said[id] = append(t.said[id], text)
}

func (t *told) of(id string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.said[id]
}

// limitedFixture is a fixture whose Owner tells th of the limits it holds.
func limitedFixture(t *testing.T, tune ...func(*Options)) (*fixture, *told) {
	th := &told{said: map[string][]string{}}
	f := newFixture(t, append(tune, func(o *Options) { o.Limited = th.limited })...)
	return f, th
}

// createAs makes a Session of the fixture's Creator, triggered from GitHub
// or not; it does not wait for anything the Runner is sent.
func (f *fixture) createAs(triggered bool, text string) store.Session {
	f.t.Helper()
	s, err := f.o.Create(context.Background(), store.Session{RepoID: f.repo.ID, CreatorID: f.user.ID, RunnerID: f.runnerID, Title: "t", Triggered: triggered},
		store.Prompt{AuthorID: f.user.ID, Text: text})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// turn runs one Turn of an Active Session: the prompt on its way taken
// and recorded so, then the Turn's end.
func (f *fixture) turn(id string) {
	f.t.Helper()
	f.runner.next(protocol.TypeSessionDeliver)
	testenv.Eventually(f.t, testenv.WaitShort, "the Turn running, its prompt delivered", func() bool {
		return f.o.Activity(id) == "turn" && len(f.prompts(id)[store.Delivering]) == 0
	})
	f.o.TurnEnded(id)
}

func (f *fixture) prompt(id, text string) {
	f.t.Helper()
	if _, err := f.o.Prompt(context.Background(), f.session(id), store.Prompt{AuthorID: f.user.ID, Text: text}); err != nil {
		f.t.Fatal(err)
	}
}

// TestATriggeredSessionThatWouldRunA21stTurnSleepsSayingWhy: at the
// Repo's default limit of 20 Turns, the 21st prompt is never sent: the
// Session sleeps, its history and its thread say which limit and how to go
// on, and neither a wake nor another prompt gets past it until the Repo's
// limit is raised.
func TestATriggeredSessionThatWouldRunA21stTurnSleepsSayingWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, th := limitedFixture(t)
		ctx := context.Background()
		s := f.createAs(true, "turn 1")
		f.runner.next(protocol.TypeSessionStart)
		f.waitState(s.ID, Active)
		for i := 1; i <= 20; i++ {
			if i > 1 {
				f.prompt(s.ID, fmt.Sprintf("turn %d", i))
			}
			f.turn(s.ID)
		}
		if got := f.session(s.ID).Turns; got != 20 {
			t.Fatalf("turns = %d, want 20", got)
		}
		f.prompt(s.ID, "turn 21")
		f.runner.next(protocol.TypeSessionStop) // not a session.deliver
		f.waitState(s.ID, Asleep)
		var limits []string
		testenv.Eventually(t, testenv.WaitShort, "the limit in the history", func() bool {
			limits = f.events(s.ID, protocol.EventLimit)
			return len(limits) == 1
		})
		if !strings.Contains(limits[0], "limit of 20 Turns") || !strings.Contains(limits[0], "kndl repo edit") {
			t.Fatalf("limit event = %q, want the limit named and the way on", limits[0])
		}
		// The thread is told after the history: wait for it too.
		testenv.Eventually(t, testenv.WaitShort, "the thread told", func() bool { return len(th.of(s.ID)) > 0 })
		if said := th.of(s.ID); len(said) != 1 || said[0] != limits[0] {
			t.Fatalf("the thread was told %q, want the history's words once", said)
		}
		if q := f.prompts(s.ID); len(q[store.Queued]) != 1 {
			t.Fatalf("queue = %v, want the 21st prompt still queued", q)
		}

		// Neither a wake nor a prompt gets past it.
		if err := f.o.Wake(ctx, s.ID, "its Creator woke it"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "limit of 20 Turns") {
			t.Fatalf("wake = %v, want a conflict naming the limit", err)
		}
		f.prompt(s.ID, "turn 22")
		f.runner.quiet(100 * time.Millisecond)
		if st := f.session(s.ID).State; st != Asleep {
			t.Fatalf("state = %s, want asleep", st)
		}

		// Raised, it goes on with the prompt that waited.
		if err := f.st.Repos.SetRepoLimits(ctx, f.repo.ID, store.RepoLimits{MaxTurns: 21, MaxTurnHours: 2}); err != nil {
			t.Fatal(err)
		}
		if err := f.o.Wake(ctx, s.ID, "its limit was raised"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStart)
		if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "turn 21" {
			t.Fatalf("delivered %q, want the 21st", d.deliver.Text)
		}
	})
}

// TestASessionAPersonStartedHasNoTurnLimit: the Turn limits hold only what
// a trigger started, which runs unattended.
func TestASessionAPersonStartedHasNoTurnLimit(t *testing.T) {
	f, _ := limitedFixture(t)
	if err := f.st.Repos.SetRepoLimits(context.Background(), f.repo.ID, store.RepoLimits{MaxTurns: 1}); err != nil {
		t.Fatal(err)
	}
	s := f.createAs(false, "one")
	f.runner.next(protocol.TypeSessionStart)
	f.turn(s.ID)
	f.prompt(s.ID, "two")
	if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "two" {
		t.Fatalf("delivered %q, want two", d.deliver.Text)
	}
}

// TestATriggeredSessionIsCutAtItsTurnTimeLimitMidTurn: a single Turn has
// no other bound, so the Turn time limit cuts it where it is reached.
func TestATriggeredSessionIsCutAtItsTurnTimeLimitMidTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, th := limitedFixture(t)
		ctx := context.Background()
		limit := 300 * time.Millisecond
		if err := f.st.Repos.SetRepoLimits(ctx, f.repo.ID, store.RepoLimits{MaxTurns: 20, MaxTurnHours: limit.Hours()}); err != nil {
			t.Fatal(err)
		}
		// Before the clock starts (at the prompt sent), so took is at least
		// what the Hub counted, however late the test hears of the delivery.
		began := time.Now()
		s := f.createAs(true, "a long one")
		f.runner.next(protocol.TypeSessionStart)
		f.runner.next(protocol.TypeSessionDeliver)
		f.runner.next(protocol.TypeSessionStop) // no Turn end came: the Hub cut it
		if took := time.Since(began); took < limit-50*time.Millisecond {
			t.Fatalf("stopped after %s, before the limit of %s", took, limit)
		}
		s = f.waitState(s.ID, Asleep)
		if !strings.Contains(s.StateDetail, "mid-Turn") {
			t.Fatalf("detail %q: want the Turn cut", s.StateDetail)
		}
		testenv.Eventually(t, testenv.WaitShort, "the cut Turn's time counted", func() bool { return f.session(s.ID).TurnTime >= limit-50*time.Millisecond })
		testenv.Eventually(t, testenv.WaitShort, "the thread told", func() bool { return len(th.of(s.ID)) == 1 })
		if err := f.o.Wake(ctx, s.ID, "woken"); !errors.Is(err, errdefs.ErrConflict) {
			t.Fatalf("wake = %v, want refused at the limit", err)
		}
	})
}

// TestWithOneAwakeASecondSessionWaitsInLineAndStartsWhenTheFirstSleeps:
// HUB_MEMBER_MAX_AWAKE=1. A second start waits with place 1, a third with
// place 2; neither a wake nor a prompt gets it past the line; when the
// first sleeps, the first in line starts and the next moves up.
func TestWithOneAwakeASecondSessionWaitsInLineAndStartsWhenTheFirstSleeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _ := limitedFixture(t, func(o *Options) { o.MemberMaxAwake = 1 })
		ctx := context.Background()
		a, _ := f.active("a")
		b := f.createAs(false, "b")
		c := f.createAs(false, "c")
		f.runner.quiet(100 * time.Millisecond)
		if b.State != Asleep || b.Place != 1 || c.Place != 2 {
			t.Fatalf("b %s place %d, c place %d: want both asleep in line, 1 and 2", b.State, b.Place, c.Place)
		}
		if ev := f.events(b.ID, protocol.EventLimit); len(ev) != 1 || !strings.Contains(ev[0], "place 1") || !strings.Contains(ev[0], "HUB_MEMBER_MAX_AWAKE") {
			t.Fatalf("b's limit events = %q, want its place and the limit", ev)
		}
		if err := f.o.Wake(ctx, c.ID, "its Creator woke it"); err != nil {
			t.Fatalf("wake = %v, want it to wait, not fail", err)
		}
		f.prompt(c.ID, "c again")
		f.runner.quiet(100 * time.Millisecond)
		if c := f.session(c.ID); c.State != Asleep || c.Place != 2 || len(f.events(c.ID, protocol.EventLimit)) != 1 {
			t.Fatalf("c is %s at place %d: want it still second in line, said once", c.State, c.Place)
		}

		f.sleepThenStarts(a.ID, b.ID)
		f.waitState(b.ID, Active)
		if b, c := f.session(b.ID), f.session(c.ID); b.Place != 0 || c.Place != 1 || c.State != Asleep {
			t.Fatalf("b place %d, c %s place %d: want b out of line and c first", b.Place, c.State, c.Place)
		}
	})
}

// TestAMembersLineSurvivesAHubRestart: the line is in the store, so a
// restarted Hub keeps it, and wakes its first when a place frees.
func TestAMembersLineSurvivesAHubRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _ := limitedFixture(t, func(o *Options) { o.MemberMaxAwake = 1 })
		ctx := context.Background()
		a, _ := f.active("a")
		testenv.Eventually(t, testenv.WaitShort, "a's prompt delivered", func() bool { return len(f.prompts(a.ID)) == 0 })
		b := f.createAs(false, "b")
		f.restartHub()
		f.o.RunnerBack(ctx, f.runnerID, []string{a.ID})
		f.waitState(a.ID, Active)
		f.runner.quiet(100 * time.Millisecond)
		if b := f.session(b.ID); b.State != Asleep || b.Place != 1 {
			t.Fatalf("b is %s at place %d after the restart, want asleep at place 1", b.State, b.Place)
		}
		f.sleepThenStarts(a.ID, b.ID)
	})
}

// sleepThenStarts puts awake to sleep, and sees next, first in line, start.
func (f *fixture) sleepThenStarts(awake, next string) {
	f.t.Helper()
	if err := f.o.Sleep(context.Background(), awake, "its Creator put it to sleep"); err != nil {
		f.t.Fatal(err)
	}
	f.runner.next(protocol.TypeSessionStop)
	if st := f.runner.next(protocol.TypeSessionStart); st.id != next {
		f.t.Fatalf("started %s, want %s, the first in line", st.id, next)
	}
}

// TestOnlyTheHubMakesALimitEvent: a Runner's Event of kind limit is kept
// as a note, so what watches for the kind can trust it.
func TestOnlyTheHubMakesALimitEvent(t *testing.T) {
	f, _ := limitedFixture(t)
	s, _ := f.active("a")
	if err := f.o.Events(context.Background(), f.session(s.ID), protocol.SessionEvents{SessionID: s.ID,
		Events: []protocol.Event{{Kind: protocol.EventLimit, Text: "Limit reached: not really"}}}); err != nil {
		t.Fatal(err)
	}
	if got := f.events(s.ID, protocol.EventLimit); len(got) != 0 {
		t.Fatalf("limit events %q, want none from a Runner", got)
	}
	if got := f.events(s.ID, protocol.EventNote); !slices.Contains(got, "Limit reached: not really") {
		t.Fatalf("notes %q, want the Runner's words kept as one", got)
	}
}

// forgeries are what code in a Sandbox can make its Runner tell the Hub of
// a Turn it never ran: the mod's Stop hook posted to the relay's /mod/hook
// with its Session token (the Runner sends it on as Hook "stop"), the same
// with a UserPromptSubmit before it, and a turn_end written into its
// transcript (an interrupt, which fires no hook).
var forgeries = []struct {
	name string
	told []protocol.SessionEvents
}{
	{"a Stop hook", []protocol.SessionEvents{{Hook: protocol.HookStop}}},
	{"a UserPromptSubmit hook and a Stop", []protocol.SessionEvents{{Hook: protocol.HookPromptSubmit}, {Hook: protocol.HookStop}}},
	{"a turn_end in the transcript", []protocol.SessionEvents{{Events: []protocol.Event{
		{Kind: protocol.EventTurnStart}, {Kind: protocol.EventTurnEnd, Reason: "interrupted"}}}}},
}

// forge tells the Hub what a Sandbox can forge of a Turn's end.
func (f *fixture) forge(id string, told []protocol.SessionEvents) {
	f.t.Helper()
	for _, m := range told {
		m.SessionID = id
		if err := f.o.Events(context.Background(), f.session(id), m); err != nil {
			f.t.Fatal(err)
		}
	}
}

// TestAForgedTurnEndNeitherStopsTheHoursNorCountsAsTheLimit: a triggered
// Session's hours run from the prompt the Hub sent, whatever the Sandbox
// tells of its Turns: a forged end, however often, leaves the cut armed,
// and the Session sleeps where its Repo's hours run out.
func TestAForgedTurnEndNeitherStopsTheHoursNorCountsAsTheLimit(t *testing.T) {
	for _, fg := range forgeries {
		t.Run(fg.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, th := limitedFixture(t)
				limit := 400 * time.Millisecond
				if err := f.st.Repos.SetRepoLimits(context.Background(), f.repo.ID, store.RepoLimits{MaxTurns: 20, MaxTurnHours: limit.Hours()}); err != nil {
					t.Fatal(err)
				}
				s := f.createAs(true, "a long one")
				f.runner.next(protocol.TypeSessionStart)
				f.runner.next(protocol.TypeSessionDeliver)
				began := time.Now()
				testenv.Eventually(t, testenv.WaitShort, "the Turn running, its prompt taken", func() bool { return f.o.Activity(s.ID) == "turn" })
				f.forge(s.ID, fg.told)
				f.forge(s.ID, fg.told)
				f.runner.next(protocol.TypeSessionStop) // the Hub cut it at its hours
				if took := time.Since(began); took < limit-50*time.Millisecond {
					t.Fatalf("stopped after %s, before the limit of %s", took, limit)
				}
				f.waitState(s.ID, Asleep)
				testenv.Eventually(t, testenv.WaitShort, "the thread told", func() bool { return len(th.of(s.ID)) == 1 })
				if got := th.of(s.ID)[0]; !strings.Contains(got, "hours") {
					t.Fatalf("the thread was told %q, want the hours named", got)
				}
				if got := f.session(s.ID).TurnTime; got < limit-50*time.Millisecond {
					t.Fatalf("time counted %s, want at least the limit %s", got, limit)
				}
				if got := f.session(s.ID).Turns; got != 1 {
					t.Fatalf("turns = %d, want 1: the one prompt sent", got)
				}
			})
		})
	}
}

// TestAForgedTurnEndDoesNotKeepASessionAwake: the idle clock runs from
// what the Hub did (a prompt sent, queued, a wake), not from what the
// Sandbox tells: a Session whose Sandbox forges a Turn's end, or a Turn,
// again and again still sleeps once it has been idle for Idle.
func TestAForgedTurnEndDoesNotKeepASessionAwake(t *testing.T) {
	for _, fg := range forgeries {
		t.Run(fg.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, func(o *Options) { o.Idle = 300 * time.Millisecond })
				s, _ := f.active("one")
				f.o.Events(context.Background(), f.session(s.ID), protocol.SessionEvents{SessionID: s.ID, Events: []protocol.Event{{Kind: protocol.EventPrompt}}})
				f.o.TurnEnded(s.ID) // the real end
				ended := time.Now()
				testenv.Eventually(t, testenv.WaitShort, "the Session asleep though its Sandbox forged Turns", func() bool {
					if f.session(s.ID).State == Asleep {
						return true
					}
					f.forge(s.ID, fg.told)
					return false
				})
				if took := time.Since(ended); took > 5*f.o.opts.Idle {
					t.Fatalf("slept %s after its last Turn, want about Idle (%s)", took, f.o.opts.Idle)
				}
				if got := f.session(s.ID).StateDetail; !strings.Contains(got, "idle") {
					t.Fatalf("slept saying %q, want idle", got)
				}
			})
		})
	}
}

// TestAHubRestartKeepsTheHoursSoFar: the time a Session was awake counts
// toward its hours across a Hub restart, as the Hub closes.
func TestAHubRestartKeepsTheHoursSoFar(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _ := limitedFixture(t)
		s := f.createAs(true, "one")
		f.runner.next(protocol.TypeSessionStart)
		f.runner.next(protocol.TypeSessionDeliver)
		sent := time.Now()
		const awhile = 150 * time.Millisecond
		testenv.Eventually(t, testenv.WaitShort, "a while awake", func() bool { return time.Since(sent) > awhile })
		f.restartHub()
		if got := f.session(s.ID).TurnTime; got < awhile {
			t.Fatalf("time awake after the restart %s, want at least %s", got, awhile)
		}
	})
}

// TestATurnItsCreatorTypedInTheTerminalKeepsTheSessionAwake: the Hub sees
// the Creator type in the terminal, so the Turn the hook then says begins
// is theirs, and keeps the Session awake until it ends, as one the Hub
// sent a prompt for does; then the idle clock runs.
func TestATurnItsCreatorTypedInTheTerminalKeepsTheSessionAwake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.Idle = 200 * time.Millisecond })
		s, _ := f.active("one")
		testenv.Eventually(t, testenv.WaitShort, "the Turn running, its prompt taken", func() bool {
			return f.o.Activity(s.ID) == "turn" && len(f.prompts(s.ID)[store.Delivering]) == 0
		})
		f.o.TurnEnded(s.ID)
		f.o.Typed(s.ID)
		f.o.Accepted(s.ID)
		f.runner.quiet(3 * f.o.opts.Idle) // the typed Turn runs
		f.o.TurnEnded(s.ID)
		f.runner.next(protocol.TypeSessionStop)
		if got := f.waitState(s.ID, Asleep).StateDetail; !strings.Contains(got, "idle") {
			t.Fatalf("slept saying %q, want idle", got)
		}
	})
}
