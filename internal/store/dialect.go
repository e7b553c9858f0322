package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is everything that differs between SQLite and PostgreSQL, kept
// here so the rest of the store is one set of queries, written in SQLite's
// SQL with ? placeholders. PostgreSQL gets them rebound to $n by its driver
// (pgConn), the migrations rewritten by schema, and SQLite's json_extract
// as a function of its own (pgFunctions).
type dialect struct {
	name string // sqlite or postgres, as in an error or a test's name
	// schema turns a migration, written for SQLite, into this engine's.
	schema func(string) string
	// lock, run first in every migration and write transaction, is the
	// statement (and its arguments) that waits for the transaction's turn
	// (see turn); "" for SQLite, whose writers all take one turn at BEGIN
	// IMMEDIATE.
	lock func(turn) (string, []any)
	// functions, if any, are made at every open: pgFunctions.
	functions string
	// unique reports whether err is a UNIQUE constraint refusing a row.
	unique func(error) bool
	// full reports whether err is the database's disk being full.
	full func(error) bool
}

var sqliteDialect = dialect{
	name:   "sqlite",
	schema: func(s string) string { return s },
	lock:   func(turn) (string, []any) { return "", nil },
	unique: func(err error) bool { return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed") },
	full: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_FULL
	},
}

// A turn is what a write transaction waits for before it reads what it
// then writes: a Session's last Event seq or its queue's last place, the
// audit log's head, or anything else. Numbers so read and written stay
// gap-free and unique only while no other writer reads the same between.
type turn struct {
	scope   turnScope
	session string // the Session's id, for sessionScope
}

type turnScope int

const (
	// storeScope is the whole store: migrations, and every write that
	// names no narrower turn, wait for every other writer, as all did
	// before Sessions wrote in parallel.
	storeScope turnScope = iota
	// auditScope is the audit log's head and hash chain.
	auditScope
	// sessionScope is one Session's Events and prompt queue.
	sessionScope
)

var (
	storeTurn = turn{scope: storeScope}
	auditTurn = turn{scope: auditScope}
)

func sessionTurn(id string) turn { return turn{scope: sessionScope, session: id} }

// Advisory lock keys on PostgreSQL. pgWriterLock and pgAuditLock are
// single (bigint) keys, pgSessionLocks the first of two int keys, whose
// second is a hash of the Session's id: the two key spaces never meet.
const (
	pgWriterLock   = 0x6b6e646c // "kndl" in ASCII: the store's turn
	pgAuditLock    = 0x6b6e6461 // "knda": the audit log's
	pgSessionLocks = 0x6b6e6473 // "knds": a Session's
	pgLeaseLock    = 0x6b6e6468 // "kndh": the Hub's lease (lease.go), held for its life
)

// pgLock takes t's turn: the store's lock exclusive, or shared with the
// narrower one exclusive, so a migration still waits for every writer
// while two Sessions' writers, or a Session's and the audit log's, run
// side by side. The store's lock is always taken first (PostgreSQL
// evaluates a SELECT's list in order), so no two writers wait on each
// other in a circle.
func pgLock(t turn) (string, []any) {
	switch t.scope {
	case auditScope:
		return fmt.Sprintf(`SELECT pg_advisory_xact_lock_shared(%d), pg_advisory_xact_lock(%d)`, pgWriterLock, pgAuditLock), nil
	case sessionScope:
		h := fnv.New32a()
		h.Write([]byte(t.session))
		return fmt.Sprintf(`SELECT pg_advisory_xact_lock_shared(%d), pg_advisory_xact_lock(%d, ?)`, pgWriterLock, pgSessionLocks), []any{int32(h.Sum32())}
	}
	return fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, pgWriterLock), nil
}

var postgresDialect = dialect{
	name:      "postgres",
	schema:    postgresSchema,
	lock:      pgLock,
	functions: pgFunctions,
	unique: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "23505" // unique_violation
	},
	full: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "53100" // disk_full
	},
}

// pgFunctions gives PostgreSQL the SQLite functions the queries use, so
// they stay one set: json_extract(text, '$.a.b') is the text at that path,
// or NULL.
const pgFunctions = `CREATE OR REPLACE FUNCTION json_extract(data text, path text) RETURNS text
	LANGUAGE sql IMMUTABLE STRICT
	AS $$ SELECT (data::json) #>> string_to_array(substr(path, 3), '.') $$`

// postgresRewrites turn SQLite's DDL into PostgreSQL's, in order. The
// migrations stay the one source of truth for the schema; what they say in
// SQLite's words is said here in PostgreSQL's.
var postgresRewrites = []struct {
	re   *regexp.Regexp
	with string
}{
	// Before INTEGER becomes BIGINT below.
	{regexp.MustCompile(`INTEGER PRIMARY KEY AUTOINCREMENT`), `BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY`},
	// The time now in milliseconds (0009).
	{regexp.MustCompile(`CAST\(strftime\('%s', 'now'\) AS INTEGER\) \* 1000`), `(extract(epoch FROM now()) * 1000)::BIGINT`},
	// SQLite's INTEGER holds 64 bits (milliseconds since 1970); PostgreSQL's
	// holds 32.
	{regexp.MustCompile(`\bINTEGER\b`), `BIGINT`},
	{regexp.MustCompile(`\bBLOB\b`), `BYTEA`},
}

// pgTable is one CREATE TABLE of the migrations.
var pgTable = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?s)CREATE TABLE (\w+) \(\n(.*?)\n\)( WITHOUT ROWID)?;`)
})

func postgresSchema(s string) string {
	for _, r := range postgresRewrites {
		s = r.re.ReplaceAllString(s, r.with)
	}
	// SQLite gives every table not declared WITHOUT ROWID a rowid, in the
	// order rows were made, and queries break ties by it; PostgreSQL gets
	// it as a column.
	return pgTable().ReplaceAllStringFunc(s, func(t string) string {
		m := pgTable().FindStringSubmatch(t)
		if m[3] != "" {
			return "CREATE TABLE " + m[1] + " (\n" + m[2] + "\n);"
		}
		return "CREATE TABLE " + m[1] + " (\n\trowid BIGINT GENERATED ALWAYS AS IDENTITY,\n" + m[2] + "\n);"
	})
}

// openPostgres opens the PostgreSQL database at url through pgx's
// database/sql driver, with each connection rebinding the store's queries.
func openPostgres(url string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("the PostgreSQL URL: %w (want postgres://user:password@host:port/database)", err)
	}
	db := sql.OpenDB(pgConnector{stdlib.GetConnector(*cfg)})
	db.SetMaxOpenConns(maxPostgresConns)
	return db, nil
}

// maxPostgresConns bounds the connections a Hub opens to PostgreSQL, whose
// server refuses those past its max_connections (100 by default): without
// it, a standby taking over a load, with every watcher and Runner dialling
// at once, opened one per request and had sign-ins refused. Calls past it
// wait for a connection instead.
const maxPostgresConns = 64

type pgConnector struct{ driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return pgConn{conn.(*stdlib.Conn)}, nil
}

// pgConn is pgx's connection, given the store's queries with $n for each
// ? and its booleans as the integers the schema keeps them as (as
// SQLite's driver does).
type pgConn struct{ *stdlib.Conn }

func (c pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, rebind(query))
}

func (c pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, rebind(query), args)
}

func (c pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, rebind(query), args)
}

func (c pgConn) CheckNamedValue(nv *driver.NamedValue) error {
	if b, ok := nv.Value.(bool); ok {
		nv.Value = int64(0)
		if b {
			nv.Value = int64(1)
		}
	}
	return nil
}

// rebind numbers each ? placeholder $1, $2, …, leaving quoted text and
// comments as they are.
func rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case c == '\'' || c == '"':
			end := strings.IndexByte(q[i+1:], c)
			if end < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			b.WriteString(q[i : i+end+2])
			i += end + 1
		case c == '-' && strings.HasPrefix(q[i:], "--"):
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			b.WriteString(q[i : i+end])
			i += end - 1
		case c == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
