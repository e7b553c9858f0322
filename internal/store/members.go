package store

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
)

// GitHubIdentity is who GitHub says signed in.
type GitHubIdentity struct {
	ID    int64
	Login string
	Name  string
}

// errRefused is the one answer for a Setup link or Invite that does not let
// someone in, whatever the reason: the caller refuses everyone alike.
var errRefused = fmt.Errorf("not let in: %w", errdefs.ErrUnauthorized)

var loginRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`) })

// CheckGitHubLogin checks that login is shaped like a GitHub login.
func CheckGitHubLogin(login string) error {
	if !loginRE().MatchString(login) {
		return fmt.Errorf("%q is not a GitHub login (letters, digits and single hyphens, at most 39): %w", login, errdefs.ErrInvalid)
	}
	return nil
}

// MemberByGitHub returns the live Member GitHub says signed in, bringing
// their login and name up to date, or ErrNotFound.
func (s *Members) MemberByGitHub(ctx context.Context, gh GitHubIdentity) (User, error) {
	var u User
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM users WHERE github_id = ? AND removed_at IS NULL`, gh.ID).Scan(&id)
		if err != nil {
			return notFound(err, "member")
		}
		u, err = s.putGitHubUser(ctx, tx, id, gh, false)
		return err
	})
	return u, err
}

// putGitHubUser makes (id "") or updates the user GitHub identifies, live.
// A login held by another row (an account renamed or deleted on GitHub
// since) is taken from it first.
func (s *Members) putGitHubUser(ctx context.Context, tx *sql.Tx, id string, gh GitHubIdentity, owner bool) (User, error) {
	if _, err := tx.ExecContext(ctx, `UPDATE users SET github_login = NULL WHERE lower(github_login) = lower(?) AND coalesce(github_id, 0) != ?`, gh.Login, gh.ID); err != nil {
		return User{}, err
	}
	name := gh.Name
	if name == "" {
		name = gh.Login
	}
	var err error
	if id == "" {
		id = uuid.NewString()
		_, err = tx.ExecContext(ctx, `INSERT INTO users (id, github_id, github_login, name, is_owner, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			id, gh.ID, gh.Login, name, owner, ms(s.now()))
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE users SET github_login = ?, name = ?, removed_at = NULL, is_owner = CASE WHEN ? = 1 THEN 1 ELSE is_owner END WHERE id = ?`,
			gh.Login, name, owner, id)
	}
	if err != nil {
		return User{}, fmt.Errorf("record member %s: %w", gh.Login, err)
	}
	return scanUser(tx.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE id = ?`, id))
}

// admit lets gh in: the user row with their GitHub id comes back (a Member
// removed earlier and invited again keeps their history), or a new one is
// made.
func (s *Members) admit(ctx context.Context, tx *sql.Tx, gh GitHubIdentity, owner bool) (User, error) {
	var id string
	err := tx.QueryRowContext(ctx, `SELECT id FROM users WHERE github_id = ?`, gh.ID).Scan(&id)
	if err != nil && err != sql.ErrNoRows {
		return User{}, err
	}
	return s.putGitHubUser(ctx, tx, id, gh, owner)
}

// HasOwner reports whether someone has become the Owner.
func (s *Members) HasOwner(ctx context.Context) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE is_owner = 1`).Scan(&n)
	return n > 0, err
}

// NewSetupLink returns a fresh Setup link secret, replacing any unused one,
// or ErrConflict once the Hub has an Owner. Only its hash is kept.
func (s *Members) NewSetupLink(ctx context.Context) (string, error) {
	secret, hash := auth.NewToken(auth.Setup)
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE is_owner = 1`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("the Hub has an Owner already: %w", errdefs.ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM setup_links WHERE used_at IS NULL`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO setup_links (hash, created_at) VALUES (?, ?)`, hash, ms(s.now()))
		return err
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// ClaimSetupLink makes gh the Owner if secret is the unused Setup link and
// the Hub has no Owner yet. Anything else is ErrUnauthorized, alike, and
// changes nothing.
func (s *Members) ClaimSetupLink(ctx context.Context, secret string, gh GitHubIdentity) (User, error) {
	var u User
	hash := auth.Hash(secret)
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var stored []byte
		err := tx.QueryRowContext(ctx, `SELECT hash FROM setup_links WHERE hash = ? AND used_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM users WHERE is_owner = 1)`, hash).Scan(&stored)
		if err != nil || !auth.Equal(stored, hash) {
			return errRefused
		}
		if _, err := tx.ExecContext(ctx, `UPDATE setup_links SET used_at = ? WHERE hash = ?`, ms(s.now()), hash); err != nil {
			return err
		}
		u, err = s.admit(ctx, tx, gh, true)
		return err
	})
	return u, err
}

// Invite is an Invite as the Owner sees it; never its secret.
type Invite struct {
	ID          string
	GitHubLogin string
	CreatedBy   string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	UsedAt      time.Time
	RevokedAt   time.Time
}

// CreateInvite makes an Invite for one GitHub login, lasting ttl, and
// returns it with its secret, shown once: only the hash is kept.
func (s *Members) CreateInvite(ctx context.Context, login, createdBy string, ttl time.Duration) (Invite, string, error) {
	if err := CheckGitHubLogin(login); err != nil {
		return Invite{}, "", err
	}
	secret, hash := auth.NewToken(auth.Invite)
	now := s.now()
	inv := Invite{ID: uuid.NewString(), GitHubLogin: login, CreatedBy: createdBy, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	_, err := s.exec(ctx, `INSERT INTO invites (id, hash, github_login, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		inv.ID, hash, login, createdBy, ms(now), ms(inv.ExpiresAt))
	if err != nil {
		return Invite{}, "", fmt.Errorf("create invite: %w", err)
	}
	return inv, secret, nil
}

// Invites lists Invites, newest first.
func (s *Members) Invites(ctx context.Context) ([]Invite, error) {
	return queryAll(ctx, s.db, scanInvite, `SELECT id, github_login, created_by, created_at, expires_at, used_at, revoked_at FROM invites ORDER BY created_at DESC`)
}

func scanInvite(row scanner) (Invite, error) {
	var inv Invite
	var created, expires int64
	var used, revoked sql.NullInt64
	err := row.Scan(&inv.ID, &inv.GitHubLogin, &inv.CreatedBy, &created, &expires, &used, &revoked)
	inv.CreatedAt, inv.ExpiresAt, inv.UsedAt, inv.RevokedAt = time.UnixMilli(created), time.UnixMilli(expires), fromMS(used), fromMS(revoked)
	return inv, err
}

// RevokeInvite revokes an unused Invite, or returns ErrNotFound.
func (s *Members) RevokeInvite(ctx context.Context, id string) error {
	res, err := s.exec(ctx, `UPDATE invites SET revoked_at = ? WHERE id = ? AND used_at IS NULL AND revoked_at IS NULL`, ms(s.now()), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("no unused invite %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// RedeemInvite lets gh in with an Invite's secret if the Invite is for gh's
// login, unused, unexpired and not revoked, and uses it up. Anything else is
// ErrUnauthorized, alike, and changes nothing.
func (s *Members) RedeemInvite(ctx context.Context, secret string, gh GitHubIdentity) (User, error) {
	var u User
	hash := auth.Hash(secret)
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var id string
		var stored []byte
		err := tx.QueryRowContext(ctx, `SELECT id, hash FROM invites WHERE hash = ? AND used_at IS NULL AND revoked_at IS NULL
			AND expires_at > ? AND lower(github_login) = lower(?)`, hash, ms(s.now()), gh.Login).Scan(&id, &stored)
		if err != nil || !auth.Equal(stored, hash) {
			return errRefused
		}
		u, err = s.admit(ctx, tx, gh, false)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE invites SET used_at = ?, used_by = ? WHERE id = ?`, ms(s.now()), u.ID, id)
		return err
	})
	return u, err
}

// List lists the live users, oldest first.
func (s *Members) List(ctx context.Context) ([]User, error) {
	return queryAll(ctx, s.db, scanUser, `SELECT `+userCols+` FROM users WHERE removed_at IS NULL ORDER BY created_at`)
}

// RemoveMember removes a live user and, in the same transaction, ends every
// sign-in and CLI token of theirs, drops their notification webhooks, and
// revokes the Runners they paired, which it returns: the caller closes
// their connections and fails their Sessions. Returns ErrNotFound for no such Member.
func (s *Members) RemoveMember(ctx context.Context, id string) (User, []Runner, error) {
	var u User
	var runners []Runner
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var err error
		u, err = scanUser(tx.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE id = ? AND removed_at IS NULL`, id))
		if err != nil {
			return notFound(err, "member "+id)
		}
		runners, err = queryAll(ctx, tx, scanRunner, `SELECT `+runnerCols+` FROM runners WHERE created_by = ? AND revoked_at IS NULL`, id)
		if err != nil {
			return err
		}
		now := ms(s.now())
		for _, q := range []string{
			`UPDATE users SET removed_at = ? WHERE id = ?`,
			`UPDATE cli_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL`,
			`UPDATE runners SET revoked_at = ? WHERE created_by = ? AND revoked_at IS NULL`,
		} {
			if _, err := tx.ExecContext(ctx, q, now, id); err != nil {
				return err
			}
		}
		for _, q := range []string{`DELETE FROM signins WHERE user_id = ?`, `DELETE FROM notify_webhooks WHERE user_id = ?`} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	return u, runners, err
}

// AddCLIToken records a CLI token for a user by its hash alone: kndl login
// makes the token on the person's machine and the Hub never sees it until
// it is used. signedIn is when the browser sign-in that approved it
// started, which the token is never fresher than (SignedInAt).
func (s *Members) AddCLIToken(ctx context.Context, userID, name string, hash []byte, signedIn time.Time) error {
	if len(hash) != 32 {
		return fmt.Errorf("a CLI token's hash is a SHA-256, 32 bytes: %w", errdefs.ErrInvalid)
	}
	_, err := s.exec(ctx, `INSERT INTO cli_tokens (id, user_id, token_hash, name, created_at, signed_in_at) VALUES (?, ?, ?, ?, ?, ?)`,
		uuid.NewString(), userID, hash, name, ms(s.now()), ms(signedIn))
	if err != nil {
		return fmt.Errorf("add CLI token: %w", err)
	}
	return nil
}
