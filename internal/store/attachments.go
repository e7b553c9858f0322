package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/errdefs"
)

// Attachment is a file a Session's Creator attached to a prompt. Its bytes
// are kept apart, in chunks (PutAttachment, ReadAttachment).
type Attachment struct {
	ID        string
	SessionID string
	// PromptID is the prompt that carries it, once one names it.
	PromptID string
	// Name is the name it was uploaded with, for display; File its name
	// in the Sandbox, made safe.
	Name string
	File string
	// MediaType is sniffed from its bytes, for display only.
	MediaType string
	Size      int64
	SHA256    []byte
	// IsText is set when it was stored as text, through the Session's
	// redaction set.
	IsText    bool
	CreatedBy string
	CreatedAt time.Time
}

const attachmentCols = `id, session_id, prompt_id, name, file, media_type, size, sha256, is_text, created_by, created_at`

func scanAttachment(row scanner) (Attachment, error) {
	var a Attachment
	var prompt sql.NullString
	var created int64
	err := row.Scan(&a.ID, &a.SessionID, &prompt, &a.Name, &a.File, &a.MediaType, &a.Size, &a.SHA256, &a.IsText, &a.CreatedBy, &created)
	a.PromptID, a.CreatedAt = prompt.String, time.UnixMilli(created)
	return a, err
}

// chunkBytes is how much of an Attachment one row holds.
const chunkBytes = 256 << 10

// PutAttachment stores an Attachment of a Session (ID, size and SHA-256 are
// set here), its bytes read from r a chunk at a time, each chunk its own
// write: a slow upload holds no transaction, and no more than a chunk is in
// memory. It is complete, and shown, once all of it is in. total is the
// most a Session's Attachments may hold together: past it, PutAttachment
// stores nothing and returns an ErrTooLarge. A read error (wrapped) stores
// nothing either.
func (s *Prompts) PutAttachment(ctx context.Context, a Attachment, r io.Reader, total int64) (Attachment, error) {
	a.ID, a.CreatedAt, a.Size, a.PromptID = uuid.NewString(), s.now(), 0, ""
	_, err := s.exec(ctx, `INSERT INTO attachments (`+attachmentCols+`, complete) VALUES (?, ?, NULL, ?, ?, ?, 0, NULL, ?, ?, ?, 0)`,
		a.ID, a.SessionID, a.Name, a.File, a.MediaType, a.IsText, a.CreatedBy, ms(a.CreatedAt))
	if err != nil {
		return a, err
	}
	err = s.putChunks(ctx, &a, r, total)
	if err != nil {
		// The request may have ended with its client: clean up regardless.
		s.deleteAttachment(context.WithoutCancel(ctx), a.ID)
	}
	return a, err
}

func (s *Prompts) putChunks(ctx context.Context, a *Attachment, r io.Reader, total int64) error {
	full := func() error {
		return fmt.Errorf("the Session's attachments would come to more than %d bytes: %w", total, errdefs.ErrTooLarge)
	}
	used, err := s.attachmentBytes(ctx, s.db, a.SessionID)
	if err != nil {
		return err
	}
	h := sha256.New()
	buf := make([]byte, chunkBytes)
	for n := 0; ; n++ {
		k, rerr := io.ReadFull(r, buf)
		if k > 0 {
			a.Size += int64(k)
			if used+a.Size > total {
				return full()
			}
			h.Write(buf[:k])
			if _, err := s.exec(ctx, `INSERT INTO attachment_chunks (attachment_id, n, data) VALUES (?, ?, ?)`, a.ID, n, buf[:k]); err != nil {
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("read the file: %w", rerr)
		}
	}
	a.SHA256 = h.Sum(nil)
	// Uploads of one Session may run side by side: the total is checked
	// again as this one completes.
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		used, err := s.attachmentBytes(ctx, tx, a.SessionID)
		if err != nil {
			return err
		}
		if used+a.Size > total {
			return full()
		}
		_, err = tx.ExecContext(ctx, `UPDATE attachments SET size = ?, sha256 = ?, complete = 1 WHERE id = ?`, a.Size, a.SHA256, a.ID)
		return err
	})
}

// attachmentBytes is what a Session's complete Attachments hold.
func (s *Prompts) attachmentBytes(ctx context.Context, q querier, sessionID string) (int64, error) {
	var n int64
	err := q.QueryRowContext(ctx, `SELECT coalesce(sum(size), 0) FROM attachments WHERE session_id = ? AND complete = 1`, sessionID).Scan(&n)
	return n, err
}

func (s *Prompts) deleteAttachment(ctx context.Context, id string) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM attachment_chunks WHERE attachment_id = ?`, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM attachments WHERE id = ?`, id)
		return err
	})
}

// DropStaleAttachments deletes a Session's Attachments left incomplete since
// before incomplete (an upload the Hub stopped in the middle of), and those
// no prompt named since before unnamed.
func (s *Prompts) DropStaleAttachments(ctx context.Context, sessionID string, incomplete, unnamed time.Time) error {
	ids, err := queryAll(ctx, s.db, scanString, `SELECT id FROM attachments WHERE session_id = ? AND ((complete = 0 AND created_at < ?) OR (prompt_id IS NULL AND created_at < ?))`,
		sessionID, ms(incomplete), ms(unnamed))
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := s.deleteAttachment(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// Attachments lists a Session's complete Attachments, oldest first.
func (s *Prompts) Attachments(ctx context.Context, sessionID string) ([]Attachment, error) {
	return queryAll(ctx, s.db, scanAttachment, `SELECT `+attachmentCols+` FROM attachments WHERE session_id = ? AND complete = 1 ORDER BY created_at, rowid`, sessionID)
}

// AttachmentByID returns one of a Session's complete Attachments, or
// ErrNotFound.
func (s *Prompts) AttachmentByID(ctx context.Context, sessionID, id string) (Attachment, error) {
	a, err := scanAttachment(s.db.QueryRowContext(ctx, `SELECT `+attachmentCols+` FROM attachments WHERE session_id = ? AND id = ? AND complete = 1`, sessionID, id))
	return a, notFound(err, "attachment "+id)
}

// PromptAttachments lists the Attachments a Session's prompt carries, in
// the order they were uploaded.
func (s *Prompts) PromptAttachments(ctx context.Context, sessionID, promptID string) ([]Attachment, error) {
	return queryAll(ctx, s.db, scanAttachment, `SELECT `+attachmentCols+` FROM attachments WHERE session_id = ? AND prompt_id = ? AND complete = 1 ORDER BY created_at, rowid`, sessionID, promptID)
}

// ReadAttachment writes an Attachment's bytes to w, a chunk per query, so a
// slow reader holds no transaction open.
func (s *Prompts) ReadAttachment(ctx context.Context, id string, w io.Writer) error {
	for n := 0; ; n++ {
		var data []byte
		err := s.db.QueryRowContext(ctx, `SELECT data FROM attachment_chunks WHERE attachment_id = ? AND n = ?`, id, n).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
}

// nameAttachments gives a new prompt the Attachments it names: complete
// ones of its Session, uploaded by its author, that no prompt carries yet.
// Returns ErrNotFound for any other, ErrConflict for one another prompt
// carries.
func nameAttachments(ctx context.Context, tx *sql.Tx, p *Prompt) error {
	for i, a := range p.Attachments {
		res, err := tx.ExecContext(ctx, `UPDATE attachments SET prompt_id = ? WHERE id = ? AND session_id = ? AND created_by = ? AND complete = 1 AND prompt_id IS NULL`,
			p.ID, a.ID, p.SessionID, p.AuthorID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			p.Attachments[i], err = scanAttachment(tx.QueryRowContext(ctx, `SELECT `+attachmentCols+` FROM attachments WHERE id = ?`, a.ID))
			if err != nil {
				return err
			}
			continue
		}
		var prompt sql.NullString
		err = tx.QueryRowContext(ctx, `SELECT prompt_id FROM attachments WHERE id = ? AND session_id = ? AND created_by = ? AND complete = 1`, a.ID, p.SessionID, p.AuthorID).Scan(&prompt)
		if err == nil && prompt.Valid {
			return fmt.Errorf("attachment %s is already on another prompt: attach the file again: %w", a.ID, errdefs.ErrConflict)
		}
		return fmt.Errorf("attachment %s: no such file was attached to this Session (upload it first, or attach it again: one not sent with a prompt within a day is deleted): %w", a.ID, errdefs.ErrNotFound)
	}
	return nil
}
