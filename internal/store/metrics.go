package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
)

// CreateMetricsToken makes the Hub's metrics token and returns it once; the
// one before it stops working.
func (s *Signins) CreateMetricsToken(ctx context.Context) (string, error) {
	token, hash := auth.NewToken(auth.Metrics)
	_, err := s.exec(ctx, `INSERT INTO metrics_token (one, token_hash, created_at) VALUES (1, ?, ?)
		ON CONFLICT (one) DO UPDATE SET token_hash = excluded.token_hash, created_at = excluded.created_at`, hash, ms(s.now()))
	if err != nil {
		return "", fmt.Errorf("create the metrics token: %w", err)
	}
	return token, nil
}

// RevokeMetricsToken ends the metrics token. Returns ErrNotFound if there
// is none.
func (s *Signins) RevokeMetricsToken(ctx context.Context) error {
	res, err := s.exec(ctx, `DELETE FROM metrics_token`)
	if err != nil {
		return fmt.Errorf("revoke the metrics token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("there is no metrics token: %w", errdefs.ErrNotFound)
	}
	return nil
}

// CheckMetricsToken returns nil if token is the live metrics token, else
// ErrUnauthorized.
func (s *Signins) CheckMetricsToken(ctx context.Context, token string) error {
	defer s.timed("check_metrics_token")()
	hash := auth.Hash(token)
	var stored []byte
	err := s.db.QueryRowContext(ctx, `SELECT token_hash FROM metrics_token WHERE token_hash = ?`, hash).Scan(&stored)
	if err != nil || !auth.Equal(stored, hash) {
		return fmt.Errorf("metrics token: %w", errdefs.ErrUnauthorized)
	}
	return nil
}

// Ping runs a trivial query, for the Hub's health check.
func (s *Store) Ping(ctx context.Context) error {
	var n int
	return s.db.QueryRowContext(ctx, `SELECT 1`).Scan(&n)
}

// Migrations returns the newest migration applied to the store and the
// newest this binary has. They differ when a migration failed (the store
// behind) or the binary is older than its store (ahead).
func (s *Store) Migrations(ctx context.Context) (applied, known int, err error) {
	var v sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, 0, err
	}
	names := migrationFiles()
	known, err = migrationVersion(names[len(names)-1])
	return int(v.Int64), known, err
}

// SessionCounts returns how many Sessions are in each state, every state
// present.
func (s *Sessions) SessionCounts(ctx context.Context) (map[SessionState]int, error) {
	defer s.timed("session_counts")()
	out := map[SessionState]int{Starting: 0, Active: 0, Asleep: 0, Frozen: 0, Failed: 0, Archived: 0}
	rows, err := s.db.QueryContext(ctx, `SELECT state, count(*) FROM sessions GROUP BY state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var st SessionState
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}

// Observe has fn told how long each of the store's hot calls took, named
// by op (internal/metrics' store latency). Call it before the store is in
// use; nil stops it.
func (s *Store) Observe(fn func(op string, d time.Duration)) {
	if fn == nil {
		s.observe.Store(nil)
		return
	}
	s.observe.Store(&fn)
}

// timed times the call op for Observe's function: defer what it returns.
func (s *handle) timed(op string) func() {
	fn := s.observe.Load()
	if fn == nil {
		return func() {}
	}
	start := time.Now()
	return func() { (*fn)(op, time.Since(start)) }
}
