package store

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/errdefs"
)

// TestAForkIsRecordedAsleepWithItsParentsSettingsAndLink: a fork has its
// parent's Repo, Creator, Runner, model, effort and Environment version,
// is Asleep in no line, carries the conversation's offsets, and is listed
// as the parent's fork; a fork of an unknown Session records nothing.
func TestAForkIsRecordedAsleepWithItsParentsSettingsAndLink(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		parent := moreSessions(t, s, 1)[0]
		must(t, s.Sessions.UpdateSession(ctx, parent.ID, "t", "opus", "high"))
		must(t, s.Environments.SetSessionEnvironment(ctx, parent.ID, 3))
		parent, _ = s.Sessions.SessionByID(ctx, parent.ID)
		id := uuid.NewString()
		fork, err := s.Sessions.CreateFork(ctx, parent, id, "fork of t", 2, map[string]int64{id + ".jsonl": 512})
		must(t, err)
		if fork.ID != id || fork.State != Asleep || fork.Place != 0 || !fork.Conversation || fork.RepoID != parent.RepoID ||
			fork.CreatorID != parent.CreatorID || fork.RunnerID != parent.RunnerID || fork.Model != "opus" || fork.Effort != "high" {
			t.Errorf("got %+v, want an Asleep copy of %+v's settings with its conversation", fork, parent)
		}
		if v, _ := s.Environments.SessionEnvironment(ctx, id); v != 3 {
			t.Errorf("got Environment version %d, want the parent's 3", v)
		}
		if off, _ := s.Sessions.TranscriptOffsets(ctx, id); off[id+".jsonl"] != 512 {
			t.Errorf("got offsets %v, want the copied conversation's end", off)
		}
		f, ok, err := s.Sessions.ForkOf(ctx, id)
		if err != nil || !ok || f.ParentID != parent.ID || f.Turn != 2 {
			t.Errorf("got %+v %v %v, want a fork of %s at Turn 2", f, ok, err, parent.ID)
		}
		if fs, err := s.Sessions.Forks(ctx, parent.ID); err != nil || len(fs) != 1 || fs[0].SessionID != id {
			t.Errorf("got forks %+v (%v), want %s", fs, err, id)
		}
		if _, ok, _ := s.Sessions.ForkOf(ctx, parent.ID); ok {
			t.Errorf("the parent: got a fork, want none")
		}
		gone := parent
		gone.ID = uuid.NewString()
		other := uuid.NewString()
		if _, err := s.Sessions.CreateFork(ctx, gone, other, "x", 0, nil); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("a fork of an unknown Session: got %v, want ErrNotFound", err)
		}
		if _, err := s.Sessions.SessionByID(ctx, other); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("a refused fork left a Session behind: %v", err)
		}
	})
}

// TestLineageReadsAnAttemptsSetAndItsForkInOneQuery: Lineage is what
// AttemptSetOf and ForkOf say, together: a Session with neither, an
// attempt, a fork, a fork that is an attempt too, and an unknown id (no
// error: nothing to show).
func TestLineageReadsAnAttemptsSetAndItsForkInOneQuery(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		ss := moreSessions(t, s, 2)
		set, err := s.Attempts.CreateAttemptSet(ctx, AttemptSet{CreatorID: ss[0].CreatorID, RepoID: ss[0].RepoID, Title: "t"})
		must(t, err)
		must(t, s.Attempts.AddAttempt(ctx, set.ID, 1, ss[0].ID))
		fork, err := s.Sessions.CreateFork(ctx, ss[0], uuid.NewString(), "fork", 3, nil)
		must(t, err)
		must(t, s.Attempts.AddAttempt(ctx, set.ID, 2, fork.ID))
		plain, err := s.Sessions.CreateFork(ctx, ss[1], uuid.NewString(), "fork", 1, nil)
		must(t, err)
		for _, c := range []struct {
			id, set, parent string
			turn            int
		}{{ss[1].ID, "", "", 0}, {ss[0].ID, set.ID, "", 0}, {fork.ID, set.ID, ss[0].ID, 3}, {plain.ID, "", ss[1].ID, 1}, {uuid.NewString(), "", "", 0}} {
			gotSet, f, ok, err := s.Sessions.Lineage(ctx, c.id)
			if err != nil || gotSet != c.set || ok != (c.parent != "") || f.ParentID != c.parent || f.Turn != c.turn || (ok && f.SessionID != c.id) {
				t.Errorf("Lineage(%s): got set %q, fork %+v %v, %v; want set %q, parent %q at Turn %d", c.id, gotSet, f, ok, err, c.set, c.parent, c.turn)
			}
			if ok {
				if want, _, _ := s.Sessions.ForkOf(ctx, c.id); !want.CreatedAt.Equal(f.CreatedAt) {
					t.Errorf("Lineage(%s): fork made at %v, ForkOf says %v", c.id, f.CreatedAt, want.CreatedAt)
				}
			}
		}
	})
}
