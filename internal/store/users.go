package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
)

// User is a person who can sign in.
type User struct {
	ID          string
	GitHubLogin string
	Name        string
	IsOwner     bool
	IsDev       bool
	CreatedAt   time.Time
}

const userCols = `id, coalesce(github_login, ''), name, is_owner, is_dev, created_at`

func scanUser(row scanner) (User, error) {
	var u User
	var created int64
	err := row.Scan(&u.ID, &u.GitHubLogin, &u.Name, &u.IsOwner, &u.IsDev, &created)
	u.CreatedAt = time.UnixMilli(created)
	return u, err
}

// DevUser returns the dev user of kndl dev, making it on first use.
func (s *Members) DevUser(ctx context.Context) (User, error) {
	var u User
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var err error
		u, err = scanUser(tx.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE is_dev = 1 AND removed_at IS NULL`))
		if err != sql.ErrNoRows {
			return err
		}
		u = User{ID: uuid.NewString(), Name: "dev", IsDev: true, CreatedAt: s.now()}
		_, err = tx.ExecContext(ctx, `INSERT INTO users (id, name, is_dev, created_at) VALUES (?, ?, 1, ?)`, u.ID, u.Name, ms(u.CreatedAt))
		return err
	})
	return u, err
}

// UserByID returns a live user, or ErrNotFound.
func (s *Members) UserByID(ctx context.Context, id string) (User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE id = ? AND removed_at IS NULL`, id))
	return u, notFound(err, "user "+id)
}

// CreateCLIToken issues a CLI token for a user, named for the machine it is
// for, and returns it once. It is made on the Hub's machine (kndl dev), with
// the operating system's authority, so it counts as signed in now.
func (s *Signins) CreateCLIToken(ctx context.Context, userID, name string) (string, error) {
	token, hash := auth.NewToken(auth.CLI)
	now := ms(s.now())
	_, err := s.exec(ctx, `INSERT INTO cli_tokens (id, user_id, token_hash, name, created_at, signed_in_at) VALUES (?, ?, ?, ?, ?, ?)`,
		uuid.NewString(), userID, hash, name, now, now)
	if err != nil {
		return "", fmt.Errorf("create CLI token: %w", err)
	}
	return token, nil
}

// UserByCLIToken returns the live user a live CLI token belongs to, or
// ErrUnauthorized.
func (s *Signins) UserByCLIToken(ctx context.Context, token string) (User, error) {
	defer s.timed("user_by_cli_token")()
	hash := auth.Hash(token)
	var stored []byte
	var u User
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT t.token_hash, u.id, coalesce(u.github_login, ''), u.name, u.is_owner, u.is_dev, u.created_at
		FROM cli_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = ? AND t.revoked_at IS NULL AND u.removed_at IS NULL`, hash).
		Scan(&stored, &u.ID, &u.GitHubLogin, &u.Name, &u.IsOwner, &u.IsDev, &created)
	if err = unknownToken(err, stored, hash); err != nil {
		return User{}, fmt.Errorf("CLI token: %w", err)
	}
	u.CreatedAt = time.UnixMilli(created)
	return u, nil
}

// RevokeCLIToken revokes a CLI token by its value.
func (s *Signins) RevokeCLIToken(ctx context.Context, token string) error {
	_, err := s.exec(ctx, `UPDATE cli_tokens SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL`, ms(s.now()), auth.Hash(token))
	return err
}

// SignInCLIToken counts now as the browser sign-in behind a live CLI token
// (SignedInAt): for kndl dev's start on the Hub's machine, with the
// operating system's authority, and nothing a request can reach. Returns
// ErrNotFound for no such live token.
func (s *Signins) SignInCLIToken(ctx context.Context, token string) error {
	res, err := s.exec(ctx, `UPDATE cli_tokens SET signed_in_at = ? WHERE token_hash = ? AND revoked_at IS NULL`, ms(s.now()), auth.Hash(token))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("CLI token: %w", errdefs.ErrNotFound)
	}
	return nil
}
