package store

import (
	"context"
	"testing"
)

// TestAnAttemptSetIsReadyOnceWhenEveryAttemptIs: a set is ready when the
// last of its attempts is, or has failed without; marking an attempt
// again, or the same set from a store opened anew (a Hub restart), never
// makes it ready a second time.
func TestAnAttemptSetIsReadyOnceWhenEveryAttemptIs(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, source := open(t)
		ctx := context.Background()
		ss := moreSessions(t, s, 3)
		set, err := s.Attempts.CreateAttemptSet(ctx, AttemptSet{CreatorID: ss[0].CreatorID, RepoID: ss[0].RepoID, Title: "t"})
		must(t, err)
		for i, x := range ss {
			must(t, s.Attempts.AddAttempt(ctx, set.ID, i+1, x.ID))
		}
		must(t, s.Sessions.MoveSession(ctx, ss[2].ID, ss[2].State, Failed, "its start failed", false))
		for _, step := range []struct {
			session string
			ready   bool
		}{{ss[0].ID, false}, {ss[0].ID, false}, {ss[1].ID, true}, {ss[1].ID, false}, {ss[0].ID, false}} {
			id, ready, err := s.Attempts.AttemptReady(ctx, step.session)
			if err != nil || id != set.ID || ready != step.ready {
				t.Fatalf("AttemptReady(%s): got %s %v %v, want %s %v", step.session, id, ready, err, set.ID, step.ready)
			}
		}
		again := openAt(t, source)
		if _, ready, err := again.Attempts.AttemptReady(ctx, ss[1].ID); err != nil || ready {
			t.Errorf("after a restart: got ready %v %v, want the set told no second time", ready, err)
		}
	})
}
