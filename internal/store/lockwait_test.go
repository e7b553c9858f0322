package store

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// lines is a log's output, written by the store's goroutines and read by
// the test's.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestAWriteThatWaitsSecondsForTheWriteLockIsWarnedOf: a write that waits
// over 2 s for SQLite's write lock, in a transaction or not, is logged at
// Warn naming the store's call and how long it waited; one that waits out
// busy_timeout says it failed. A write that doesn't wait logs nothing.
// The waits are on the bubble's clock (a context with a Done channel has
// the driver's busy handler sleep on Go's), so they cost nothing.
func TestAWriteThatWaitsSecondsForTheWriteLockIsWarnedOf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := open(t)
		log := &lines{}
		s.Log(slog.New(slog.NewTextHandler(log, nil)))
		ctx := t.Context() // see TestAWriteWaitsForSQLitesLockOnGosClock
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
