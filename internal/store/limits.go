package store

import (
	"context"
	"database/sql"
	"math"
	"time"
)

// placeCol is a Session's place in its Creator's line (sessionCols): how
// many of the Creator's Sessions took a place no later than it; 0 while it
// is in none.
const placeCol = `CASE WHEN s.line_seq IS NULL THEN 0 ELSE (SELECT count(*) FROM sessions w WHERE w.creator_id = s.creator_id
	AND w.line_seq <= s.line_seq) END`

// nextInLine is the number a Session joining a line takes, in a statement
// joinLine runs.
const nextInLine = `(SELECT coalesce(max(line_seq), 0) + 1 FROM sessions)`

// joinLine runs query, which gives a Session a place with nextInLine, in
// the store's turn: PostgreSQL reads the highest place in each
// statement's own snapshot, so two Sessions joining at once outside it
// would take the same place (SQLite's one writer at a time would not).
func (s *handle) joinLine(ctx context.Context, query string, args ...any) (res sql.Result, err error) {
	err = s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		res, err = tx.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// RepoLimits are the limits a Repo's triggered Sessions run under, and
// the spend caps all its Sessions do (US dollars: MaxSpend a day for all
// its Sessions, MaxSessionSpend for one in all); 0 is none. GitHubAttempts
// lets a mention of the App with attempts=N start an attempt set (off by
// default).
type RepoLimits struct {
	MaxTurns        int
	MaxTurnHours    float64
	MaxSpend        float64
	MaxSessionSpend float64
	GitHubAttempts  bool
}

// TurnTime is MaxTurnHours as a duration.
func (l RepoLimits) TurnTime() time.Duration {
	return time.Duration(l.MaxTurnHours * float64(time.Hour))
}

// RepoLimits returns the Repo's limits, or ErrNotFound.
func (s *Repos) RepoLimits(ctx context.Context, repoID string) (RepoLimits, error) {
	var l RepoLimits
	var turnMS, spend, sessionSpend int64
	err := s.db.QueryRowContext(ctx, `SELECT max_turns, max_turn_ms, max_spend_micros, max_session_spend_micros, github_attempts FROM repos WHERE id = ?`,
		repoID).Scan(&l.MaxTurns, &turnMS, &spend, &sessionSpend, &l.GitHubAttempts)
	l.MaxTurnHours = float64(turnMS) / float64(time.Hour/time.Millisecond)
	l.MaxSpend, l.MaxSessionSpend = float64(spend)/1e6, float64(sessionSpend)/1e6
	return l, notFound(err, "repo "+repoID)
}

// SetRepoLimits sets the Repo's limits; its hours are kept to the
// millisecond, its caps to the millionth of a dollar.
func (s *Repos) SetRepoLimits(ctx context.Context, repoID string, l RepoLimits) error {
	_, err := s.exec(ctx, `UPDATE repos SET max_turns = ?, max_turn_ms = ?, max_spend_micros = ?, max_session_spend_micros = ?, github_attempts = ? WHERE id = ?`,
		l.MaxTurns, l.TurnTime().Milliseconds(), int64(math.Round(l.MaxSpend*1e6)), int64(math.Round(l.MaxSessionSpend*1e6)), l.GitHubAttempts, repoID)
	return err
}

// CountTurn counts a Turn the Session started and returns its Turns.
func (s *Limits) CountTurn(ctx context.Context, id string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `UPDATE sessions SET turns = turns + 1 WHERE id = ? RETURNING turns`, id).Scan(&n)
	return n, notFound(err, "session "+id)
}

// AddTurnTime adds a Turn's time to the Session's.
func (s *Limits) AddTurnTime(ctx context.Context, id string, d time.Duration) error {
	_, err := s.exec(ctx, `UPDATE sessions SET turn_ms = turn_ms + ? WHERE id = ?`, d.Milliseconds(), id)
	return err
}

// AwakeOf counts the creator's awake Sessions (starting, active or
// frozen).
func (s *Limits) AwakeOf(ctx context.Context, creatorID string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE creator_id = ? AND state IN (?, ?, ?)`,
		creatorID, Starting, Active, Frozen).Scan(&n)
	return n, err
}

// SetWaiting puts an asleep or failed Session at the end of its Creator's
// line for an awake place, keeping the place of one in it already.
// MoveSession takes it out as it wakes or is archived.
func (s *Limits) SetWaiting(ctx context.Context, id string) error {
	_, err := s.joinLine(ctx, `UPDATE sessions SET line_seq = coalesce(line_seq, `+nextInLine+`), updated_at = ? WHERE id = ? AND state IN (?, ?)`,
		ms(s.now()), id, Asleep, Failed)
	return err
}

// Waiting is a Session in its Creator's line, and the Runner it wakes on.
type Waiting struct{ SessionID, RunnerID string }

// Line lists the creator's Sessions waiting for an awake place, first
// first.
func (s *Limits) Line(ctx context.Context, creatorID string) ([]Waiting, error) {
	return queryAll(ctx, s.db, func(row scanner) (Waiting, error) {
		var w Waiting
		return w, row.Scan(&w.SessionID, &w.RunnerID)
	}, `SELECT id, runner_id FROM sessions WHERE line_seq IS NOT NULL AND creator_id = ? ORDER BY line_seq`, creatorID)
}

// LeaveLine takes a Session out of its Creator's line.
func (s *Limits) LeaveLine(ctx context.Context, id string) error {
	_, err := s.exec(ctx, `UPDATE sessions SET line_seq = NULL, updated_at = ? WHERE id = ?`, ms(s.now()), id)
	return err
}
