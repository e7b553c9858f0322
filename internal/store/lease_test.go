package store

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// TestAStoreIsLeasedToOneHubAtATime: while a Hub holds its store's lease,
// another is refused it and told who holds it; once released, it is
// taken. SQLite's is the lock file beside the database.
func TestAStoreIsLeasedToOneHubAtATime(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		_, source := open(t)
		ctx := context.Background()
		first, _, err := TryLease(ctx, source, "kndl hub, pid 1 on box-a")
		if err != nil || first == nil {
			t.Fatalf("the first lease: %v, %v", first, err)
		}
		second, holder, err := TryLease(ctx, source, "kndl hub, pid 2 on box-b")
		if err != nil || second != nil || !strings.Contains(holder, "kndl hub, pid 1 on box-a") {
			t.Fatalf("a second lease while the first is held: %v, holder %q, %v; want refused naming the first", second, holder, err)
		}
		if err := first.Release(); err != nil {
			t.Fatal(err)
		}
		second, _, err = TryLease(ctx, source, "kndl hub, pid 2 on box-b")
		if err != nil || second == nil {
			t.Fatalf("the lease once released: %v, %v; want taken", second, err)
		}
		second.Release()
	})
}

// TestAHubWhosePostgresConnectionEndsLosesItsLease: when the server ends
// the connection holding the lease (a restart, a network cut), the Hub is
// told within two of its checks, and a standby takes the lease.
func TestAHubWhosePostgresConnectionEndsLosesItsLease(t *testing.T) {
	url := testenv.Postgres(t)
	s := openAt(t, url)
	ctx := context.Background()
	l, _, err := TryLease(ctx, url, "kndl hub, pid 1 on box-a")
	if err != nil || l == nil {
		t.Fatalf("the lease: %v, %v", l, err)
	}
	defer l.Release()
	var ended bool
	err = s.db.QueryRowContext(ctx, fmt.Sprintf(`SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 1 AND objid = %d`, pgLeaseLock)).Scan(&ended)
	if err != nil || !ended {
		t.Fatalf("end the lease's connection: %v, %v", ended, err)
	}
	select {
	case <-l.Lost():
	case <-time.After(2*LeaseRetry + testenv.WaitShort):
		t.Fatal("the Hub was not told its lease ended")
	}
	standby, _, err := TryLease(ctx, url, "kndl hub, pid 2 on box-b")
	if err != nil || standby == nil {
		t.Fatalf("a standby's lease after the first's ended: %v, %v", standby, err)
	}
	standby.Release()
}

// TestAStandbyOnPostgresTakesTheLeaseAsItsHolderEnds: a standby waits on
// the lock itself, so it holds the lease within moments of the holder's
// end, not at its next try LeaseRetry later.
func TestAStandbyOnPostgresTakesTheLeaseAsItsHolderEnds(t *testing.T) {
	url := testenv.Postgres(t)
	ctx := context.Background()
	first, _, err := TryLease(ctx, url, "kndl hub, pid 1 on box-a")
	if err != nil || first == nil {
		t.Fatalf("the first lease: %v, %v", first, err)
	}
	told := make(chan struct{})
	got := make(chan error, 1)
	go func() {
		l, err := WaitLease(ctx, url, "kndl hub, pid 2 on box-b", func(string) { close(told) })
		if l != nil {
			l.Release()
		}
		got <- err
	}()
	select {
	case <-told: // its first try failed: it waits
	case <-time.After(testenv.WaitShort):
		t.Fatal("the standby did not say it waits")
	}
	first.Release()
	ended := time.Now()
	select {
	case err := <-got:
		if took := time.Since(ended); err != nil || took > LeaseRetry/2 {
			t.Fatalf("got the standby's lease %v after the holder's end (%v), want within %v", took.Round(time.Millisecond), err, LeaseRetry/2)
		}
	case <-time.After(2*LeaseRetry + testenv.WaitShort):
		t.Fatal("the standby never took the lease")
	}
}

// TestAPostgresStoreQueuesCallsPastItsConnections: more calls at once
// than the server takes connections (the tests' server: 100), each holding
// its connection, all succeed, those past the store's bound waiting for
// one, as a standby's herd of requests does.
func TestAPostgresStoreQueuesCallsPastItsConnections(t *testing.T) {
	s, err := Open(context.Background(), testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const calls = 150
	var mu sync.Mutex
	var held, failed int
	var first error
	release := make(chan struct{})
	done := make(chan struct{}, calls)
	for range calls {
		go func() {
			defer func() { done <- struct{}{} }()
			c, err := s.db.Conn(context.Background())
			if err == nil {
				defer c.Close()
				err = c.PingContext(context.Background()) // a connection of the server's
			}
			mu.Lock()
			if err != nil {
				failed++
				first = cmp.Or(first, err)
			} else {
				held++
			}
			mu.Unlock()
			if err == nil {
				<-release
			}
		}()
	}
	// Every call has its connection or its error, or the rest wait for one.
	testenv.Eventually(t, testenv.WaitMedium, "every call has a connection, an error, or waits", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return held+failed == calls || int(s.db.Stats().WaitCount) >= calls-held
	})
	close(release)
	for range calls {
		<-done
	}
	if failed > 0 {
		t.Errorf("got %d of %d calls at once failed (the first: %v), want none", failed, calls, first)
	}
}
