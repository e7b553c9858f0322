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
	if err := f.st.Sessions.MoveSession(ctx, s.ID, Active, Asleep, "", false); !errors.Is(err, errdefs.ErrConflict) {
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

var allPhases = []phase{down, starting, idle, turn, asking, away, stopping, archiving, restoring}

// TestTheRunTransitionTable walks every pair of run phases: exactly the
// moves the table lists happen through to, every other changes nothing;
// enter makes any move, and names one the table does not list.
func TestTheRunTransitionTable(t *testing.T) {
	allowed := map[[2]phase]bool{
		{down, starting}: true, {down, away}: true, {down, archiving}: true, {down, restoring}: true,
		{starting, idle}: true, {starting, away}: true, {starting, down}: true,
		{idle, turn}: true, {idle, away}: true, {idle, stopping}: true, {idle, down}: true,
		{turn, asking}: true, {turn, idle}: true, {turn, away}: true, {turn, stopping}: true, {turn, down}: true,
		{asking, turn}: true, {asking, idle}: true, {asking, away}: true, {asking, stopping}: true, {asking, down}: true,
		{away, idle}: true, {away, stopping}: true, {away, down}: true,
		{stopping, down}: true, {stopping, idle}: true, {stopping, turn}: true, {stopping, asking}: true, {stopping, away}: true,
		{archiving, down}: true,
		{restoring, down}: true,
	}
	for _, from := range allPhases {
		for _, to := range allPhases {
			want := from == to || allowed[[2]phase{from, to}]
			r := run{phase: from}
			switch moved := r.to(to, "test"); {
			case moved != want:
				t.Errorf("%s -> %s: moved %v, want %v", from, to, moved, want)
			case want && r.phase != to:
				t.Errorf("%s -> %s: is %s after the move", from, to, r.phase)
			case !want && r.phase != from:
				t.Errorf("%s -> %s refused, yet it is %s", from, to, r.phase)
			}
			r = run{phase: from}
			if err := r.enter(to, "test"); (err == nil) != want || r.phase != to {
				t.Errorf("%s -> %s entered: err %v, phase %s; want it %s, named a fault: %v", from, to, err, r.phase, to, !want)
			}
		}
	}
}

var allPromptStates = []store.PromptState{store.Queued, store.Delivering, store.Delivered, store.Cancelled}

// TestThePromptTransitionTable walks every pair of prompt states: exactly
// the moves listed are allowed, every other is an ErrConflict.
func TestThePromptTransitionTable(t *testing.T) {
	allowed := map[[2]store.PromptState]bool{
		{store.Queued, store.Delivering}: true, {store.Queued, store.Cancelled}: true,
		{store.Delivering, store.Delivered}: true, {store.Delivering, store.Queued}: true,
		{store.Delivered, store.Queued}: true,
	}
	for _, from := range allPromptStates {
		for _, to := range allPromptStates {
			err := checkPromptMove(from, to)
			if allowed[[2]store.PromptState{from, to}] {
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

// TestAPromptIsCancelledAlongItsTable: cancelling goes through the table
// and the store's compare-and-set: a queued prompt is cancelled; one on
// its way, or already cancelled, is a conflict; one of another Session
// is not found; a move off the table changes nothing in the store.
func TestAPromptIsCancelledAlongItsTable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.runner.holdDeliveries()
	s, d := f.active("on its way")
	other := f.create("another's")
	p, err := f.o.Prompt(ctx, f.session(s.ID), store.Prompt{AuthorID: f.user.ID, Text: "queued"})
	if err != nil {
		t.Fatal(err)
	}
	state := func(id string) store.PromptState {
		t.Helper()
		got, err := f.st.Prompts.PromptByID(ctx, s.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		return got.State
	}
	if err := setPrompt(ctx, f.st.Prompts, p.ID, store.Queued, store.Delivered); !errors.Is(err, errdefs.ErrConflict) || state(p.ID) != store.Queued {
		t.Fatalf("queued -> delivered: err = %v, state %s; want a conflict, still queued", err, state(p.ID))
	}
	if err := f.o.EditPrompt(ctx, other.ID, p.ID, ""); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("cancelled through another Session: err = %v, want not found", err)
	}
	if err := f.o.EditPrompt(ctx, s.ID, p.ID, ""); err != nil || state(p.ID) != store.Cancelled {
		t.Fatalf("cancel a queued prompt: err = %v, state %s; want cancelled", err, state(p.ID))
	}
	for name, id := range map[string]string{"cancelled": p.ID, "on its way": d.deliver.PromptID} {
		before := state(id)
		if err := f.o.EditPrompt(ctx, s.ID, id, ""); !errors.Is(err, errdefs.ErrConflict) || state(id) != before {
			t.Errorf("cancel one %s: err = %v, state %s; want a conflict, still %s", name, err, state(id), before)
		}
	}
}
