package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Fork is a Session started as a copy of another, its parent, as it was
// at the end of one of the parent's Turns.
type Fork struct {
	SessionID string
	ParentID  string
	Turn      int
	CreatedAt time.Time
}

// CreateFork records Session id, a fork of parent at the end of Turn
// turn, Asleep and in no line, with parent's Repo, Creator, Runner,
// model, effort and Environment version. Offsets are where the
// conversation it carries ends: with any, Claude Code has written it down
// and a wake resumes it. The caller chose id (the Runner copied under it).
func (s *Sessions) CreateFork(ctx context.Context, parent Session, id, title string, turn int, offsets map[string]int64) (Session, error) {
	raw, err := json.Marshal(offsets)
	if err != nil {
		return Session{}, err
	}
	if offsets == nil {
		raw = []byte("{}")
	}
	now := ms(s.now())
	err = s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, repo_id, creator_id, runner_id, title, model, effort, state, conversation, transcript_offsets, environment_version, created_at, updated_at)
			SELECT ?, repo_id, creator_id, runner_id, ?, model, effort, ?, ?, ?, environment_version, ?, ? FROM sessions WHERE id = ?`,
			id, title, Asleep, len(offsets) > 0, string(raw), now, now, parent.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound(sql.ErrNoRows, "session "+parent.ID)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO session_forks (session_id, parent_id, turn, created_at) VALUES (?, ?, ?, ?)`, id, parent.ID, turn, now)
		return err
	})
	if err != nil {
		return Session{}, fmt.Errorf("record fork: %w", err)
	}
	return s.SessionByID(ctx, id)
}

// ForkOf returns what Session id was forked from; ok is false for a
// Session that is no fork.
func (s *Sessions) ForkOf(ctx context.Context, id string) (f Fork, ok bool, err error) {
	var at int64
	err = s.db.QueryRowContext(ctx, `SELECT session_id, parent_id, turn, created_at FROM session_forks WHERE session_id = ?`, id).
		Scan(&f.SessionID, &f.ParentID, &f.Turn, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Fork{}, false, nil
	}
	f.CreatedAt = time.UnixMilli(at)
	return f, err == nil, err
}

// Lineage is AttemptSetOf and ForkOf in one read, for a Session view's
// every message: the attempt set Session id is an attempt of ("" for
// none), and what it was forked from (ok false for no fork).
func (s *Sessions) Lineage(ctx context.Context, id string) (set string, f Fork, ok bool, err error) {
	var nset, parent sql.NullString
	var turn, at sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT a.set_id, f.parent_id, f.turn, f.created_at FROM (SELECT CAST(? AS TEXT) AS id) x
		LEFT JOIN attempts a ON a.session_id = x.id LEFT JOIN session_forks f ON f.session_id = x.id`, id).Scan(&nset, &parent, &turn, &at)
	if err != nil || !parent.Valid {
		return nset.String, Fork{}, false, err
	}
	return nset.String, Fork{SessionID: id, ParentID: parent.String, Turn: int(turn.Int64), CreatedAt: time.UnixMilli(at.Int64)}, true, nil
}

// Forks lists the forks of Session id, oldest first.
func (s *Sessions) Forks(ctx context.Context, id string) ([]Fork, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT session_id, parent_id, turn, created_at FROM session_forks WHERE parent_id = ? ORDER BY created_at, session_id`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Fork
	for rows.Next() {
		var f Fork
		var at int64
		if err := rows.Scan(&f.SessionID, &f.ParentID, &f.Turn, &at); err != nil {
			return nil, err
		}
		f.CreatedAt = time.UnixMilli(at)
		out = append(out, f)
	}
	return out, rows.Err()
}
