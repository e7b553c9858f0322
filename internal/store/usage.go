package store

import (
	"context"
	"database/sql"
	"time"
)

// Usage is the tokens model replies of one model used, as the Messages
// API counts them.
type Usage struct {
	Model                                string
	Input, Output, CacheRead, CacheWrite int64
}

// Reply is one model reply's usage, counted once by its Message id
// however often it is appended (AppendEvents).
type Reply struct {
	Message string
	Usage
}

// TurnUsage is what a Session's Turn spent on one model; Turn is the seq
// of the turn_start that began it (0: before any).
type TurnUsage struct {
	Turn int64
	Usage
}

// usageCols sums a query's session_usage rows u, by model.
const usageCols = `u.model, sum(u.input), sum(u.output), sum(u.cache_read), sum(u.cache_write)`

func scanUsage(row scanner, before ...any) (Usage, error) {
	var u Usage
	err := row.Scan(append(before, &u.Model, &u.Input, &u.Output, &u.CacheRead, &u.CacheWrite)...)
	return u, err
}

// countReplies counts the Replies of evs in their Turns, and gives each
// Event whose SumTurn is set its Data from the Turn's sums, in tx, as
// AppendEvents numbers them: last is the seq before evs'.
func countReplies(ctx context.Context, tx *sql.Tx, sessionID string, last int64, evs []Event) error {
	if !needsTurn(evs) {
		return nil
	}
	// By the index of Turn starts (migration 0022).
	var turn int64
	err := tx.QueryRowContext(ctx, `SELECT seq FROM events WHERE session_id = ? AND kind = 'turn_start' ORDER BY seq DESC LIMIT 1`,
		sessionID).Scan(&turn)
	if err != nil && err != sql.ErrNoRows {
		return err
	}
	for i := range evs {
		e := &evs[i]
		if e.Kind == "turn_start" {
			prev := turn
			turn = last + int64(i) + 1
			// The relay's count of the Turn's first reply may come before
			// the transcript's turn_start (CountReplies), counted after it began:
			// it is this Turn's.
			if _, err := tx.ExecContext(ctx, `UPDATE session_usage SET turn = ? WHERE session_id = ? AND turn = ? AND at > ?`,
				turn, sessionID, prev, ms(e.At)); err != nil {
				return err
			}
		}
		if r := e.Reply; r != nil {
			if err := countReply(ctx, tx, sessionID, turn, *r, e.At); err != nil {
				return err
			}
		}
		if e.SumTurn != nil {
			sums, err := queryAll(ctx, tx, func(row scanner) (Usage, error) { return scanUsage(row) },
				`SELECT `+usageCols+` FROM session_usage u WHERE u.session_id = ? AND u.turn = ? GROUP BY u.model ORDER BY u.model`, sessionID, turn)
			if err != nil {
				return err
			}
			if e.Data, err = e.SumTurn(sums); err != nil {
				return err
			}
		}
	}
	return nil
}

// countReply counts one reply in turn, with the largest of each count it
// was seen with: a reply's first count may be its usage as its stream
// began.
func countReply(ctx context.Context, tx *sql.Tx, sessionID string, turn int64, r Reply, at time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO session_usage (session_id, message, turn, model, input, output, cache_read, cache_write, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (session_id, message) DO UPDATE SET
			input = CASE WHEN excluded.input > session_usage.input THEN excluded.input ELSE session_usage.input END,
			output = CASE WHEN excluded.output > session_usage.output THEN excluded.output ELSE session_usage.output END,
			cache_read = CASE WHEN excluded.cache_read > session_usage.cache_read THEN excluded.cache_read ELSE session_usage.cache_read END,
			cache_write = CASE WHEN excluded.cache_write > session_usage.cache_write THEN excluded.cache_write ELSE session_usage.cache_write END`,
		sessionID, r.Message, turn, r.Model, r.Input, r.Output, r.CacheRead, r.CacheWrite, ms(at))
	return err
}

// CountReplies counts model replies a Session's Runner's relay read from
// the model API's answers, each in the Turn that runs (the last turn_start
// stored), once by its Message id with the largest of each count.
func (s *UsageLog) CountReplies(ctx context.Context, sessionID string, rs []Reply, at time.Time) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var turn int64
		err := tx.QueryRowContext(ctx, `SELECT seq FROM events WHERE session_id = ? AND kind = 'turn_start' ORDER BY seq DESC LIMIT 1`,
			sessionID).Scan(&turn)
		if err != nil && err != sql.ErrNoRows {
			return err
		}
		for _, r := range rs {
			if err := countReply(ctx, tx, sessionID, turn, r, at); err != nil {
				return err
			}
		}
		return nil
	})
}

func needsTurn(evs []Event) bool {
	for _, e := range evs {
		if e.Reply != nil || e.SumTurn != nil || e.Kind == "turn_start" {
			return true
		}
	}
	return false
}

// SessionUsage is what a Session spent, by model.
func (s *UsageLog) SessionUsage(ctx context.Context, sessionID string) ([]Usage, error) {
	return queryAll(ctx, s.db, func(row scanner) (Usage, error) { return scanUsage(row) },
		`SELECT `+usageCols+` FROM session_usage u WHERE u.session_id = ? GROUP BY u.model ORDER BY u.model`, sessionID)
}

// SessionTurnUsage is what each of a Session's Turns spent, by model, in
// the Turns' order.
func (s *UsageLog) SessionTurnUsage(ctx context.Context, sessionID string) ([]TurnUsage, error) {
	return queryAll(ctx, s.db, func(row scanner) (TurnUsage, error) {
		var t TurnUsage
		var err error
		t.Usage, err = scanUsage(row, &t.Turn)
		return t, err
	}, `SELECT u.turn, `+usageCols+` FROM session_usage u WHERE u.session_id = ? GROUP BY u.turn, u.model ORDER BY u.turn, u.model`, sessionID)
}

// UsageDay is what one Member's Sessions in one Repo spent on one model
// on one day (UTC).
type UsageDay struct {
	Day       time.Time
	CreatorID string
	RepoID    string
	Usage
}

// UsageByDay is what Sessions spent since (by the replies' times, from
// the start of its day in UTC), by day, Creator, Repo and model, newest
// day first; only creatorID's Sessions unless it is "".
func (s *UsageLog) UsageByDay(ctx context.Context, since time.Time, creatorID string) ([]UsageDay, error) {
	const day = 24 * time.Hour
	return queryAll(ctx, s.db, func(row scanner) (UsageDay, error) {
		var d UsageDay
		var n int64
		var err error
		d.Usage, err = scanUsage(row, &n, &d.CreatorID, &d.RepoID)
		d.Day = time.UnixMilli(n * day.Milliseconds()).UTC()
		return d, err
	}, `SELECT u.at / 86400000, s.creator_id, s.repo_id, `+usageCols+` FROM session_usage u JOIN sessions s ON s.id = u.session_id
		WHERE u.at >= ? AND (? = '' OR s.creator_id = ?)
		GROUP BY 1, 2, 3, 4 ORDER BY 1 DESC, 2, 3, 4`,
		ms(since.UTC().Truncate(day)), creatorID, creatorID)
}

// SessionsUsage is what each of the Sessions spent, by model, keyed by
// Session id (none for one that spent nothing): one query for a list's
// rows, not one a row, up to idChunk of them.
func (s *UsageLog) SessionsUsage(ctx context.Context, ids []string) (map[string][]Usage, error) {
	defer s.timed("sessions_usage")()
	out := map[string][]Usage{}
	err := eachChunk(ids, func(in string, args []any) error {
		type idUsage struct {
			id string
			Usage
		}
		rows, err := queryAll(ctx, s.db, func(row scanner) (idUsage, error) {
			var r idUsage
			var err error
			r.Usage, err = scanUsage(row, &r.id)
			return r, err
		}, `SELECT u.session_id, `+usageCols+` FROM session_usage u WHERE u.session_id IN (`+in+`)
			GROUP BY u.session_id, u.model ORDER BY u.session_id, u.model`, args...)
		for _, r := range rows {
			out[r.id] = append(out[r.id], r.Usage)
		}
		return err
	})
	return out, err
}
