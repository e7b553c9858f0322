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
		if a, err := s.Repos.RepoAutoFix(ctx, x.RepoID); err != nil || a != (AutoFix{Max: DefaultAutoFixMax}) {
			t.Fatalf("a new Repo's auto-fix: %+v, %v; want off, at most %d", a, err, DefaultAutoFixMax)
		}
		want := AutoFix{CI: true, Reviews: false, Max: 2}
		if err := s.Repos.SetRepoAutoFix(ctx, x.RepoID, want); err != nil {
			t.Fatal(err)
		}
		if a, err := s.Repos.RepoAutoFix(ctx, x.RepoID); err != nil || a != want {
			t.Fatalf("the Repo's auto-fix: %+v, %v; want %+v", a, err, want)
		}
		if _, err := s.Repos.RepoAutoFix(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("no such Repo's auto-fix: %v, want ErrNotFound", err)
		}
		count := func(repo string, pull, want int) {
			t.Helper()
			if n, err := s.Branches.CountFix(ctx, repo, pull); err != nil || n != want {
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

// TestABranchBelongsToTheFirstSessionRecordedWithIt: of three Sessions of
// a Repo recording the same branches, the first holds them and the others
// record none, however often they try; BranchSessions finds the first,
// with its Repo, while it is not archived, and an archived one's branch
// still moves to no other.
func TestABranchBelongsToTheFirstSessionRecordedWithIt(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		xs := moreSessions(t, s, 3)
		at := time.UnixMilli(1700000000000)
		for i, x := range xs {
			added, dropped, err := s.Branches.AddSessionBranches(ctx, x.ID, []string{"kndl/fix", "kndl/other"}, at.Add(time.Duration(i)*time.Second), 5)
			if want := map[bool]int{true: 2, false: 0}[i == 0]; err != nil || added != want || dropped != 0 {
				t.Fatalf("Session %d recording the branches: added %d, dropped %d, %v; want %d added", i, added, dropped, err, want)
			}
		}
		bs, err := s.Branches.BranchSessions(ctx, "kndl/fix")
		if err != nil || len(bs) != 1 || bs[0].SessionID != xs[0].ID || bs[0].RepoURL != xs[0].RepoURL || bs[0].Branch != "kndl/fix" || !bs[0].PushedAt.Equal(at) {
			t.Fatalf("the branch's Sessions: %+v, %v; want the first's alone", bs, err)
		}
		if err := s.Sessions.MoveSession(ctx, xs[0].ID, Starting, Archived, "", false); err != nil {
			t.Fatal(err)
		}
		if added, _, err := s.Branches.AddSessionBranches(ctx, xs[1].ID, []string{"kndl/fix"}, at.Add(time.Minute), 5); err != nil || added != 0 {
			t.Fatalf("another Session taking an archived one's branch: added %d, %v; want none", added, err)
		}
		for _, b := range []string{"kndl/fix", "kndl/none"} {
			if bs, err := s.Branches.BranchSessions(ctx, b); err != nil || len(bs) != 0 {
				t.Fatalf("%s: %+v, %v; want no Session not archived", b, bs, err)
			}
		}
	})
}
