package store

import (
	"context"
	"database/sql"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/testkit"
)

// TestAWriteThatWaitsSecondsForTheWriteLockIsWarnedOf: a write that waits
// over 2 s for SQLite's write lock, in a transaction or not, is logged at
// Warn naming the store's call and how long it waited; one that waits out
// busy_timeout says it failed. A write that doesn't wait logs nothing.
// The waits are on the bubble's clock, so they cost nothing.
func TestAWriteThatWaitsSecondsForTheWriteLockIsWarnedOf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := open(t)
		log := &testkit.Buffer{}
		s.Log(slog.New(slog.NewTextHandler(log, nil)))
		ctx := context.Background()
		r, _, err := s.Runners.CreateRunner(ctx, "r", "")
		if err != nil {
			t.Fatal(err)
		}
		// hold takes the write lock (BEGIN IMMEDIATE), runs write beside
		// it, lets the lock go after d and returns write's error.
		hold := func(d time.Duration, write func() error) error {
			tx, err := s.db.BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error)
			go func() { done <- write() }()
			time.Sleep(d)
			tx.Rollback()
			return <-done
		}
		if log.String() != "" {
			t.Fatalf("a write that waited for nothing logged %q", log)
		}

		err = hold(3*time.Second, func() error { _, _, err := s.Runners.CreateRunner(ctx, "late", ""); return err })
		if err != nil {
			t.Fatalf("a write that waited 3 s: %v", err)
		}
		err = hold(4*time.Second, func() error { return s.Runners.TouchRunner(ctx, r.ID) })
		if err != nil {
			t.Fatalf("a statement that waited 4 s: %v", err)
		}
		err = hold(11*time.Second, func() error { _, _, err := s.Runners.CreateRunner(ctx, "never", ""); return err })
		if err == nil || !strings.Contains(err.Error(), "locked") {
			t.Fatalf("a write that waited out busy_timeout: %v; want database is locked", err)
		}

		got := strings.Split(strings.TrimSpace(log.String()), "\n")
		want := []*regexp.Regexp{
			regexp.MustCompile(`level=WARN msg="a store write waited for the database's write lock" op=Runners.CreateRunner waited=3(\.\d+)?s err=<nil>$`),
			regexp.MustCompile(`level=WARN msg="a store write waited for the database's write lock" op=Runners.TouchRunner waited=4(\.\d+)?s err=<nil>$`),
			regexp.MustCompile(`level=WARN msg="a store write waited for the database's write lock" op=Runners.CreateRunner waited=10(\.\d+)?s err=".*database is locked.*"$`),
		}
		if len(got) != len(want) {
			t.Fatalf("logged %d lines, want %d:\n%s", len(got), len(want), log)
		}
		for i, re := range want {
			if !re.MatchString(got[i]) {
				t.Errorf("line %d: %s\nwant %s", i, got[i], re)
			}
		}
	})
}

// TestAWriteThatHoldsTheWriteLockOverASecondIsWarnedOf: a write
// transaction that keeps the write lock over a second is logged at Warn,
// naming the call that held it and how long: the holder a slow wait
// (above) waited on. A quick one logs nothing.
func TestAWriteThatHoldsTheWriteLockOverASecondIsWarnedOf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := open(t)
		log := &testkit.Buffer{}
		s.Log(slog.New(slog.NewTextHandler(log, nil)))
		ctx := context.Background()
		if _, _, err := s.Runners.CreateRunner(ctx, "r", ""); err != nil {
			t.Fatal(err)
		}
		if log.String() != "" {
			t.Fatalf("a quick write logged %q", log)
		}
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			time.Sleep(1500 * time.Millisecond)
			_, err := tx.ExecContext(ctx, `UPDATE runners SET name = 'renamed' WHERE name = 'r'`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`level=WARN msg="a store write held the database's write lock" op=TestAWriteThatHoldsTheWriteLockOverASecondIsWarnedOf\S* held=1.5s$`)
		if got := strings.TrimSpace(log.String()); !re.MatchString(got) {
			t.Fatalf("logged %q\nwant %s", got, re)
		}
	})
}

// TestAWriteWaitsForSQLitesLockOnGosClock: a write whose context can't
// end (context.Background) waits for SQLite's write lock on Go's clock,
// as one whose context can: in a bubble, a holder that lets go after 3 s
// of the bubble's clock is waited for, and one that holds on past
// busy_timeout fails the write at 10 s, with no real time gone. In
// SQLite's own busy handler (a nanosleep syscall) the bubble's clock
// stood still: the holder never woke, and the write failed after 10 s
// of real time.
func TestAWriteWaitsForSQLitesLockOnGosClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := open(t)
		s.Log(slog.New(slog.DiscardHandler))
		ctx := context.Background()
		if _, _, err := s.Runners.CreateRunner(ctx, "r", ""); err != nil {
			t.Fatal(err)
		}
		// hold takes the write lock, runs write beside it, and lets the
		// lock go after d: it returns write's error and how long it took.
		hold := func(d time.Duration, write func() error) (took time.Duration, err error) {
			tx, err := s.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				start := time.Now()
				err = write()
				took = time.Since(start)
			}()
			time.Sleep(d)
			tx.Rollback()
			<-done
			return took, err
		}
		for _, c := range []struct {
			name  string
			write func() error
		}{
			{"in a transaction", func() error { _, _, err := s.Runners.CreateRunner(ctx, "late", ""); return err }},
			{"a statement", func() error {
				_, err := s.exec(ctx, `UPDATE runners SET name = 'renamed' WHERE name = 'r'`)
				return err
			}},
		} {
			took, err := hold(3*time.Second, c.write)
			if err != nil || took < 3*time.Second || took > 4*time.Second {
				t.Errorf("%s: a write that waited for a lock held 3 s took %s: %v", c.name, took, err)
			}
		}
		took, err := hold(11*time.Second, func() error { _, _, err := s.Runners.CreateRunner(ctx, "never", ""); return err })
		if err == nil || !strings.Contains(err.Error(), "locked") || took != 10*time.Second {
			t.Errorf("a write that waited out busy_timeout: %v after %s; want database is locked after 10 s", err, took)
		}
	})
}
