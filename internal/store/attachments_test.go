package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// devSession makes a Session of the dev user's.
func devSession(t testing.TB, s *Store) (Session, User) {
	t.Helper()
	ctx := context.Background()
	u, _ := s.Members.DevUser(ctx)
	rn, _, _ := s.Runners.CreateRunner(ctx, "r", u.ID)
	repo, _ := s.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	x, err := s.Sessions.CreateSession(ctx, Session{RepoID: repo.ID, CreatorID: u.ID, RunnerID: rn.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return x, u
}

// stored counts the attachment rows and chunks the store holds.
func stored(t *testing.T, s *Store) (rows, chunks int) {
	t.Helper()
	s.db.QueryRow(`SELECT count(*) FROM attachments`).Scan(&rows)
	s.db.QueryRow(`SELECT count(*) FROM attachment_chunks`).Scan(&chunks)
	return rows, chunks
}

// TestAttachmentsAreStoredInChunksAndCarriedByOnePrompt: a file is kept in
// chunks and read back byte for byte with its size and SHA-256; a prompt
// takes the Attachments it names, which no other prompt can take then, and
// the queue and the delivery carry them.
func TestAttachmentsAreStoredInChunksAndCarriedByOnePrompt(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, u := devSession(t, s)
		data := bytes.Repeat([]byte("0123456789abcdef"), (2*chunkBytes+1000)/16)
		a, err := s.Prompts.PutAttachment(ctx, Attachment{SessionID: x.ID, Name: "big file.txt", File: "big_file.txt", MediaType: "text/plain", IsText: true, CreatedBy: u.ID},
			bytes.NewReader(data), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if a.Size != int64(len(data)) || !bytes.Equal(a.SHA256, sum[:]) {
			t.Fatalf("stored %d bytes, sha %x; want %d, %x", a.Size, a.SHA256, len(data), sum)
		}
		if _, chunks := stored(t, s); chunks != 3 {
			t.Fatalf("%d chunks for %d bytes, want 3", chunks, len(data))
		}
		var back bytes.Buffer
		if err := s.Prompts.ReadAttachment(ctx, a.ID, &back); err != nil || !bytes.Equal(back.Bytes(), data) {
			t.Fatalf("read back %d bytes (%v), want the %d stored", back.Len(), err, len(data))
		}
		got, err := s.Prompts.AttachmentByID(ctx, x.ID, a.ID)
		if err != nil || got.Name != "big file.txt" || got.File != "big_file.txt" || !got.IsText || got.PromptID != "" {
			t.Fatalf("AttachmentByID = %+v, %v", got, err)
		}

		other := "11111111-2222-4333-8444-555555555555"
		if _, err := s.db.Exec(`INSERT INTO users (id, name, is_owner, is_dev, created_at) VALUES (?, 'bob', 0, 0, 0)`, other); err != nil {
			t.Fatal(err)
		}
		bobs, err := s.Prompts.PutAttachment(ctx, Attachment{SessionID: x.ID, Name: "b.png", File: "b.png", MediaType: "image/png", CreatedBy: other}, strings.NewReader("png"), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		queue := func(ids ...string) (Prompt, error) {
			p := Prompt{SessionID: x.ID, AuthorID: u.ID, Text: "look"}
			for _, id := range ids {
				p.Attachments = append(p.Attachments, Attachment{ID: id})
			}
			return s.Prompts.EnqueuePrompt(ctx, p)
		}
		tests := []struct {
			name string
			ids  []string
			want error
		}{
			{"no such attachment", []string{"nope"}, errdefs.ErrNotFound},
			{"someone else's", []string{bobs.ID}, errdefs.ErrNotFound},
			{"one good, one not", []string{a.ID, "nope"}, errdefs.ErrNotFound},
		}
		for _, tt := range tests {
			if _, err := queue(tt.ids...); !errors.Is(err, tt.want) {
				t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
			}
		}
		if q, _ := s.Prompts.List(ctx, x.ID); len(q) != 0 {
			t.Fatalf("refused prompts were queued: %+v", q)
		}
		p, err := queue(a.ID)
		if err != nil || len(p.Attachments) != 1 || p.Attachments[0].PromptID != p.ID || p.Attachments[0].Size != a.Size {
			t.Fatalf("queued %+v, %v; want it to carry the attachment", p, err)
		}
		if _, err := queue(a.ID); !errors.Is(err, errdefs.ErrConflict) {
			t.Fatalf("naming an attachment another prompt carries: %v, want a conflict", err)
		}
		if q, _ := s.Prompts.List(ctx, x.ID); len(q) != 1 || len(q[0].Attachments) != 1 {
			t.Fatalf("the queue: %+v, want the one prompt with its attachment", q)
		}
		taken, ok, err := s.Prompts.TakePrompt(ctx, x.ID)
		if err != nil || !ok || len(taken.Attachments) != 1 || taken.Attachments[0].ID != a.ID {
			t.Fatalf("took %+v %v %v, want the prompt with its attachment", taken, ok, err)
		}
		if as, _ := s.Prompts.PromptAttachments(ctx, x.ID, p.ID); len(as) != 1 {
			t.Fatalf("the prompt's attachments: %+v", as)
		}
		if as, _ := s.Prompts.Attachments(ctx, x.ID); len(as) != 2 {
			t.Fatalf("the Session's attachments: %d, want 2", len(as))
		}
	})
}

// failingReader fails after giving some bytes, as an upload cut short.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, io.ErrClosedPipe
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

// TestAnAttachmentPastTheSessionsTotalOrCutShortStoresNothing: past the
// Session's total, or on a read error, nothing of the file stays.
func TestAnAttachmentPastTheSessionsTotalOrCutShortStoresNothing(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, u := devSession(t, s)
		put := func(r io.Reader) error {
			_, err := s.Prompts.PutAttachment(ctx, Attachment{SessionID: x.ID, Name: "f", File: "f", MediaType: "application/octet-stream", CreatedBy: u.ID}, r, chunkBytes+100)
			return err
		}
		if err := put(bytes.NewReader(make([]byte, chunkBytes))); err != nil {
			t.Fatal(err)
		}
		if err := put(bytes.NewReader(make([]byte, 101))); !errors.Is(err, errdefs.ErrTooLarge) {
			t.Fatalf("past the total: %v, want too large", err)
		}
		if err := put(bytes.NewReader(make([]byte, 2*chunkBytes))); !errors.Is(err, errdefs.ErrTooLarge) {
			t.Fatalf("far past the total: %v, want too large", err)
		}
		if err := put(&failingReader{n: 50}); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("cut short: %v, want the read's error", err)
		}
		if rows, chunks := stored(t, s); rows != 1 || chunks != 1 {
			t.Fatalf("%d attachments and %d chunks left, want only the first file's 1 and 1", rows, chunks)
		}
		if err := put(bytes.NewReader(make([]byte, 100))); err != nil {
			t.Fatalf("up to the total: %v", err)
		}
	})
}

// TestStaleAttachmentsAreDropped: an upload left incomplete and a file no
// prompt named go; one a prompt carries stays.
func TestStaleAttachmentsAreDropped(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, u := devSession(t, s)
		now := time.Now()
		s.now = func() time.Time { return now.Add(-48 * time.Hour) }
		put := func() Attachment {
			a, err := s.Prompts.PutAttachment(ctx, Attachment{SessionID: x.ID, Name: "f", File: "f", MediaType: "text/plain", CreatedBy: u.ID}, strings.NewReader("x"), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		named, unnamed := put(), put()
		if _, err := s.Prompts.EnqueuePrompt(ctx, Prompt{SessionID: x.ID, AuthorID: u.ID, Text: "p", Attachments: []Attachment{{ID: named.ID}}}); err != nil {
			t.Fatal(err)
		}
		s.db.Exec(`INSERT INTO attachments (`+attachmentCols+`, complete) VALUES ('half', ?, NULL, 'h', 'h', 'text/plain', 0, NULL, 0, ?, ?, 0)`, x.ID, u.ID, ms(now.Add(-2*time.Hour)))
		if err := s.Prompts.DropStaleAttachments(ctx, x.ID, now.Add(-time.Hour), now.Add(-24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		var ids []string
		rows, _ := s.db.Query(`SELECT id FROM attachments`)
		for rows.Next() {
			var id string
			rows.Scan(&id)
			ids = append(ids, id)
		}
		rows.Close()
		if len(ids) != 1 || ids[0] != named.ID {
			t.Fatalf("left %v, want only %s (named); %s was unnamed", ids, named.ID, unnamed.ID)
		}
	})
}
