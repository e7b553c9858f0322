package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// SetUserSecret stores a person's sealed secret (such as "claude-token"),
// replacing the one they had.
func (s *Members) SetUserSecret(ctx context.Context, userID, name string, sealed []byte) error {
	_, err := s.exec(ctx, `INSERT INTO user_secrets (user_id, name, sealed, set_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (user_id, name) DO UPDATE SET sealed = excluded.sealed, set_at = excluded.set_at`, userID, name, sealed, ms(s.now()))
	return err
}

// UserSecret returns a person's sealed secret and when it was set, or
// ErrNotFound.
func (s *Members) UserSecret(ctx context.Context, userID, name string) ([]byte, time.Time, error) {
	var sealed []byte
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT sealed, set_at FROM user_secrets WHERE user_id = ? AND name = ?`, userID, name).Scan(&sealed, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, fmt.Errorf("%s of user %s: %w", name, userID, errdefs.ErrNotFound)
	}
	return sealed, time.UnixMilli(at), err
}

// DeleteUserSecret removes a person's secret.
func (s *Members) DeleteUserSecret(ctx context.Context, userID, name string) error {
	_, err := s.exec(ctx, `DELETE FROM user_secrets WHERE user_id = ? AND name = ?`, userID, name)
	return err
}
