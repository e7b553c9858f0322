package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// deliveryKeep is how long a webhook delivery's id is kept: past GitHub's
// three days of redeliveries, with room.
const deliveryKeep = 7 * 24 * time.Hour

// digestKeep is how long a webhook delivery's body digest makes the same
// body a duplicate under another delivery id.
const digestKeep = 24 * time.Hour

// TakeDelivery records a GitHub webhook delivery's id and its body's
// digest (SHA-256, hex) with its work (the body to act on; nil for none),
// in one transaction, and reports whether it is new: false for an id
// taken before, or a body taken within digestKeep under any id, which the
// caller then ignores; a duplicate records nothing. Work recorded stays
// pending until DoneDelivery, across a restart too: the ids kept a week
// are dropped only once their work is done, so work a stopped Hub left is
// never lost however long it stayed stopped.
func (s *Threads) TakeDelivery(ctx context.Context, id, event, digest string, work []byte) (bool, error) {
	now := s.now()
	var fresh bool
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE received_at < ? AND work IS NULL`, ms(now.Add(-deliveryKeep))); err != nil {
			return err
		}
		var seen int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_deliveries WHERE digest = ? AND received_at >= ?`,
			digest, ms(now.Add(-digestKeep))).Scan(&seen); err != nil || seen > 0 {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, event, received_at, work, digest) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`, id, event, ms(now), work, digest)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		fresh = n == 1
		return err
	})
	return fresh, err
}

// takeOnce, in one transaction, drops the rows older than since (drop)
// and inserts a row (insert, ON CONFLICT DO NOTHING), and reports whether
// it did: false for a row of the same key taken within the time kept.
func (s *Threads) takeOnce(ctx context.Context, drop string, since int64, insert string, args ...any) (bool, error) {
	var fresh bool
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, drop, since); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, insert, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		fresh = n == 1
		return err
	})
	return fresh, err
}

// Delivery is a webhook delivery whose work is not done yet.
type Delivery struct {
	ID, Event string
	Work      []byte
}

// NextDelivery returns the oldest delivery whose work is not done; ok is
// false when there is none.
func (s *Threads) NextDelivery(ctx context.Context) (d Delivery, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT id, event, work FROM webhook_deliveries WHERE work IS NOT NULL ORDER BY received_at, rowid LIMIT 1`).
		Scan(&d.ID, &d.Event, &d.Work)
	if errors.Is(err, sql.ErrNoRows) {
		return d, false, nil
	}
	return d, err == nil, err
}

// DoneDelivery records that a delivery's work is done, dropping it; its
// id stays taken.
func (s *Threads) DoneDelivery(ctx context.Context, id string) error {
	_, err := s.exec(ctx, `UPDATE webhook_deliveries SET work = NULL WHERE id = ?`, id)
	return err
}

// Thread is a GitHub issue or pull request a Session was started from.
type Thread struct {
	SessionID string
	Repo      string // lower-case owner/name
	Issue     int
	ReplyID   int64 // the Hub's comment in the thread; 0 until posted
	// Note is what the reply says of the thread's own events, under the
	// Session's status.
	Note string
}

const threadCols = `session_id, repo, issue, reply_id, note`

func scanThread(row scanner) (Thread, error) {
	var t Thread
	return t, row.Scan(&t.SessionID, &t.Repo, &t.Issue, &t.ReplyID, &t.Note)
}

// AddThread records the thread a Session was started from.
func (s *Threads) AddThread(ctx context.Context, t Thread) error {
	_, err := s.exec(ctx, `INSERT INTO session_threads (session_id, repo, issue, reply_id, created_at) VALUES (?, ?, ?, ?, ?)`,
		t.SessionID, t.Repo, t.Issue, t.ReplyID, ms(s.now()))
	return err
}

// SetThreadReply records the Hub's comment in a Session's thread.
func (s *Threads) SetThreadReply(ctx context.Context, sessionID string, replyID int64) error {
	_, err := s.exec(ctx, `UPDATE session_threads SET reply_id = ? WHERE session_id = ?`, replyID, sessionID)
	return err
}

// ThreadSessions lists the Sessions started from issue number issue of
// repo (lower-case owner/name), newest first.
func (s *Threads) ThreadSessions(ctx context.Context, repo string, issue int) ([]Thread, error) {
	return queryAll(ctx, s.db, scanThread, `SELECT `+threadCols+` FROM session_threads WHERE repo = ? AND issue = ? ORDER BY created_at DESC`, repo, issue)
}

// SessionThread returns the thread a Session was started from, or
// ErrNotFound for one a person started: where its reply follows it, and a
// limit it reached or a check sent back to it is told.
func (s *Threads) SessionThread(ctx context.Context, sessionID string) (Thread, error) {
	t, err := scanThread(s.db.QueryRowContext(ctx, `SELECT `+threadCols+` FROM session_threads WHERE session_id = ?`, sessionID))
	return t, notFound(err, "thread of session "+sessionID)
}

// SetThreadNote records what the Hub's reply in a Session's thread says
// of the thread's own events.
func (s *Threads) SetThreadNote(ctx context.Context, sessionID, note string) error {
	_, err := s.exec(ctx, `UPDATE session_threads SET note = ? WHERE session_id = ?`, note, sessionID)
	return err
}

// TriggerLabel returns the Repo's trigger label, "" for none.
func (s *Repos) TriggerLabel(ctx context.Context, repoID string) (string, error) {
	var label string
	err := s.db.QueryRowContext(ctx, `SELECT trigger_label FROM repos WHERE id = ?`, repoID).Scan(&label)
	return label, notFound(err, "repo "+repoID)
}

// SetTriggerLabel sets the Repo's trigger label; "" turns it off.
func (s *Repos) SetTriggerLabel(ctx context.Context, repoID, label string) error {
	_, err := s.exec(ctx, `UPDATE repos SET trigger_label = ? WHERE id = ?`, label, repoID)
	return err
}

// MemberByGitHubID returns the live Member with GitHub's user id, or
// ErrNotFound. Unlike MemberByGitHub it changes nothing: a webhook's word
// on someone's login is not a sign-in.
func (s *Members) MemberByGitHubID(ctx context.Context, id int64) (User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE github_id = ? AND removed_at IS NULL`, id))
	return u, notFound(err, "member")
}

// refusalGap is how long a person's refusal in a thread stands before
// another mention of theirs there gets one more.
const refusalGap = 24 * time.Hour

// TakeRefusal records that the App tells GitHub user githubID in issue
// number issue of repo (lower-case owner/name) that they may not start a
// Session, and reports whether it may: false when it did within the last
// day, so one person's comments cannot make the App post a stream.
func (s *Threads) TakeRefusal(ctx context.Context, repo string, issue int, githubID int64) (bool, error) {
	now := s.now()
	return s.takeOnce(ctx, `DELETE FROM trigger_refusals WHERE refused_at < ?`, ms(now.Add(-refusalGap)),
		`INSERT INTO trigger_refusals (repo, issue, github_id, refused_at) VALUES (?, ?, ?, ?) ON CONFLICT (repo, issue, github_id) DO NOTHING`,
		repo, issue, githubID, ms(now))
}
