package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/errdefs"
)

// Variable is a Repo's Variable or a Shared one (RepoID empty). A Sensitive
// Variable's value is never in Value: Sealed holds it, for the Hub alone.
type Variable struct {
	ID        string
	RepoID    string
	Name      string
	Value     string
	Sensitive bool
	AtBuild   bool
	// LoadsCode is the mark its setter gave it: its name changes how a
	// tool loads code or reaches the network (loadscode.Table).
	LoadsCode bool
	SetBy     string
	SetAt     time.Time
	// Source is the file a Variable was set from by applying a draft made
	// from it (FileVariable), "" for one a person set.
	Source string
	// Shared is set on a Shared variable a Repo links, in SessionVariables
	// and LinkedVariables.
	Shared bool
	Sealed []byte
}

const variableCols = `id, coalesce(repo_id, ''), name, coalesce(value, ''), sealed, sensitive, at_build, loads_code, set_by, set_at, source`

func scanVariable(row scanner) (Variable, error) {
	var v Variable
	var at int64
	err := row.Scan(&v.ID, &v.RepoID, &v.Name, &v.Value, &v.Sealed, &v.Sensitive, &v.AtBuild, &v.LoadsCode, &v.SetBy, &at, &v.Source)
	v.SetAt = time.UnixMilli(at)
	return v, err
}

// SetVariable makes or replaces the Variable named v.Name of v.RepoID (a
// Shared one when empty) and returns it, with the one it replaced if any. A
// Repo Variable whose name a Shared variable linked to that Repo has is
// refused with ErrConflict.
func (s *Variables) SetVariable(ctx context.Context, v Variable) (Variable, *Variable, error) {
	var old *Variable
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		if v.RepoID != "" {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM variable_links l JOIN variables v ON v.id = l.variable_id
				WHERE l.repo_id = ? AND v.name = ?`, v.RepoID, v.Name).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("the Repo links a Shared variable named %s: unlink it first, or pick another name: %w", v.Name, errdefs.ErrConflict)
			}
		}
		prev, err := scanVariable(tx.QueryRowContext(ctx, `SELECT `+variableCols+` FROM variables WHERE coalesce(repo_id, '') = ? AND name = ?`, v.RepoID, v.Name))
		switch {
		case err == nil:
			old = &prev
			v.ID = prev.ID
		case errors.Is(err, sql.ErrNoRows):
			v.ID = uuid.NewString()
		default:
			return err
		}
		v.SetAt = s.now()
		if !v.Sensitive {
			v.Sealed = nil
		}
		return upsertVariable(ctx, tx, v)
	})
	if v.Sensitive {
		v.Value = ""
	}
	return v, old, err
}

// upsertVariable writes v under its id in tx, a new row or every column of
// the one there: a Sensitive one's value is its Sealed bytes alone.
func upsertVariable(ctx context.Context, tx *sql.Tx, v Variable) error {
	var value any
	if !v.Sensitive {
		value = v.Value
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO variables (id, repo_id, name, value, sealed, sensitive, at_build, loads_code, set_by, set_at, source)
		VALUES (?, nullif(?, ''), ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET value = excluded.value, sealed = excluded.sealed, sensitive = excluded.sensitive,
			at_build = excluded.at_build, loads_code = excluded.loads_code, set_by = excluded.set_by, set_at = excluded.set_at,
			source = excluded.source`,
		v.ID, v.RepoID, v.Name, value, v.Sealed, v.Sensitive, v.AtBuild, v.LoadsCode, v.SetBy, ms(v.SetAt), v.Source)
	return err
}

// List lists a Repo's own Variables, or the Shared ones for "".
func (s *Variables) List(ctx context.Context, repoID string) ([]Variable, error) {
	return queryAll(ctx, s.db, scanVariable, `SELECT `+variableCols+` FROM variables WHERE coalesce(repo_id, '') = ? ORDER BY name`, repoID)
}

// DeleteVariable removes a Repo's Variable, or a Shared one for repoID ""
// (and its links), and returns it. Returns ErrNotFound if there is none.
func (s *Variables) DeleteVariable(ctx context.Context, repoID, name string) (Variable, error) {
	var v Variable
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var err error
		v, err = scanVariable(tx.QueryRowContext(ctx, `SELECT `+variableCols+` FROM variables WHERE coalesce(repo_id, '') = ? AND name = ?`, repoID, name))
		if err != nil {
			return notFound(err, "variable "+name)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM variable_links WHERE variable_id = ?`, v.ID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM variables WHERE id = ?`, v.ID)
		return err
	})
	return v, err
}

// LinkVariable makes a Repo use the Shared variable named name. Returns
// ErrNotFound if there is no such Shared variable, ErrConflict if the Repo
// has a Variable of that name.
func (s *Variables) LinkVariable(ctx context.Context, repoID, name, by string) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var id string
		if err := tx.QueryRowContext(ctx, `SELECT id FROM variables WHERE repo_id IS NULL AND name = ?`, name).Scan(&id); err != nil {
			return notFound(err, "shared variable "+name)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM variables WHERE repo_id = ? AND name = ?`, repoID, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("the Repo has its own Variable named %s; a link can't share its name: %w", name, errdefs.ErrConflict)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO variable_links (repo_id, variable_id, linked_by, linked_at) VALUES (?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, repoID, id, by, ms(s.now()))
		return err
	})
}

// UnlinkVariable stops a Repo using a Shared variable. Returns ErrNotFound
// if it does not link one of that name.
func (s *Variables) UnlinkVariable(ctx context.Context, repoID, name string) error {
	res, err := s.exec(ctx, `DELETE FROM variable_links WHERE repo_id = ? AND variable_id IN
		(SELECT id FROM variables WHERE repo_id IS NULL AND name = ?)`, repoID, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("the Repo links no Shared variable named %s: %w", name, errdefs.ErrNotFound)
	}
	return nil
}

// LinkedVariables lists the Shared variables a Repo links.
func (s *Variables) LinkedVariables(ctx context.Context, repoID string) ([]Variable, error) {
	vs, err := queryAll(ctx, s.db, scanVariable, `SELECT v.id, '', v.name, coalesce(v.value, ''), v.sealed, v.sensitive, v.at_build, v.loads_code, v.set_by, v.set_at, v.source
		FROM variable_links l JOIN variables v ON v.id = l.variable_id WHERE l.repo_id = ? ORDER BY v.name`, repoID)
	for i := range vs {
		vs[i].Shared = true
	}
	return vs, err
}

// SessionVariables is what a Session of a Repo runs with: the Repo's own
// Variables and the Shared ones it links, Sensitive ones sealed.
func (s *Variables) SessionVariables(ctx context.Context, repoID string) ([]Variable, error) {
	own, err := s.List(ctx, repoID)
	if err != nil {
		return nil, err
	}
	linked, err := s.LinkedVariables(ctx, repoID)
	return append(own, linked...), err
}

// RepoByID returns a Repo, or ErrNotFound.
func (s *Repos) RepoByID(ctx context.Context, id string) (Repo, error) {
	r, err := scanRepo(s.db.QueryRowContext(ctx, `SELECT `+repoCols+` FROM repos WHERE id = ?`, id))
	return r, notFound(err, "repo "+id)
}

// List lists every Repo.
func (s *Repos) List(ctx context.Context) ([]Repo, error) {
	return queryAll(ctx, s.db, scanRepo, `SELECT `+repoCols+` FROM repos ORDER BY name`)
}

// AddSessionMask keeps a sealed value a Session must go on masking.
func (s *Variables) AddSessionMask(ctx context.Context, sessionID string, sealed []byte) error {
	_, err := s.exec(ctx, `INSERT INTO session_masks (session_id, sealed) VALUES (?, ?)`, sessionID, sealed)
	return err
}

// SessionMasks returns the sealed values a Session goes on masking.
func (s *Variables) SessionMasks(ctx context.Context, sessionID string) ([][]byte, error) {
	return queryAll(ctx, s.db, func(row scanner) ([]byte, error) {
		var b []byte
		err := row.Scan(&b)
		return b, err
	}, `SELECT sealed FROM session_masks WHERE session_id = ?`, sessionID)
}

// DropSessionMasks forgets them, once the Session no longer runs.
func (s *Variables) DropSessionMasks(ctx context.Context, sessionID string) error {
	_, err := s.exec(ctx, `DELETE FROM session_masks WHERE session_id = ?`, sessionID)
	return err
}
