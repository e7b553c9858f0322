// Package store is the Hub's database: SQLite through modernc.org/sqlite in
// WAL mode by default, or PostgreSQL through pgx, with numbered migrations
// embedded in the binary and applied at open. All SQL lives in this
// package, one set of queries for both engines (dialect.go). Only the Hub
// (and the CLI commands that work on a Hub's store directly) import it.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"modernc.org/sqlite"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the Hub's database: it opens, migrates, backs up and closes
// it, and holds one type per domain, each over the same handle, so a
// consumer takes only the domain it uses (st.Sessions, st.Prompts, ...)
// rather than every query there is.
type Store struct {
	*handle
	Domains
}

// Domains are the store's queries, one type per domain, without what only
// the Hub's wiring does with the whole database (open, back up, copy,
// observe, close).
type Domains struct {
	Sessions     *Sessions     // Sessions, their Events and transcripts
	Repos        *Repos        // Repos and their settings (limits, auto-fix, trigger label)
	Branches     *Branches     // Sessions' branches and their pull requests
	Prompts      *Prompts      // the prompt queue and its attachments
	Audit        *Audit        // the audit log's hash chain
	Environments *Environments // Environments, drafts and test builds
	Limits       *Limits       // Members' line of waiting Sessions, Turn counts
	MCP          *MCP          // MCP servers and their installations
	Members      *Members      // Members, invites, setup links, their secrets
	Signins      *Signins      // sign-ins, CLI and metrics tokens
	Notify       *Notify       // notification webhooks and their outbox
	Runners      *Runners      // Runners and their tokens
	Threads      *Threads      // GitHub threads, webhook deliveries, refusals
	Usage        *UsageLog     // token usage by Session, Turn and day
	Variables    *Variables    // Variables and Sessions' masks
	Attempts     *Attempts     // attempt sets and their Turns' checks
}

// handle is the one database every domain type shares: a write in one
// domain's transaction waits for the same turns as any other's.
type handle struct {
	db      *sql.DB
	dialect dialect
	now     func() time.Time
	observe atomic.Pointer[func(op string, d time.Duration)] // Observe's
	log     atomic.Pointer[slog.Logger]                      // Log's; slog.Default() if nil
}

// The domain types: each is the handle with its domain's queries as
// methods, most in the file named for the domain (Repos' sit beside the
// queries that first needed them).
type (
	Sessions     struct{ *handle }
	Repos        struct{ *handle }
	Branches     struct{ *handle }
	Prompts      struct{ *handle }
	Audit        struct{ *handle }
	Environments struct{ *handle }
	Limits       struct{ *handle }
	MCP          struct{ *handle }
	Members      struct{ *handle }
	Signins      struct{ *handle }
	Notify       struct{ *handle }
	Runners      struct{ *handle }
	Threads      struct{ *handle }
	UsageLog     struct{ *handle }
	Variables    struct{ *handle }
	Attempts     struct{ *handle }
)

func newStore(h *handle) *Store {
	return &Store{handle: h, Domains: Domains{
		Sessions:     &Sessions{h},
		Repos:        &Repos{h},
		Branches:     &Branches{h},
		Prompts:      &Prompts{h},
		Audit:        &Audit{h},
		Environments: &Environments{h},
		Limits:       &Limits{h},
		MCP:          &MCP{h},
		Members:      &Members{h},
		Signins:      &Signins{h},
		Notify:       &Notify{h},
		Runners:      &Runners{h},
		Threads:      &Threads{h},
		Usage:        &UsageLog{h},
		Variables:    &Variables{h},
		Attempts:     &Attempts{h},
	}}
}

// IsPostgres reports whether source names a PostgreSQL database
// (postgres:// or postgresql://) rather than a SQLite file.
func IsPostgres(source string) bool {
	return strings.HasPrefix(source, "postgres://") || strings.HasPrefix(source, "postgresql://")
}

// Open opens the store at source, a PostgreSQL URL or the path of a SQLite
// file (made if missing), and applies every migration it has not seen.
func Open(ctx context.Context, source string) (*Store, error) {
	if IsPostgres(source) {
		db, err := openPostgres(source)
		if err != nil {
			return nil, err
		}
		return openDB(ctx, db, postgresDialect, "the PostgreSQL store")
	}
	return openSQLite(ctx, source)
}

func openSQLite(ctx context.Context, path string) (*Store, error) {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(10000)", "foreign_keys(1)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	// Write transactions take the lock at BEGIN, so two writers queue on
	// busy_timeout instead of failing to upgrade a read lock.
	q.Set("_txlock", "immediate")
	db := sql.OpenDB(sqliteConnector{d: &sqlite.Driver{}, dsn: "file:" + path + "?" + q.Encode()})
	return openDB(ctx, db, sqliteDialect, "store "+path)
}

// sqliteConnector opens the store's SQLite connections, each waiting for
// SQLite's locks in the driver's busy handler, a Go sleep, rather than in
// SQLite's own, a nanosleep syscall, which the driver keeps for a
// connection until a call on it has a context that can end. A write with
// one that can't (context.Background, WithoutCancel) then held an OS
// thread for up to busy_timeout, and in a testing/synctest bubble kept the
// bubble's clock still: a lock holder waiting on that clock never let go,
// and the write failed after 10 s of real time.
type sqliteConnector struct {
	d   *sqlite.Driver
	dsn string
}

func (c sqliteConnector) Driver() driver.Driver { return c.d }

func (c sqliteConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.d.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx) // one that can end puts the driver's handler in
	defer cancel()
	if _, err := conn.(driver.ExecerContext).ExecContext(ctx, `SELECT 1`, nil); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// maxIdleConns is how many connections the store keeps open between
// calls. database/sql keeps 2 by default and closes the others after each
// call, and a new connection costs: SQLite parses the whole schema and the
// pragmas again, PostgreSQL dials and signs in. Under kndl loadtest (200
// Sessions, 5 watchers each) that was 41% of the Hub's CPU.
const maxIdleConns = 32

func openDB(ctx context.Context, db *sql.DB, d dialect, what string) (*Store, error) {
	db.SetMaxIdleConns(maxIdleConns)
	s := newStore(&handle{db: db, dialect: d, now: time.Now})
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", what, err)
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// migrate applies the migrations not yet applied, each in a transaction
// of its own. On PostgreSQL each takes the writers' lock first, so Hubs
// starting together on one database apply each migration once. A store
// that holds a migration this build lacks is refused before anything is
// written (notNewer).
func (s *Store) migrate(ctx context.Context) error {
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.dialect.schema(`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`)); err != nil {
			return err
		}
		if err := notNewer(ctx, tx); err != nil {
			return err
		}
		if s.dialect.functions != "" {
			if _, err := tx.ExecContext(ctx, s.dialect.functions); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range migrationFiles() {
		base := strings.TrimPrefix(name, "migrations/")
		v, err := migrationVersion(name)
		if err != nil {
			return err
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		err = s.InTx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, v).Scan(&n); err != nil || n > 0 {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.dialect.schema(string(body))); err != nil {
				return fmt.Errorf("migration %s: %w", base, err)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, v, s.now().UnixMilli())
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// notNewer refuses a store that a newer kndl migrated: one holding a
// migration this build lacks. This build would run on tables it doesn't
// know, and what it writes there the newer one could lose or misread: a
// rollback goes back to the backup taken before the upgrade.
func notNewer(ctx context.Context, tx *sql.Tx) error {
	known := map[int]bool{}
	for _, name := range migrationFiles() {
		v, err := migrationVersion(name)
		if err != nil {
			return err
		}
		known[v] = true
	}
	applied, err := queryAll(ctx, tx, func(row scanner) (int, error) {
		var v int
		return v, row.Scan(&v)
	}, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return err
	}
	for _, v := range applied {
		if !known[v] {
			return fmt.Errorf("the store holds migration %d, which this build of kndl lacks: a newer kndl migrated it. "+
				"Run that build or a newer one; to go back to this one, restore the backup taken before the upgrade (docs/operating.md, Upgrading): %w",
				v, errdefs.ErrConflict)
		}
	}
	return nil
}

// migrationFiles are the embedded migrations, oldest first.
func migrationFiles() []string {
	names, _ := fs.Glob(migrations, "migrations/*.sql") // its one error is a malformed pattern
	sort.Strings(names)
	return names
}

// migrationVersion is the number a migration's file name starts with.
func migrationVersion(name string) (int, error) {
	base := strings.TrimPrefix(name, "migrations/")
	v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
	if err != nil {
		return 0, fmt.Errorf("migration %s: name must start with its number", base)
	}
	return v, nil
}

// InTx runs fn in a write transaction, committing if it returns nil. It
// takes the whole store's turn: use it for writes other than a Session's
// Events and queue and the audit log.
func (s *Store) InTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.inTx(ctx, storeTurn, fn)
}

// inTx runs fn in a write transaction that waits for t's turn first.
func (s *handle) inTx(ctx context.Context, t turn, fn func(*sql.Tx) error) error {
	start := time.Now()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		s.waited(start, err)
		return err
	}
	if lock, args := s.dialect.lock(t); lock != "" {
		if _, err := tx.ExecContext(ctx, lock, args...); err != nil {
			tx.Rollback()
			s.waited(start, err)
			return err
		}
	}
	s.waited(start, nil)
	defer s.held(time.Now())
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// slowHold is how long a write transaction may hold the write lock before
// the store warns, naming it: the holder a slow wait (slowLock) waited on.
const slowHold = time.Second

// slowLock is how long a write may wait for the database's write lock
// (SQLite's, under busy_timeout; PostgreSQL's advisory locks) before the
// store warns. A write holds it for milliseconds: a wait of seconds means
// a writer kept it (a transaction left open across something slow), and at
// busy_timeout (10 s) SQLite gives up with "database is locked".
const slowLock = 2 * time.Second

// Log has the store warn on l, rather than slog.Default(), of a write
// that waited over slowLock for the write lock.
func (s *Store) Log(l *slog.Logger) { s.log.Store(l) }

// exec runs a write outside a transaction, warning as waited does if it
// took over slowLock: the wait for the lock is all of a statement's time
// that can run to seconds.
func (s *handle) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	start := time.Now()
	res, err := s.db.ExecContext(ctx, query, args...)
	s.waited(start, err)
	return res, err
}

// waited warns if the write lock, waited for since start, took over
// slowLock, naming the store's call that waited (the first caller outside
// this file's helpers), how long, and how the wait ended.
func (s *handle) waited(start time.Time, err error) {
	d := time.Since(start)
	if d <= slowLock {
		return
	}
	s.logger().Warn("a store write waited for the database's write lock", "op", waiter(), "waited", d.Round(time.Millisecond), "err", err)
}

// held warns if a write transaction, holding the write lock since start,
// held it over slowHold, naming the store's call that held it.
func (s *handle) held(start time.Time) {
	if d := time.Since(start); d > slowHold {
		s.logger().Warn("a store write held the database's write lock", "op", waiter(), "held", d.Round(time.Millisecond))
	}
}

// logger is where the store warns: Store.Log's logger, or slog.Default().
func (s *handle) logger() *slog.Logger {
	if l := s.log.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// waiter names the store call above inTx, InTx, exec, waited and held, such as
// Prompts.Enqueue, without its package path.
func waiter() string {
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		name := f.Function[strings.LastIndex(f.Function, "/")+1:]
		switch strings.TrimPrefix(name, "store.") {
		case "(*handle).inTx", "(*Store).InTx", "(*handle).exec", "(*handle).held":
		default:
			if name != "" {
				return strings.NewReplacer("store.", "", "(*", "", ")", "").Replace(name)
			}
		}
		if !more {
			return "unknown"
		}
	}
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(...any) error }

// querier is a *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// idChunk bounds the ids one query's IN list names, inside both engines'
// limits on a statement's parameters.
const idChunk = 500

// eachChunk calls f with each run of up to idChunk of ids as an IN list's
// placeholders and arguments: a list's rows read in a query or a few,
// however many.
func eachChunk(ids []string, f func(in string, args []any) error) error {
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), idChunk)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		if err := f(strings.TrimSuffix(strings.Repeat("?, ", len(chunk)), ", "), args); err != nil {
			return err
		}
	}
	return nil
}

// queryAll runs a query and scans each row with scan.
func queryAll[T any](ctx context.Context, db querier, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanString(row scanner) (string, error) {
	var v string
	return v, row.Scan(&v)
}

// notFound turns sql.ErrNoRows into errdefs.ErrNotFound naming what.
func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, errdefs.ErrNotFound)
	}
	return err
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64)
}

// Backup writes a consistent copy of the database to path (a new file)
// while the Hub runs: SQLite's VACUUM INTO reads one snapshot, so writers
// go on and the copy is whole. The copy is written beside path and renamed
// into place, so a backup cut short leaves no half file under that name.
// A PostgreSQL store is backed up with pg_dump, which does the same.
func (s *Store) Backup(ctx context.Context, path string) error {
	if s.dialect.name != sqliteDialect.name {
		return fmt.Errorf("the Hub's store is PostgreSQL: back it up with pg_dump (pg_dump --format=custom --file=hub.dump \"$HUB_DATABASE_URL\"), which copies one snapshot while the Hub runs: %w", errdefs.ErrInvalid)
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s exists: back up to a new file: %w", path, errdefs.ErrConflict)
	}
	tmp := path + ".partial"
	os.Remove(tmp)
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("back up the store: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
