package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/google/uuid"
)

// AttemptSet is one prompt started as several Sessions at once, its
// attempts' Session ids in their places' order.
type AttemptSet struct {
	ID, CreatorID, RepoID, Title string
	CreatedAt                    time.Time
	Sessions                     []string
}

// CreateAttemptSet records a new attempt set with no attempts yet.
func (s *Attempts) CreateAttemptSet(ctx context.Context, x AttemptSet) (AttemptSet, error) {
	x.ID, x.CreatedAt, x.Sessions = uuid.NewString(), time.UnixMilli(ms(s.now())), nil
	_, err := s.exec(ctx, `INSERT INTO attempt_sets (id, creator_id, repo_id, title, created_at) VALUES (?, ?, ?, ?, ?)`,
		x.ID, x.CreatorID, x.RepoID, x.Title, ms(x.CreatedAt))
	return x, err
}

// AddAttempt records Session sessionID as the set's attempt at place.
func (s *Attempts) AddAttempt(ctx context.Context, setID string, place int, sessionID string) error {
	_, err := s.exec(ctx, `INSERT INTO attempts (set_id, place, session_id) VALUES (?, ?, ?)`, setID, place, sessionID)
	return err
}

// AttemptSetByID returns an attempt set, or ErrNotFound.
func (s *Attempts) AttemptSetByID(ctx context.Context, id string) (AttemptSet, error) {
	var x AttemptSet
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT id, creator_id, repo_id, title, created_at FROM attempt_sets WHERE id = ?`, id).
		Scan(&x.ID, &x.CreatorID, &x.RepoID, &x.Title, &at)
	if err != nil {
		return x, notFound(err, "attempt set "+id)
	}
	x.CreatedAt = time.UnixMilli(at)
	x.Sessions, err = queryAll(ctx, s.db, scanString, `SELECT session_id FROM attempts WHERE set_id = ? ORDER BY place`, id)
	return x, err
}

// AttemptSetOf returns the attempt set Session sessionID is an attempt
// of, or ErrNotFound when it is none's.
func (s *Attempts) AttemptSetOf(ctx context.Context, sessionID string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT set_id FROM attempts WHERE session_id = ?`, sessionID).Scan(&id)
	return id, notFound(err, "attempt of session "+sessionID)
}

// LastTurnStart returns the seq of the Session's last turn_start, its
// Turn as its usage is counted (0: before any).
func (s *Attempts) LastTurnStart(ctx context.Context, sessionID string) (int64, error) {
	var turn int64
	// By the index of Turn starts (migration 0022).
	err := s.db.QueryRowContext(ctx, `SELECT seq FROM events WHERE session_id = ? AND kind = 'turn_start' ORDER BY seq DESC LIMIT 1`,
		sessionID).Scan(&turn)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return turn, err
}

// TurnCheck is the Environment's check as it ran after one of a Session's
// Turns (Turn: the seq of its turn_start, as TurnUsage's).
type TurnCheck struct {
	SessionID string
	Turn      int64
	ExitCode  int
	Duration  time.Duration
	TimedOut  bool
	Output    string
	Error     string
	At        time.Time
}

// Passed says the check ran and exited 0.
func (c TurnCheck) Passed() bool { return c.Error == "" && !c.TimedOut && c.ExitCode == 0 }

// RecordTurnCheck keeps a Turn's check; a Turn's first is kept, another
// for it is dropped.
func (s *Attempts) RecordTurnCheck(ctx context.Context, c TurnCheck) error {
	_, err := s.exec(ctx, `INSERT INTO turn_checks (session_id, turn, exit_code, duration_ms, timed_out, output, error, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, turn) DO NOTHING`,
		c.SessionID, c.Turn, c.ExitCode, c.Duration.Milliseconds(), c.TimedOut, c.Output, c.Error, ms(c.At))
	return err
}

// TurnChecks lists a Session's checks in their Turns' order.
func (s *Attempts) TurnChecks(ctx context.Context, sessionID string) ([]TurnCheck, error) {
	return queryAll(ctx, s.db, func(row scanner) (TurnCheck, error) {
		var c TurnCheck
		var d, at int64
		err := row.Scan(&c.SessionID, &c.Turn, &c.ExitCode, &d, &c.TimedOut, &c.Output, &c.Error, &at)
		c.Duration, c.At = time.Duration(d)*time.Millisecond, time.UnixMilli(at)
		return c, err
	}, `SELECT session_id, turn, exit_code, duration_ms, timed_out, output, error, at FROM turn_checks WHERE session_id = ? ORDER BY turn`, sessionID)
}

// AttemptReady marks Session sessionID's attempt ready: its first Turn,
// and that Turn's check if any, ended. It reports the set's id, and true
// if this made the set ready: every attempt ready, or ended as a Session
// (failed or archived) without. That is true once per set, whichever call
// or Hub process gets there: the set's mark is set in one statement.
func (s *Attempts) AttemptReady(ctx context.Context, sessionID string) (string, bool, error) {
	setID, err := s.AttemptSetOf(ctx, sessionID)
	if err != nil {
		return "", false, err
	}
	now := ms(s.now())
	if _, err := s.exec(ctx, `UPDATE attempts SET ready_at = ? WHERE session_id = ? AND ready_at IS NULL`, now, sessionID); err != nil {
		return setID, false, err
	}
	res, err := s.exec(ctx, `UPDATE attempt_sets SET ready_at = ? WHERE id = ? AND ready_at IS NULL AND NOT EXISTS (
		SELECT 1 FROM attempts a JOIN sessions s ON s.id = a.session_id
		WHERE a.set_id = ? AND a.ready_at IS NULL AND s.state NOT IN (?, ?))`, now, setID, setID, Failed, Archived)
	if err != nil {
		return setID, false, err
	}
	n, err := res.RowsAffected()
	return setID, n == 1, err
}
