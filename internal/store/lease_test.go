package store

import (
	"context"
	"fmt"
	"strings"
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
