package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
)

// Lifetimes bound a browser sign-in: Max from when it was made, Idle from
// when it was last used.
type Lifetimes struct {
	Max, Idle time.Duration
}

// signinTouchEvery is how often a sign-in's last use is written (or a tenth
// of the idle lifetime, if less): an open page does not turn every read into
// a write. A skipped write shortens the idle window by at most this, the
// safe direction.
const signinTouchEvery = time.Minute

// CreateSignin starts a browser sign-in for a user and returns its cookie
// value, once: only its hash is kept.
func (s *Signins) CreateSignin(ctx context.Context, userID string) (string, error) {
	token, hash := auth.NewToken(auth.Cookie)
	now := ms(s.now())
	if _, err := s.exec(ctx, `INSERT INTO signins (hash, user_id, created_at, used_at) VALUES (?, ?, ?, ?)`, hash, userID, now, now); err != nil {
		return "", fmt.Errorf("create sign-in: %w", err)
	}
	return token, nil
}

// UserBySignin returns the live user a sign-in cookie belongs to, if it is
// within both lifetimes, and counts this as a use. A sign-in past either is
// ended; anything else is ErrUnauthorized.
func (s *Signins) UserBySignin(ctx context.Context, token string, life Lifetimes) (User, error) {
	defer s.timed("user_by_signin")()
	hash := auth.Hash(token)
	var stored []byte
	var created, used int64
	var u User
	var uCreated int64
	err := s.db.QueryRowContext(ctx, `SELECT g.hash, g.created_at, g.used_at, u.id, coalesce(u.github_login, ''), u.name, u.is_owner, u.is_dev, u.created_at
		FROM signins g JOIN users u ON u.id = g.user_id WHERE g.hash = ? AND u.removed_at IS NULL`, hash).
		Scan(&stored, &created, &used, &u.ID, &u.GitHubLogin, &u.Name, &u.IsOwner, &u.IsDev, &uCreated)
	if err = unknownToken(err, stored, hash); err != nil {
		return User{}, fmt.Errorf("sign-in: %w", err)
	}
	now := s.now()
	if now.Sub(time.UnixMilli(created)) >= life.Max || now.Sub(time.UnixMilli(used)) >= life.Idle {
		s.exec(ctx, `DELETE FROM signins WHERE hash = ?`, hash)
		return User{}, fmt.Errorf("sign-in expired: %w", errdefs.ErrUnauthorized)
	}
	if now.Sub(time.UnixMilli(used)) >= min(signinTouchEvery, life.Idle/10) {
		s.exec(ctx, `UPDATE signins SET used_at = ? WHERE hash = ?`, ms(now), hash)
	}
	u.CreatedAt = time.UnixMilli(uCreated)
	return u, nil
}

// EndSignin ends a sign-in by its cookie value, at once.
func (s *Signins) EndSignin(ctx context.Context, token string) error {
	_, err := s.exec(ctx, `DELETE FROM signins WHERE hash = ?`, auth.Hash(token))
	return err
}

// SweepSignins deletes sign-ins past either lifetime. Expiry is enforced
// when a cookie is read whether or not this runs; it only frees storage.
func (s *Signins) SweepSignins(ctx context.Context, life Lifetimes) error {
	now := s.now()
	_, err := s.exec(ctx, `DELETE FROM signins WHERE created_at <= ? OR used_at <= ?`, ms(now.Add(-life.Max)), ms(now.Add(-life.Idle)))
	return err
}

// SigninLive reports whether the sign-in with this hash is still within
// both lifetimes and its user a Member, without counting a use: a stream
// it opened re-checks it this way.
func (s *Signins) SigninLive(ctx context.Context, hash []byte, life Lifetimes) (bool, error) {
	now := s.now()
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM signins g JOIN users u ON u.id = g.user_id
		WHERE g.hash = ? AND u.removed_at IS NULL AND g.created_at > ? AND g.used_at > ?`,
		hash, ms(now.Add(-life.Max)), ms(now.Add(-life.Idle))).Scan(&n)
	return n > 0, err
}

// CLITokenLive reports whether the CLI token with this hash is unrevoked
// and its user a Member.
func (s *Signins) CLITokenLive(ctx context.Context, hash []byte) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM cli_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = ? AND t.revoked_at IS NULL AND u.removed_at IS NULL`, hash).Scan(&n)
	return n > 0, err
}

// SignedInAt returns when the person behind a credential, by its hash,
// last signed in in a browser: a sign-in cookie's own start, or for a CLI
// token, the start of the browser sign-in that approved it (zero for a
// token approved before the Hub kept it). Returns ErrNotFound for neither
// a sign-in nor a live CLI token.
func (s *Signins) SignedInAt(ctx context.Context, hash []byte) (time.Time, error) {
	var at sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT created_at FROM signins WHERE hash = ?
		UNION ALL SELECT signed_in_at FROM cli_tokens WHERE token_hash = ? AND revoked_at IS NULL`, hash, hash).Scan(&at)
	return fromMS(at), notFound(err, "sign-in")
}

// unknownToken is a token lookup's outcome: ErrUnauthorized when no row
// holds the token's hash, the store's own error when the lookup failed
// (a wrong credential is counted against its address, a store that could
// not answer is not), nil when stored is the hash.
func unknownToken(err error, stored, hash []byte) error {
	switch {
	case errors.Is(err, sql.ErrNoRows) || (err == nil && !auth.Equal(stored, hash)):
		return errdefs.ErrUnauthorized
	case err != nil:
		return fmt.Errorf("look the token up: %w", err)
	}
	return nil
}
