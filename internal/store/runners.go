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

// Runner is a paired Runner. It belongs to the Member who paired it
// (CreatedBy); a shared one, every Member may use.
type Runner struct {
	ID         string
	Name       string
	CreatedBy  string
	Shared     bool
	CreatedAt  time.Time
	LastSeenAt time.Time
	RevokedAt  time.Time
}

// UsableBy reports whether a Session of userID's may run on the Runner:
// it is live, and theirs or shared. It is the one rule for where a
// Creator's Sessions, and so their setup token and Sensitive Variables, may
// go: the Hub asks it as it picks a Runner and as it hands out
// credentials, and the Session owner as it wakes a Session.
func (r Runner) UsableBy(userID string) bool {
	return r.RevokedAt.IsZero() && (r.Shared || (r.CreatedBy != "" && r.CreatedBy == userID))
}

const runnerCols = `id, name, coalesce(created_by, ''), shared, created_at, last_seen_at, revoked_at`

func scanRunner(row scanner) (Runner, error) {
	var r Runner
	var created int64
	var seen, revoked sql.NullInt64
	if err := row.Scan(&r.ID, &r.Name, &r.CreatedBy, &r.Shared, &created, &seen, &revoked); err != nil {
		return r, err
	}
	r.CreatedAt, r.LastSeenAt, r.RevokedAt = time.UnixMilli(created), fromMS(seen), fromMS(revoked)
	return r, nil
}

// CreateRunner pairs a Runner named name and returns it with its token,
// which is shown once: only its hash is kept. It belongs to createdBy; one
// with no createdBy (paired on the Hub's machine, working on the store
// directly) is the Hub's own, and shared. Returns ErrConflict if a live
// Runner has that name.
func (s *Runners) CreateRunner(ctx context.Context, name, createdBy string) (Runner, string, error) {
	if err := validName(name); err != nil {
		return Runner{}, "", err
	}
	token, hash := auth.NewToken(auth.Runner)
	r := Runner{ID: uuid.NewString(), Name: name, CreatedBy: createdBy, Shared: createdBy == "", CreatedAt: s.now()}
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		// A revoked Runner's name can be used again.
		if _, err := tx.ExecContext(ctx, `UPDATE runners SET name = name || '~' || id WHERE name = ? AND revoked_at IS NOT NULL`, name); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO runners (id, name, token_hash, created_by, shared, created_at) VALUES (?, ?, ?, nullif(?, ''), ?, ?)`,
			r.ID, r.Name, hash, createdBy, r.Shared, ms(r.CreatedAt))
		if s.dialect.unique(err) {
			return fmt.Errorf("a Runner named %q is already paired; revoke it first or pick another name: %w", name, errdefs.ErrConflict)
		}
		return err
	})
	if err != nil {
		return Runner{}, "", err
	}
	return r, token, nil
}

// RunnerByToken returns the live Runner whose token this is. Returns
// ErrUnauthorized for an unknown or revoked token.
func (s *Runners) RunnerByToken(ctx context.Context, token string) (Runner, error) {
	defer s.timed("runner_by_token")()
	hash := auth.Hash(token)
	var stored []byte
	r, err := scanRunner(prefixed{s.db.QueryRowContext(ctx, `SELECT token_hash, `+runnerCols+` FROM runners WHERE token_hash = ? AND revoked_at IS NULL`, hash), &stored})
	if err = unknownToken(err, stored, hash); err != nil {
		return Runner{}, fmt.Errorf("runner token: %w", err)
	}
	return r, nil
}

// prefixed scans a row's first column into first and the rest as asked.
type prefixed struct {
	row   scanner
	first any
}

func (p prefixed) Scan(dest ...any) error { return p.row.Scan(append([]any{p.first}, dest...)...) }

// List lists live Runners by name.
func (s *Runners) List(ctx context.Context) ([]Runner, error) {
	return queryAll(ctx, s.db, scanRunner, `SELECT `+runnerCols+` FROM runners WHERE revoked_at IS NULL ORDER BY name`)
}

// RunnerByName returns the live Runner named name, or ErrNotFound.
func (s *Runners) RunnerByName(ctx context.Context, name string) (Runner, error) {
	r, err := scanRunner(s.db.QueryRowContext(ctx, `SELECT `+runnerCols+` FROM runners WHERE name = ? AND revoked_at IS NULL`, name))
	return r, notFound(err, "runner "+name)
}

// RunnerByID returns a Runner, live or revoked, or ErrNotFound.
func (s *Runners) RunnerByID(ctx context.Context, id string) (Runner, error) {
	r, err := scanRunner(s.db.QueryRowContext(ctx, `SELECT `+runnerCols+` FROM runners WHERE id = ?`, id))
	return r, notFound(err, "runner "+id)
}

// RotateRunnerToken gives a live Runner a new token, ending the old one,
// and returns it once. The Runner keeps its id, so its Sessions stay its
// own. Returns ErrNotFound if there is no such live Runner.
func (s *Runners) RotateRunnerToken(ctx context.Context, id string) (string, error) {
	token, hash := auth.NewToken(auth.Runner)
	res, err := s.exec(ctx, `UPDATE runners SET token_hash = ? WHERE id = ? AND revoked_at IS NULL`, hash, id)
	if err != nil {
		return "", err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "", fmt.Errorf("runner %s: %w", id, errdefs.ErrNotFound)
	}
	return token, nil
}

// RevokeRunner revokes a live Runner's token. Returns ErrNotFound if there is
// no such live Runner.
func (s *Runners) RevokeRunner(ctx context.Context, id string) error {
	res, err := s.exec(ctx, `UPDATE runners SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, ms(s.now()), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("runner %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// SetRunnerShared shares a live Runner with every Member, or takes it back
// to the Member who paired it. Returns ErrNotFound if there is no such live
// Runner.
func (s *Runners) SetRunnerShared(ctx context.Context, id string, shared bool) error {
	res, err := s.exec(ctx, `UPDATE runners SET shared = ? WHERE id = ? AND revoked_at IS NULL`, shared, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("runner %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// TouchRunner records that a Runner was seen now.
func (s *Runners) TouchRunner(ctx context.Context, id string) error {
	_, err := s.exec(ctx, `UPDATE runners SET last_seen_at = ? WHERE id = ?`, ms(s.now()), id)
	return err
}

// validName accepts names a person can type and read back: 1 to 64
// letters, digits, '.', '_' and '-'.
func validName(name string) error {
	ok := len(name) > 0 && len(name) <= 64
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("name %q: use 1 to 64 letters, digits, '.', '_' or '-': %w", name, errdefs.ErrInvalid)
	}
	return nil
}
