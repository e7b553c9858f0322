package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// A Lease is a Hub's hold on its store, for the Hub's life: a Session's
// state lives in its Hub's memory, so two Hubs on one store would undo each
// other's work. On PostgreSQL it is a session-level advisory lock
// (pgLeaseLock) on a connection of its own; on SQLite an exclusive flock on
// a file beside the database (hub.db.lock), since the database's own file
// is the driver's. Both end with the process however it ends: PostgreSQL
// drops a connection's locks when the connection closes, and the kernel a
// file's flock when its last descriptor closes.
type Lease struct {
	release func() error
	lost    chan struct{}      // closed when the lease ended while held
	stop    context.CancelFunc // Release's, to end watch
	done    chan struct{}      // closed when watch has returned
}

// LeaseRetry is how often a standby Hub tries the lease again on SQLite,
// so it takes over within that of the holder's end. On PostgreSQL it waits
// on the lock that long at a time, and takes it as the holder's connection
// ends.
const LeaseRetry = 2 * time.Second

// TryLease takes the lease on the store at source (as Open takes it) for
// who, which a standby shows ("kndl hub, pid 12 on box-1"). If another
// process holds it, it returns no Lease and what that holder said of itself.
func TryLease(ctx context.Context, source, who string) (*Lease, string, error) {
	return tryLease(ctx, source, who, 0)
}

// tryLease is TryLease, waiting up to wait for the lease: on PostgreSQL on
// the lock itself, on SQLite before it tries.
func tryLease(ctx context.Context, source, who string, wait time.Duration) (*Lease, string, error) {
	if IsPostgres(source) {
		return tryPostgresLease(ctx, source, who, wait)
	}
	select {
	case <-ctx.Done():
		return nil, "", ctx.Err()
	case <-time.After(wait):
	}
	return trySQLiteLease(ctx, source, who)
}

// WaitLease takes the lease on the store at source, waiting while another
// holds it: it tells standby who holds it, at first and whenever that
// changes, and tries again every LeaseRetry (tryLease) until it has it or
// ctx ends.
func WaitLease(ctx context.Context, source, who string, standby func(holder string)) (*Lease, error) {
	told, wait := "", time.Duration(0) // the first try at once, to tell standby
	for {
		l, holder, err := tryLease(ctx, source, who, wait)
		if l != nil || err != nil {
			return l, err
		}
		if holder != told {
			standby(holder)
			told = holder
		}
		wait = LeaseRetry
	}
}

// Lost is closed if the lease ends while the Hub holds it: the PostgreSQL
// connection holding it broke (the server restarted, the network failed),
// so a standby may take it. The Hub then stops.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release ends the lease, for a standby to take.
func (l *Lease) Release() error {
	l.stop()
	<-l.done
	return l.release()
}

// newLease holds a lease until Release, checking with alive, if any, that
// it still does; it outlives ctx, whose values it keeps.
func newLease(ctx context.Context, release func() error, alive func(context.Context) error) *Lease {
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l := &Lease{release: release, lost: make(chan struct{}), stop: stop, done: make(chan struct{})}
	go l.watch(ctx, alive)
	return l
}

// watch checks every LeaseRetry that what holds the lease is alive, and
// closes lost once it is not, until ctx ends.
func (l *Lease) watch(ctx context.Context, alive func(context.Context) error) {
	defer close(l.done)
	if alive == nil {
		return
	}
	tick := time.NewTicker(LeaseRetry)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			check, cancel := context.WithTimeout(ctx, LeaseRetry)
			err := alive(check)
			cancel()
			if err != nil && ctx.Err() == nil {
				close(l.lost)
				return
			}
		}
	}
}

// trySQLiteLease flocks path.lock and writes who into it, for a standby to
// read.
func trySQLiteLease(ctx context.Context, path, who string) (*Lease, string, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("the store's lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, "", fmt.Errorf("lock %s: %w", name, err)
		}
		b, _ := os.ReadFile(name) // what the holder wrote, if it has yet
		if holder := strings.TrimSpace(string(b)); holder != "" {
			return nil, holder, nil
		}
		return nil, "another process", nil
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, "", err
	}
	if _, err := f.WriteAt([]byte(who+"\n"), 0); err != nil {
		f.Close()
		return nil, "", err
	}
	return newLease(ctx, f.Close, nil), "", nil
}

// pgKeepalives have the server end the lease's connection, and so the
// lease, within about 7 s of its Hub's machine going silent (a crash, a
// cut cable), where a process's end closes it at once. They apply to TCP
// connections only. It also clears the lock_timeout a standby waited with.
const pgKeepalives = `SELECT set_config('tcp_keepalives_idle', '4', false), set_config('tcp_keepalives_interval', '1', false),
	set_config('tcp_keepalives_count', '3', false), set_config('lock_timeout', '0', false)`

// tryPostgresLease takes pgLeaseLock on a connection of its own, named who
// (its application_name) for a standby to read, waiting up to wait for it.
func tryPostgresLease(ctx context.Context, url, who string, wait time.Duration) (*Lease, string, error) {
	db, err := openPostgres(url)
	if err != nil {
		return nil, "", err
	}
	l, holder, err := holdPostgresLease(ctx, db, who, wait)
	if l == nil {
		db.Close()
	}
	return l, holder, err
}

// pgLockNotAvailable is the SQLSTATE of a lock wait past lock_timeout.
const pgLockNotAvailable = "55P03"

func holdPostgresLease(ctx context.Context, db *sql.DB, who string, wait time.Duration) (*Lease, string, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("connect to the PostgreSQL store: %w", err)
	}
	got, err := true, error(nil)
	if wait > 0 {
		// The server grants the lock the moment its holder's connection
		// ends: a standby waiting on it takes over at once, not at its
		// next try.
		_, err = conn.ExecContext(ctx, fmt.Sprintf(`SELECT set_config('lock_timeout', '%d', false), pg_advisory_lock(%d)`, wait.Milliseconds(), pgLeaseLock))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == pgLockNotAvailable {
			got, err = false, nil
		}
	} else {
		err = conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT pg_try_advisory_lock(%d)`, pgLeaseLock)).Scan(&got)
	}
	if err != nil {
		conn.Close()
		return nil, "", fmt.Errorf("take the store's lease: %w", err)
	}
	if !got {
		holder, err := pgLeaseHolder(ctx, conn)
		conn.Close()
		return nil, holder, err
	}
	if _, err := conn.ExecContext(ctx, pgKeepalives+`, set_config('application_name', ?, false)`, who); err != nil {
		conn.Close()
		return nil, "", fmt.Errorf("take the store's lease: %w", err)
	}
	release := func() error {
		conn.Close()
		return db.Close() // closes the connection, and so ends the lock
	}
	return newLease(ctx, release, conn.PingContext), "", nil
}

// pgLeaseHolder names the connection holding pgLeaseLock in this database:
// its application_name (who, as its Hub named itself) and its server pid.
func pgLeaseHolder(ctx context.Context, conn *sql.Conn) (string, error) {
	var pid int64
	var name, addr string
	err := conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT l.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'a local socket')
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid = 0 AND l.objid = %d
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`, pgLeaseLock)).Scan(&pid, &name, &addr)
	if errors.Is(err, sql.ErrNoRows) {
		return "another process, now gone", nil
	}
	if err != nil {
		return "", fmt.Errorf("find who holds the store's lease: %w", err)
	}
	if name == "" {
		name = "a connection from " + addr
	}
	return fmt.Sprintf("%s (PostgreSQL server process %d)", name, pid), nil
}
