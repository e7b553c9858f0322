package session

import (
	"context"
	"errors"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

var allStates = []store.SessionState{Starting, Active, Frozen, Asleep, Failed, Archived}

// TestTheTransitionTable: exactly the moves the table lists are allowed;
// every other is an ErrConflict that names both states.
func TestTheTransitionTable(t *testing.T) {
	allowed := map[[2]store.SessionState]bool{
		{Starting, Active}: true, {Starting, Frozen}: true, {Starting, Asleep}: true, {Starting, Failed}: true,
		{Active, Frozen}: true, {Active, Asleep}: true, {Active, Failed}: true,
		{Frozen, Active}: true, {Frozen, Asleep}: true, {Frozen, Failed}: true,
		{Asleep, Starting}: true, {Asleep, Failed}: true, {Asleep, Archived}: true,
		{Failed, Starting}: true, {Failed, Archived}: true,
		{Archived, Asleep}: true,
	}
	for _, from := range allStates {
		for _, to := range allStates {
			err := checkMove(from, to)
			if allowed[[2]store.SessionState{from, to}] {
				if err != nil {
					t.Errorf("%s -> %s: %v, want allowed", from, to, err)
				}
				continue
			}
			if !errors.Is(err, errdefs.ErrConflict) {
				t.Errorf("%s -> %s: err = %v, want a conflict", from, to, err)
			}
		}
	}
}

// TestAnIllegalMoveChangesNothing: asking an Active Session to wake, or an
// Asleep one to restart or sleep, is refused and leaves it as it was.
func TestAnIllegalMoveChangesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := f.active("hello")
	if err := f.o.Wake(ctx, s.ID, "test"); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("waking an Active Session: err = %v, want a conflict", err)
	}
	if err := f.o.Sleep(ctx, s.ID, "test"); err != nil {
		t.Fatal(err)
	}
	f.runner.next("session.stop")
	before := f.session(s.ID)
	for name, try := range map[string]func() error{
		"restart": func() error { return f.o.Restart(ctx, s.ID, "test") },
		"sleep":   func() error { return f.o.Sleep(ctx, s.ID, "test") },
		"stop":    func() error { return f.o.StopTurn(ctx, s.ID) },
	} {
		if err := try(); !errors.Is(err, errdefs.ErrConflict) {
			t.Errorf("%s of an Asleep Session: err = %v, want a conflict", name, err)
		}
	}
	if after := f.session(s.ID); after.State != Asleep || after.StateDetail != before.StateDetail {
		t.Fatalf("refused moves changed the Session: %s %q, was %s %q", after.State, after.StateDetail, before.State, before.StateDetail)
	}
	if err := f.st.MoveSession(ctx, s.ID, Active, Asleep, "", false); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("the store moved a Session from a state it is not in: %v", err)
	}
}

// TestEveryMoveLeavesAHistoryLine: each change of state says why in the
// Session's history.
func TestEveryMoveLeavesAHistoryLine(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := f.active("hello")
	f.o.Accepted(s.ID)
	if err := f.o.Sleep(ctx, s.ID, "its Creator put it to sleep"); err != nil {
		t.Fatal(err)
	}
	f.runner.next("session.stop")
	notes := f.events(s.ID, "note")
	want := []string{
		"Awake: Claude Code is up.",
		"Asleep: its Creator put it to sleep, mid-Turn: the Turn was cut. The prompt it was on goes back to the head of the queue, since Claude Code never wrote it down.",
	}
	if len(notes) != len(want) {
		t.Fatalf("history = %q, want %q", notes, want)
	}
	for i := range want {
		if notes[i] != want[i] {
			t.Errorf("history line %d = %q, want %q", i, notes[i], want[i])
		}
	}
}
