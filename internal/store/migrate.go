package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"kndl.dev/kndl/internal/errdefs"
)

// TableCount is how many rows one table holds.
type TableCount struct {
	Table string
	Rows  int64
}

// CopyTo copies every row of s, a SQLite store, into to, a PostgreSQL
// store that holds none (opened, so its tables are made), in one
// transaction of to's, and checks each table's count in to against s's.
// Values go as they are: sealed ones stay sealed under the same
// HUB_SECRETS_KEY, token hashes stay hashes. Stop the Hub first: s's
// writers wait while it reads. Returns ErrConflict if to holds any row,
// ErrInvalid for another pair of engines.
func (s *Store) CopyTo(ctx context.Context, to *Store) ([]TableCount, error) {
	if s.dialect.name != sqliteDialect.name || to.dialect.name != postgresDialect.name {
		return nil, fmt.Errorf("a store is copied from SQLite to PostgreSQL, not from %s to %s: %w", s.dialect.name, to.dialect.name, errdefs.ErrInvalid)
	}
	// BEGIN IMMEDIATE: one snapshot of s, its writers waiting.
	src, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer src.Rollback()
	tables, err := sqliteTables(ctx, src)
	if err != nil {
		return nil, err
	}
	var counts []TableCount
	err = to.InTx(ctx, func(dst *sql.Tx) error {
		for _, t := range tables {
			var n int64
			if err := dst.QueryRowContext(ctx, `SELECT count(*) FROM `+t.name).Scan(&n); err != nil {
				return fmt.Errorf("the target has no table %s (is it another application's database?): %w", t.name, err)
			}
			if n > 0 {
				return fmt.Errorf("the target database is not empty: table %s holds %d rows; copy into a new, empty database: %w", t.name, n, errdefs.ErrConflict)
			}
		}
		for _, t := range tables {
			n, err := copyTable(ctx, src, dst, t)
			if err != nil {
				return fmt.Errorf("copy table %s: %w", t.name, err)
			}
			counts = append(counts, TableCount{t.name, n})
		}
		return nil
	})
	return counts, err
}

type sqliteTable struct {
	name  string
	rowid bool // not WITHOUT ROWID: copied in rowid order
}

// sqliteTables lists the store's tables in the order they were made, which
// is an order their foreign keys allow: PostgreSQL refuses a reference to
// a table not made yet, so its migrations prove it.
func sqliteTables(ctx context.Context, tx *sql.Tx) ([]sqliteTable, error) {
	return queryAll(ctx, tx, func(row scanner) (sqliteTable, error) {
		var t sqliteTable
		var ddl string
		err := row.Scan(&t.name, &ddl)
		t.rowid = !strings.Contains(ddl, "WITHOUT ROWID")
		return t, err
	}, `SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'
		AND name <> 'schema_migrations' ORDER BY rowid`)
}

// copyTable copies t's rows, in rowid order so the target's rowid column
// numbers them alike, and returns how many; the counts must agree.
func copyTable(ctx context.Context, src, dst *sql.Tx, t sqliteTable) (int64, error) {
	order := ""
	if t.rowid {
		order = " ORDER BY rowid"
	}
	rows, err := src.QueryContext(ctx, `SELECT * FROM `+t.name+order)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	bytea := map[string]bool{}
	names, err := pgColumns(ctx, dst, t.name, `data_type = 'bytea'`)
	if err != nil {
		return 0, err
	}
	for _, c := range names {
		bytea[c] = true
	}
	ins, err := dst.PrepareContext(ctx, `INSERT INTO `+t.name+` (`+strings.Join(cols, ", ")+`) VALUES (`+strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ")+`)`)
	if err != nil {
		return 0, err
	}
	defer ins.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var n int64
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		for i, c := range cols {
			// SQLite keeps a value as it came; a BLOB column's must reach
			// BYTEA as bytes, never as text.
			if v, ok := vals[i].(string); ok && bytea[c] {
				vals[i] = []byte(v)
			}
		}
		if _, err := ins.ExecContext(ctx, vals...); err != nil {
			return n, fmt.Errorf("row %d: %w", n+1, err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	var want, got int64
	if err := src.QueryRowContext(ctx, `SELECT count(*) FROM `+t.name).Scan(&want); err != nil {
		return n, err
	}
	if err := dst.QueryRowContext(ctx, `SELECT count(*) FROM `+t.name).Scan(&got); err != nil {
		return n, err
	}
	if want != n || got != n {
		return n, fmt.Errorf("the source holds %d rows, %d were copied and the target holds %d", want, n, got)
	}
	return n, restartIdentities(ctx, dst, t.name)
}

// pgColumns names t's columns in PostgreSQL that where holds for.
func pgColumns(ctx context.Context, tx *sql.Tx, table, where string) ([]string, error) {
	return queryAll(ctx, tx, scanString, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = ? AND `+where, table)
}

// restartIdentities moves each identity column copied with its values
// (INTEGER PRIMARY KEY AUTOINCREMENT in SQLite) past the largest, so the
// next row made gets a new number.
func restartIdentities(ctx context.Context, tx *sql.Tx, table string) error {
	cols, err := pgColumns(ctx, tx, table, `identity_generation = 'BY DEFAULT'`)
	if err != nil {
		return err
	}
	for _, c := range cols {
		if _, err := tx.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence(?, ?), coalesce(max(`+c+`), 0) + 1, false) FROM `+table, table, c); err != nil {
			return fmt.Errorf("restart %s's numbering: %w", c, err)
		}
	}
	return nil
}
