package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/errdefs"
)

// PromptState is where a prompt is on its way to Claude.
type PromptState string

const (
	Queued     PromptState = "queued"
	Delivering PromptState = "delivering"
	Delivered  PromptState = "delivered"
	Cancelled  PromptState = "cancelled"
)

// Prompt is a prompt waiting for, or given to, a Session.
type Prompt struct {
	ID          string
	SessionID   string
	AuthorID    string
	Text        string
	IsCommand   bool
	State       PromptState
	CreatedAt   time.Time
	DeliveredAt time.Time
	// Sealed is the text sealed under HUB_SECRETS_KEY (internal/hub/session
	// seals and opens it); Text is then empty in the store.
	Sealed []byte
	// Attachments are the files it carries, which the Runner places in
	// the Sandbox before typing it. EnqueuePrompt takes them by ID.
	Attachments []Attachment
	// Source is whose words it is when not its author's; zero for the
	// author's own.
	Source PromptSource
}

// PromptSource is whose words a prompt is when auto-fix queued them on
// its author's (the Creator's) behalf: Kind SourceReview with the
// reviewer's GitHub login, or SourceCheck with the check's name.
type PromptSource struct {
	Kind, Name string
}

// The kinds of a PromptSource.
const (
	SourceReview = "review"
	SourceCheck  = "check"
)

const promptCols = `id, session_id, author_id, text, is_command, state, created_at, delivered_at, sealed, source_kind, source_name`

func scanPrompt(row scanner) (Prompt, error) {
	var p Prompt
	var created int64
	var delivered sql.NullInt64
	err := row.Scan(&p.ID, &p.SessionID, &p.AuthorID, &p.Text, &p.IsCommand, &p.State, &created, &delivered, &p.Sealed, &p.Source.Kind, &p.Source.Name)
	p.CreatedAt, p.DeliveredAt = time.UnixMilli(created), fromMS(delivered)
	return p, err
}

// EnqueuePrompt queues a prompt at the end of a Session's queue, with the
// Attachments it names by ID: complete ones of the Session its author
// uploaded that no prompt carries yet (ErrNotFound for any other,
// ErrConflict for one another prompt carries, and then nothing is queued).
func (s *Prompts) EnqueuePrompt(ctx context.Context, p Prompt) (Prompt, error) {
	defer s.timed("enqueue_prompt")()
	p.ID, p.State, p.CreatedAt = uuid.NewString(), Queued, s.now()
	err := s.inTx(ctx, sessionTurn(p.SessionID), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO prompts (id, session_id, author_id, text, is_command, state, created_at, sealed, source_kind, source_name, position)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(position), 0) + 1 FROM prompts WHERE session_id = ?))`,
			p.ID, p.SessionID, p.AuthorID, p.Text, p.IsCommand, p.State, ms(p.CreatedAt), p.Sealed, p.Source.Kind, p.Source.Name, p.SessionID)
		if err != nil {
			return err
		}
		return nameAttachments(ctx, tx, &p)
	})
	return p, err
}

// withAttachments fills in the Attachments each prompt carries.
func (s *Prompts) withAttachments(ctx context.Context, ps []Prompt) ([]Prompt, error) {
	for i := range ps {
		as, err := s.PromptAttachments(ctx, ps[i].SessionID, ps[i].ID)
		if err != nil {
			return nil, err
		}
		ps[i].Attachments = as
	}
	return ps, nil
}

// List lists a Session's prompts that are not delivered or cancelled,
// in queue order.
func (s *Prompts) List(ctx context.Context, sessionID string) ([]Prompt, error) {
	ps, err := queryAll(ctx, s.db, scanPrompt, `SELECT `+promptCols+` FROM prompts WHERE session_id = ? AND state IN ('queued', 'delivering') ORDER BY state = 'queued', position, rowid`, sessionID)
	if err != nil {
		return nil, err
	}
	return s.withAttachments(ctx, ps)
}

// PromptByID returns one of a Session's prompts, or ErrNotFound.
func (s *Prompts) PromptByID(ctx context.Context, sessionID, id string) (Prompt, error) {
	p, err := scanPrompt(s.db.QueryRowContext(ctx, `SELECT `+promptCols+` FROM prompts WHERE session_id = ? AND id = ?`, sessionID, id))
	return p, notFound(err, "prompt "+id)
}

// EditPrompt replaces a queued prompt's text (plain, or sealed with the
// plain one empty), or cancels it when both are empty. Returns ErrConflict
// once it is being delivered or delivered.
func (s *Prompts) EditPrompt(ctx context.Context, sessionID, id, text string, sealed []byte) error {
	q, args := `UPDATE prompts SET text = ?, sealed = ? WHERE session_id = ? AND id = ? AND state = 'queued'`, []any{text, sealed, sessionID, id}
	if text == "" && sealed == nil {
		q, args = `UPDATE prompts SET state = 'cancelled' WHERE session_id = ? AND id = ? AND state = 'queued'`, []any{sessionID, id}
	}
	res, err := s.exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := s.PromptByID(ctx, sessionID, id); err != nil {
			return err
		}
		return fmt.Errorf("prompt %s is already on its way to Claude and can no longer change: %w", id, errdefs.ErrConflict)
	}
	return nil
}

// TakePrompt moves the Session's oldest queued prompt to Delivering and
// returns it; ok is false when the queue is empty or a prompt is already
// being delivered.
func (s *Prompts) TakePrompt(ctx context.Context, sessionID string) (p Prompt, ok bool, err error) {
	defer s.timed("take_prompt")()
	err = s.inTx(ctx, sessionTurn(sessionID), func(tx *sql.Tx) error {
		var busy int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM prompts WHERE session_id = ? AND state = 'delivering'`, sessionID).Scan(&busy); err != nil || busy > 0 {
			return err
		}
		p, err = scanPrompt(tx.QueryRowContext(ctx, `SELECT `+promptCols+` FROM prompts WHERE session_id = ? AND state = 'queued' ORDER BY position, rowid LIMIT 1`, sessionID))
		if err == sql.ErrNoRows {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		p.State = Delivering
		_, err = tx.ExecContext(ctx, `UPDATE prompts SET state = 'delivering' WHERE id = ?`, p.ID)
		return err
	})
	if ok && err == nil {
		p.Attachments, err = s.PromptAttachments(ctx, sessionID, p.ID)
	}
	return p, ok, err
}

// DeliveringPrompt returns the Session's prompt on its way (Delivering),
// ok false when none is: what a Hub that restarted finds of a delivery it
// has no memory of.
func (s *Prompts) DeliveringPrompt(ctx context.Context, sessionID string) (p Prompt, ok bool, err error) {
	p, err = scanPrompt(s.db.QueryRowContext(ctx, `SELECT `+promptCols+` FROM prompts WHERE session_id = ? AND state = 'delivering'`, sessionID))
	if err == sql.ErrNoRows {
		return Prompt{}, false, nil
	}
	if err != nil {
		return Prompt{}, false, err
	}
	p.Attachments, err = s.PromptAttachments(ctx, sessionID, p.ID)
	return p, err == nil, err
}

// DeliveringSessions returns the ids of the Sessions with a prompt on its
// way (Delivering): for a Hub's start, one read where DeliveringPrompt is
// one a Session.
func (s *Prompts) DeliveringSessions(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT session_id FROM prompts WHERE state = 'delivering'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids[id] = true
	}
	return ids, rows.Err()
}

// SetPromptState records a delivery's outcome, Delivered or Queued again
// at the head of the queue (to be delivered first), only if the prompt is
// still in state from: as MoveSession does, it returns ErrConflict naming
// both when something moved it meanwhile (a person cancelled it, another
// outcome was recorded), and ErrNotFound for no such prompt.
func (s *Prompts) SetPromptState(ctx context.Context, id string, from, to PromptState) error {
	defer s.timed("set_prompt_state")()
	q, args := `UPDATE prompts SET state = ?, delivered_at = ? WHERE id = ? AND state = ?`, []any{to, nil, id, from}
	switch to {
	case Queued:
		q = `UPDATE prompts SET state = ?, delivered_at = ?,
			position = (SELECT coalesce(min(q.position), 1) - 1 FROM prompts q WHERE q.session_id = prompts.session_id AND q.state = 'queued')
			WHERE id = ? AND state = ?`
	case Delivered:
		args[1] = ms(s.now())
	}
	res, err := s.exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var state PromptState
		err := s.db.QueryRowContext(ctx, `SELECT state FROM prompts WHERE id = ?`, id).Scan(&state)
		if err != nil {
			return notFound(err, "prompt "+id)
		}
		return fmt.Errorf("prompt %s is %s, not %s, so it cannot become %s: %w", id, state, from, to, errdefs.ErrConflict)
	}
	return nil
}

// MovePrompt moves a queued prompt to place to (from 1) in its Session's
// queue, or last when to is past its end. Returns ErrConflict once the
// prompt is on its way or delivered.
func (s *Prompts) MovePrompt(ctx context.Context, sessionID, id string, to int) error {
	return s.inTx(ctx, sessionTurn(sessionID), func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, position FROM prompts WHERE session_id = ? AND state = 'queued' ORDER BY position, rowid`, sessionID)
		if err != nil {
			return err
		}
		var ids []string
		var base int64
		for rows.Next() {
			var pid string
			var pos int64
			if err := rows.Scan(&pid, &pos); err != nil {
				rows.Close()
				return err
			}
			if len(ids) == 0 {
				base = pos
			}
			ids = append(ids, pid)
		}
		rows.Close()
		from := slices.Index(ids, id)
		if from < 0 {
			var state string
			err := tx.QueryRowContext(ctx, `SELECT state FROM prompts WHERE session_id = ? AND id = ?`, sessionID, id).Scan(&state)
			if err == sql.ErrNoRows {
				return fmt.Errorf("prompt %s: %w", id, errdefs.ErrNotFound)
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("prompt %s is %s, no longer in the queue: %w", id, state, errdefs.ErrConflict)
		}
		ids = slices.Delete(ids, from, from+1)
		at := min(max(to-1, 0), len(ids))
		ids = slices.Insert(ids, at, id)
		for i, pid := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE prompts SET position = ? WHERE id = ?`, base+int64(i), pid); err != nil {
				return err
			}
		}
		return nil
	})
}
