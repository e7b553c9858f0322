package store

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// TestTheAwakeLineGivesPlacesInOrderAndSurvivesAReopen: a Member's
// Sessions waiting for an awake place are in the order they joined, one
// already in line keeps its place, one created asleep joins at the end,
// each Member's line is their own, and a Session that wakes or is taken
// out leaves it, the others moving up; the line is the same after the
// store is opened again.
func TestTheAwakeLineGivesPlacesInOrderAndSurvivesAReopen(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, source := open(t)
		ctx := context.Background()
		xs := moreSessions(t, s, 3)
		a, b, c := xs[0], xs[1], xs[2]
		for _, x := range []Session{a, b} {
			must(t, s.Sessions.MoveSession(ctx, x.ID, Starting, Asleep, "", false))
		}
		must(t, s.Limits.SetWaiting(ctx, b.ID))
		must(t, s.Limits.SetWaiting(ctx, a.ID))
		must(t, s.Limits.SetWaiting(ctx, b.ID)) // already in line: keeps its place
		must(t, s.Limits.SetWaiting(ctx, c.ID)) // starting: not one to wait
		d, err := s.Sessions.CreateSession(ctx, Session{RepoID: a.RepoID, CreatorID: a.CreatorID, RunnerID: a.RunnerID, Title: "t", State: Asleep})
		must(t, err)
		other := invited(t, s, a.CreatorID, "octo", 7)
		o, err := s.Sessions.CreateSession(ctx, Session{RepoID: a.RepoID, CreatorID: other.ID, RunnerID: a.RunnerID, Title: "t", State: Asleep})
		must(t, err)

		line := func(s *Store, creatorID string, want ...Session) {
			t.Helper()
			var ws []Waiting
			for _, x := range want {
				ws = append(ws, Waiting{x.ID, x.RunnerID})
			}
			got, err := s.Limits.Line(ctx, creatorID)
			if err != nil || !reflect.DeepEqual(got, ws) {
				t.Fatalf("the line: %+v, %v; want %+v", got, err, ws)
			}
			for i, x := range want {
				if y, err := s.Sessions.SessionByID(ctx, x.ID); err != nil || y.Place != i+1 {
					t.Fatalf("Session %d of the line is at place %d, %v; want %d", i+1, y.Place, err, i+1)
				}
			}
		}
		line(s, a.CreatorID, b, a, d)
		line(s, other.ID, o)
		if y, err := s.Sessions.SessionByID(ctx, c.ID); err != nil || y.Place != 0 {
			t.Fatalf("a Session in no line is at place %d, %v; want 0", y.Place, err)
		}
		if n, err := s.Limits.AwakeOf(ctx, a.CreatorID); err != nil || n != 1 {
			t.Fatalf("awake: %d, %v; want the one starting", n, err)
		}

		s.Close()
		s = openAt(t, source)
		line(s, a.CreatorID, b, a, d)

		must(t, s.Sessions.MoveSession(ctx, b.ID, Asleep, Starting, "", false))
		line(s, a.CreatorID, a, d)
		must(t, s.Limits.LeaveLine(ctx, d.ID))
		line(s, a.CreatorID, a)
		if n, err := s.Limits.AwakeOf(ctx, a.CreatorID); err != nil || n != 2 {
			t.Fatalf("awake after one woke: %d, %v; want 2", n, err)
		}
	})
}

// TestSessionsJoiningTheLineAtOnceEachTakeTheirOwnPlace: twenty Sessions
// put in the line and twenty created asleep, all at once, take forty
// places, none shared, one to forty.
func TestSessionsJoiningTheLineAtOnceEachTakeTheirOwnPlace(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		xs := moreSessions(t, s, 20)
		for _, x := range xs {
			must(t, s.Sessions.MoveSession(ctx, x.ID, Starting, Asleep, "", false))
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(xs))
		for _, x := range xs {
			wg.Go(func() { errs <- s.Limits.SetWaiting(ctx, x.ID) })
			wg.Go(func() {
				_, err := s.Sessions.CreateSession(ctx, Session{RepoID: x.RepoID, CreatorID: x.CreatorID, RunnerID: x.RunnerID, Title: "t", State: Asleep})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			must(t, err)
		}
		line, err := s.Limits.Line(ctx, xs[0].CreatorID)
		must(t, err)
		places := map[int]bool{}
		for _, w := range line {
			y, err := s.Sessions.SessionByID(ctx, w.SessionID)
			must(t, err)
			places[y.Place] = true
		}
		if len(line) != 40 || len(places) != 40 || !places[1] || !places[40] {
			t.Errorf("%d Sessions in the line at %d places, want 40 at 40, one to forty", len(line), len(places))
		}
	})
}

// TestARepositorysTurnLimitsAndASessionsTurnsAreKept: a Repo's limits
// are 20 Turns and 2 hours until set, and kept to the millisecond; a
// Session counts its Turns and their time, and a triggered one says so.
func TestARepositorysTurnLimitsAndASessionsTurnsAreKept(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, _ := devSession(t, s)
		if l, err := s.Repos.RepoLimits(ctx, x.RepoID); err != nil || l != (RepoLimits{MaxTurns: 20, MaxTurnHours: 2}) {
			t.Fatalf("a new Repo's limits: %+v, %v; want 20 Turns, 2 hours", l, err)
		}
		want := RepoLimits{MaxTurns: 5, MaxTurnHours: 0.25}
		if err := s.Repos.SetRepoLimits(ctx, x.RepoID, want); err != nil {
			t.Fatal(err)
		}
		if l, err := s.Repos.RepoLimits(ctx, x.RepoID); err != nil || l != want || l.TurnTime() != 15*time.Minute {
			t.Fatalf("the Repo's limits: %+v, %v; want %+v", l, err, want)
		}
		if _, err := s.Repos.RepoLimits(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("no such Repo's limits: %v, want ErrNotFound", err)
		}

		y, err := s.Sessions.CreateSession(ctx, Session{RepoID: x.RepoID, CreatorID: x.CreatorID, RunnerID: x.RunnerID, Title: "t", Triggered: true})
		if err != nil {
			t.Fatal(err)
		}
		for want := 1; want <= 2; want++ {
			if n, err := s.Limits.CountTurn(ctx, y.ID); err != nil || n != want {
				t.Fatalf("Turn %d counted as %d, %v", want, n, err)
			}
		}
		if _, err := s.Limits.CountTurn(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("counting a Turn of no Session: %v, want ErrNotFound", err)
		}
		for _, d := range []time.Duration{90 * time.Second, 1500 * time.Millisecond} {
			if err := s.Limits.AddTurnTime(ctx, y.ID, d); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Sessions.SessionByID(ctx, y.ID)
		if err != nil || !got.Triggered || got.Turns != 2 || got.TurnTime != 91500*time.Millisecond {
			t.Fatalf("the Session: triggered %v, %d Turns in %v, %v; want triggered, 2 in 1m31.5s", got.Triggered, got.Turns, got.TurnTime, err)
		}
		if got, err := s.Sessions.SessionByID(ctx, x.ID); err != nil || got.Triggered || got.Turns != 0 {
			t.Fatalf("a Session a person started: triggered %v, %d Turns, %v; want neither", got.Triggered, got.Turns, err)
		}
	})
}
