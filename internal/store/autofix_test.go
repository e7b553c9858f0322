package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// TestTheAutoFixCountPerPullRequestGoesUpByOneForEachFailure: a Repo's
// auto-fix is off, at most 3, until set; each failure of a pull request
// counts one more for it alone, the count its Repo's most is held to.
func TestTheAutoFixCountPerPullRequestGoesUpByOneForEachFailure(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, _ := devSession(t, s)
		if a, err := s.RepoAutoFix(ctx, x.RepoID); err != nil || a != (AutoFix{Max: DefaultAutoFixMax}) {
			t.Fatalf("a new Repo's auto-fix: %+v, %v; want off, at most %d", a, err, DefaultAutoFixMax)
		}
		want := AutoFix{CI: true, Reviews: false, Max: 2}
		if err := s.SetRepoAutoFix(ctx, x.RepoID, want); err != nil {
			t.Fatal(err)
		}
		if a, err := s.RepoAutoFix(ctx, x.RepoID); err != nil || a != want {
			t.Fatalf("the Repo's auto-fix: %+v, %v; want %+v", a, err, want)
		}
		if _, err := s.RepoAutoFix(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("no such Repo's auto-fix: %v, want ErrNotFound", err)
		}
		count := func(repo string, pull, want int) {
			t.Helper()
			if n, err := s.CountFix(ctx, repo, pull); err != nil || n != want {
				t.Fatalf("%s#%d's failures: %d, %v; want %d", repo, pull, n, err, want)
			}
		}
		count("o/r", 7, 1)
		count("o/r", 7, 2)
		count("o/r", 8, 1)
		count("o/other", 7, 1)
		count("o/r", 7, 3) // past its most of 2: the caller sends no more
	})
}

// TestAPullRequestsBranchFindsTheSessionsThatPushedIt: the Sessions not
// archived that pushed a branch, newest push first, with their Repo.
func TestAPullRequestsBranchFindsTheSessionsThatPushedIt(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		xs := moreSessions(t, s, 3)
		at := time.UnixMilli(1700000000000)
		for i, x := range xs {
			if _, _, err := s.AddSessionBranches(ctx, x.ID, []string{"kndl/fix", "kndl/other"}, at.Add(time.Duration(i)*time.Second), 5); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.MoveSession(ctx, xs[2].ID, Starting, Archived, "", false); err != nil {
			t.Fatal(err)
		}
		bs, err := s.BranchSessions(ctx, "kndl/fix")
		if err != nil || len(bs) != 2 || bs[0].SessionID != xs[1].ID || bs[1].SessionID != xs[0].ID ||
			bs[0].RepoURL != xs[1].RepoURL || bs[0].Branch != "kndl/fix" || !bs[0].PushedAt.Equal(at.Add(time.Second)) {
			t.Fatalf("the branch's Sessions: %+v, %v; want the second's, then the first's, not the archived one's", bs, err)
		}
		if bs, err := s.BranchSessions(ctx, "kndl/none"); err != nil || len(bs) != 0 {
			t.Fatalf("a branch none pushed: %+v, %v; want none", bs, err)
		}
	})
}
