package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// TestArchivingAnAwakeSessionSleepsItFirst: the Runner is told to stop it,
// then to archive it; it is Archived, says so in its history, and refuses a
// prompt until it is restored.
func TestArchivingAnAwakeSessionSleepsItFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		got := f.archived("hello")
		if got.State != Archived || got.ArchivedAt.IsZero() {
			t.Fatalf("after the archive: %s, archived at %v", got.State, got.ArchivedAt)
		}
		notes := strings.Join(f.events(got.ID, protocol.EventNote), "\n")
		for _, want := range []string{"Asleep: its Creator archived it", "Archived: its Creator archived it."} {
			if !strings.Contains(notes, want) {
				t.Errorf("history lacks %q:\n%s", want, notes)
			}
		}
		_, err := f.o.Prompt(context.Background(), got, store.Prompt{AuthorID: f.user.ID, Text: "more"})
		if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "restore it first") {
			t.Fatalf("a prompt to an archived Session: %v, want a conflict saying to restore it first", err)
		}
		f.runner.quiet(50 * time.Millisecond)
	})
}

// TestARestoredSessionIsAsleepAndAPromptWakesItIntoItsConversation: a
// restore asks the Runner and leaves the Session Asleep, no longer
// archived; a prompt then wakes it resuming the conversation Claude Code
// wrote down, from where the Hub has its transcript.
func TestARestoredSessionIsAsleepAndAPromptWakesItIntoItsConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("hello")
		f.o.Accepted(s.ID)
		f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventPrompt, Text: "hello"}}, Offsets: map[string]int64{s.ID + ".jsonl": 10}})
		f.o.TurnEnded(s.ID)
		if err := f.o.Archive(ctx, s.ID, "its Creator archived it"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionStop)
		f.runner.next(protocol.TypeSessionArchive)

		if err := f.o.Restore(ctx, s.ID, "its Creator restored it"); err != nil {
			t.Fatal(err)
		}
		f.runner.next(protocol.TypeSessionRestore)
		got := f.session(s.ID)
		if got.State != Asleep || !got.ArchivedAt.IsZero() || got.StateDetail != "its Creator restored it" {
			t.Fatalf("after the restore: %s %q, archived at %v; want Asleep and no longer archived", got.State, got.StateDetail, got.ArchivedAt)
		}
		f.runner.quiet(50 * time.Millisecond) // Asleep: nothing starts it yet
		if _, err := f.o.Prompt(ctx, got, store.Prompt{AuthorID: f.user.ID, Text: "again"}); err != nil {
			t.Fatal(err)
		}
		start := f.runner.next(protocol.TypeSessionStart).start
		if !start.Resume || start.Offsets[s.ID+".jsonl"] != 10 {
			t.Fatalf("the wake after the restore: resume %v, offsets %v; want the same conversation from offset 10", start.Resume, start.Offsets)
		}
		f.waitState(s.ID, Active)
		if d := f.runner.next(protocol.TypeSessionDeliver); d.deliver.Text != "again" {
			t.Fatalf("typed %q, want the new prompt", d.deliver.Text)
		}
	})
}

// TestARestoreAfterThePurgeIsRefusedAndItStaysArchived: once its Runner
// deleted its disks and Workspace, the restore says so and changes
// nothing.
func TestARestoreAfterThePurgeIsRefusedAndItStaysArchived(t *testing.T) {
	f := newFixture(t)
	before := f.archived("hello")
	f.runner.purge(before.ID)
	err := f.o.Restore(context.Background(), before.ID, "its Creator restored it")
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "Workspace is gone") {
		t.Fatalf("restore after the purge: %v, want a conflict saying the Workspace is gone", err)
	}
	f.runner.next(protocol.TypeSessionRestore)
	if got := f.session(before.ID); got.State != Archived || got.StateDetail != before.StateDetail || !got.ArchivedAt.Equal(before.ArchivedAt) {
		t.Fatalf("after a refused restore: %s %q at %v, was %s %q at %v", got.State, got.StateDetail, got.ArchivedAt, before.State, before.StateDetail, before.ArchivedAt)
	}
}

// TestAFailedSessionIsArchivedWithoutASleep: no Claude Code runs, so the
// Runner is only told to archive it.
func TestAFailedSessionIsArchivedWithoutASleep(t *testing.T) {
	f := newFixture(t)
	f.runner.setStartErr(errors.New("clone: repository not found"))
	s := f.create("hello")
	f.waitState(s.ID, Failed)
	if err := f.o.Archive(context.Background(), s.ID, "its Creator archived it"); err != nil {
		t.Fatal(err)
	}
	f.runner.next(protocol.TypeSessionArchive)
	f.waitState(s.ID, Archived)
}

// TestIllegalArchivesAndRestoresAreRefused: each is an error of its class
// that sends the Runner nothing and leaves the Session as it was.
func TestIllegalArchivesAndRestoresAreRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	active, _ := f.active("one")
	f.o.Accepted(active.ID) // taken: no delivery is typed again meanwhile
	asleep, _ := f.active("two")
	if err := f.o.Sleep(ctx, asleep.ID, "test"); err != nil {
		t.Fatal(err)
	}
	f.runner.next(protocol.TypeSessionStop)
	archived := f.archived("three")

	tests := []struct {
		name      string
		try       func() error
		id        string
		class     error
		says      string
		connected bool
	}{
		{"restore an active one", func() error { return f.o.Restore(ctx, active.ID, "test") }, active.ID, errdefs.ErrConflict, "not archived", true},
		{"restore an asleep one", func() error { return f.o.Restore(ctx, asleep.ID, "test") }, asleep.ID, errdefs.ErrConflict, "not archived", true},
		{"archive an archived one", func() error { return f.o.Archive(ctx, archived.ID, "test") }, archived.ID, errdefs.ErrConflict, "already archived", true},
		{"archive with its Runner away", func() error { return f.o.Archive(ctx, active.ID, "test") }, active.ID, errdefs.ErrUnavailable, "Runner is not connected", false},
		{"restore with its Runner away", func() error { return f.o.Restore(ctx, archived.ID, "test") }, archived.ID, errdefs.ErrUnavailable, "Runner is not connected", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.connected {
				f.runners.set(f.runnerID, nil)
				defer f.runners.set(f.runnerID, f.runner)
			}
			before := f.session(tc.id)
			err := tc.try()
			if !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want %v saying %q", err, tc.class, tc.says)
			}
			f.runner.quiet(20 * time.Millisecond)
			if got := f.session(tc.id); got.State != before.State || got.StateDetail != before.StateDetail {
				t.Fatalf("the refusal changed the Session: %s %q, was %s %q", got.State, got.StateDetail, before.State, before.StateDetail)
			}
		})
	}
}

// TestASessionOfARemovedRunnerIsArchivedAtOnceAndNeverRestored: nothing
// of it is left to keep, so the archive asks no Runner, and a restore says
// why it cannot be.
func TestASessionOfARemovedRunnerIsArchivedAtOnceAndNeverRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("hello")
		if err := f.st.Runners.RevokeRunner(ctx, f.runnerID); err != nil {
			t.Fatal(err)
		}
		f.o.RunnerRemoved(ctx, f.runnerID, RunnerRevoked)
		f.waitState(s.ID, Failed)
		if err := f.o.Archive(ctx, s.ID, "its Creator archived it"); err != nil {
			t.Fatal(err)
		}
		f.runner.quiet(50 * time.Millisecond)
		if got := f.session(s.ID); got.State != Archived || !strings.Contains(got.StateDetail, "nothing of it is kept") {
			t.Fatalf("after the archive: %s %q", got.State, got.StateDetail)
		}
		if err := f.o.Restore(ctx, s.ID, "test"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), removedWhy) {
			t.Fatalf("restore: %v, want a conflict saying %q", err, removedWhy)
		}
	})
}
