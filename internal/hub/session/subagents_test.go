package session

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// TestTheCreatorStopsARunningSubagent: a stop of a subagent the Events say
// runs reaches its Runner and is recorded once, nested under its Agent
// call, even when its start came without the call; the Turn runs on; one
// that ended, or never ran, is refused before the Runner is asked; those
// still running when the Session sleeps end interrupted, and an asleep
// Session stops none.
func TestTheCreatorStopsARunningSubagent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("start two helpers")
		f.o.Accepted(s.ID)
		events := func(evs ...protocol.Event) {
			t.Helper()
			if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: evs}); err != nil {
				t.Fatal(err)
			}
		}
		events(protocol.Event{Kind: protocol.EventSubagentStart, Agent: "a1", Parent: "toolu_a", Text: "general-purpose"},
			protocol.Event{Kind: protocol.EventSubagentStart, Agent: "a2", Text: "Explore"},
			protocol.Event{Kind: protocol.EventToolUse, Tool: "Bash", ToolID: "toolu_s", Agent: "a2", Parent: "toolu_b"})
		if err := f.o.StopSubagent(ctx, s.ID, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("a subagent that never ran: %v, want not found", err)
		}
		f.runner.quiet(50 * time.Millisecond)

		for range 2 {
			if err := f.o.StopSubagent(ctx, s.ID, "a1"); err != nil {
				t.Fatal(err)
			}
			if c := f.runner.next(protocol.TypeSessionStopSubagent); c.id != s.ID || c.agent != "a1" {
				t.Fatalf("the Runner was asked to stop %+v, want a1 of %s", c, s.ID)
			}
		}
		stops := f.eventsOf(s.ID, protocol.EventSubagentStop)
		if len(stops) != 1 || stops[0].Agent != "a1" || stops[0].Parent != "toolu_a" {
			t.Fatalf("recorded stops %+v, want one, for a1 under toolu_a", stops)
		}
		if got := f.o.Activity(s.ID); got != "turn" {
			t.Fatalf("activity after the stop = %q, want the Turn running on", got)
		}

		events(protocol.Event{Kind: protocol.EventSubagentEnd, Agent: "a1", Parent: "toolu_a", Reason: protocol.SubagentStopped})
		if err := f.o.StopSubagent(ctx, s.ID, "a1"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("a subagent that ended: %v, want not found", err)
		}
		if err := f.o.StopSubagent(ctx, s.ID, "a2"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStopSubagent)
		if stops := f.eventsOf(s.ID, protocol.EventSubagentStop); len(stops) != 2 || stops[1].Parent != "toolu_b" {
			t.Fatalf("recorded stops %+v, want a2's under the call its own Events named", stops)
		}

		if err := f.o.Sleep(ctx, s.ID, "its Creator put it to sleep"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStop)
		ends := f.eventsOf(s.ID, protocol.EventSubagentEnd)
		if len(ends) != 2 || ends[1].Agent != "a2" || ends[1].Reason != protocol.SubagentInterrupted || ends[1].Parent != "toolu_b" {
			t.Fatalf("ends %+v, want a1 stopped, then a2 interrupted by the sleep", ends)
		}
		if err := f.o.StopSubagent(ctx, s.ID, "a2"); !errors.Is(err, errdefs.ErrConflict) {
			t.Fatalf("a stop in an asleep Session: %v, want conflict", err)
		}
		f.runner.quiet(50 * time.Millisecond)
	})
}

// TestRunningSubagentsOutliveAHubRestart: a Hub that restarts takes the
// running subagents back from the store with the Session, so its Creator
// can still stop them.
func TestRunningSubagentsOutliveAHubRestart(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := f.active("start a helper")
	f.o.Accepted(s.ID)
	f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{
		{Kind: protocol.EventSubagentStart, Agent: "a1", Parent: "toolu_a", Text: "general-purpose"},
		{Kind: protocol.EventSubagentStart, Agent: "a2", Parent: "toolu_b", Text: "general-purpose"},
		{Kind: protocol.EventSubagentEnd, Agent: "a2", Parent: "toolu_b"},
	}})
	f.restartHub()
	f.o.RunnerBack(ctx, f.runnerID, []string{s.ID})
	f.waitState(s.ID, Active)
	if err := f.o.StopSubagent(ctx, s.ID, "a2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("the finished one after the restart: %v, want not found", err)
	}
	if err := f.o.StopSubagent(ctx, s.ID, "a1"); err != nil {
		t.Fatal(err)
	}
	f.runner.next(protocol.TypeSessionStopSubagent)
	if stops := f.eventsOf(s.ID, protocol.EventSubagentStop); len(stops) != 1 || stops[0].Parent != "toolu_a" {
		t.Fatalf("recorded stops %+v, want a1's under toolu_a", stops)
	}
}
