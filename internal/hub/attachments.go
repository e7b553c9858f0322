package hub

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/redact"
	"kndl.dev/kndl/internal/store"
)

// attachmentsAPI serves prompts' Attachments: upload, list and download.
// A Runner's fetch is the Hub's (handleAttachments).
type attachmentsAPI struct {
	core
	masks *masks.Sets
}

// Attachments. The Creator uploads a file to the Session (POST
// /api/sessions/{id}/attachments?name=NAME, the bytes as the body), then
// names it in a prompt; the Runner fetches it over a stream before it types
// the prompt and places it in the Workspace, where Claude Code reads it.
// The Hub keeps each one with its Session, Archived too: a text file
// through the Session's redaction set, anything else as it came. Everyone
// with access lists and downloads them, always as downloads.

// Defaults of the attachment limits.
const (
	defaultAttachmentMax         = 20 << 20
	defaultSessionAttachmentsMax = 200 << 20
)

// How long an upload left half-way (the Hub stopped mid-upload) and a file
// no prompt named are kept.
const (
	attachmentIncompleteTTL = time.Hour
	attachmentUnnamedTTL    = 24 * time.Hour
)

// attachmentSendTime bounds sending one Attachment to a Runner.
const attachmentSendTime = 10 * time.Minute

// sniffBytes is how much of a file decides whether it is text: git's rule
// (no NUL in the first 8000 bytes), and valid UTF-8.
const sniffBytes = 8000

// maxAttachmentName bounds the name an Attachment is shown with, in bytes.
const maxAttachmentName = 255

func (h attachmentsAPI) uploadAttachment(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	name, err := attachmentName(r.URL.Query().Get("name"))
	var s store.Session
	if err == nil {
		s, err = h.guard.drivableSession(ctx, p, r.PathValue("id"))
	}
	if err == nil && s.State == store.Archived {
		err = fmt.Errorf("the Session is archived: restore it first (kndl restore): %w", errdefs.ErrConflict)
	}
	if err == nil && r.ContentLength > h.cfg.AttachmentMax {
		err = h.attachmentTooBig(name)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	// An upload of up to HUB_ATTACHMENT_MAX may take longer than the
	// server's read timeout: MaxBytesReader bounds it, not time.
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	now := time.Now()
	if err := h.store.Prompts.DropStaleAttachments(ctx, s.ID, now.Add(-attachmentIncompleteTTL), now.Add(-attachmentUnnamedTTL)); err != nil {
		h.log.Warn("drop stale attachments", "session", s.ID, "err", err)
	}
	body := bufio.NewReaderSize(http.MaxBytesReader(w, r.Body, h.cfg.AttachmentMax), sniffBytes)
	head, _ := body.Peek(sniffBytes) // a read error comes again below
	a := store.Attachment{SessionID: s.ID, Name: name, File: protocol.SafeFileName(name), MediaType: mediaType(head),
		IsText: isText(head), CreatedBy: p.User.ID}
	var src io.Reader = body
	if a.IsText {
		set, err := h.masks.Of(ctx, s.ID)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		src = &redactReader{r: body, st: set.NewStream()}
	}
	a, err = h.store.Prompts.PutAttachment(ctx, a, src, h.cfg.SessionAttachmentsMax)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		err = h.attachmentTooBig(name)
	case errors.Is(err, errdefs.ErrTooLarge):
		err = fmt.Errorf("%s would take the Session's attachments past %s, their limit (HUB_SESSION_ATTACHMENTS_MAX on the Hub); nothing was kept: %w",
			name, bytesText(h.cfg.SessionAttachmentsMax), errdefs.ErrTooLarge)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiAttachment(a))
}

func (h attachmentsAPI) attachmentTooBig(name string) error {
	return fmt.Errorf("%s is over %s, the limit for one attachment (HUB_ATTACHMENT_MAX on the Hub); nothing was kept: %w",
		name, bytesText(h.cfg.AttachmentMax), errdefs.ErrTooLarge)
}

// bytesText is a size as a limit is said: in MiB when it is whole ones.
func bytesText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// attachmentName is the name an upload is shown with: its last path
// element, valid UTF-8 without control characters, at most 255 bytes.
func attachmentName(raw string) (string, error) {
	if i := strings.LastIndexAny(raw, `/\`); i >= 0 {
		raw = raw[i+1:]
	}
	name := strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(raw, "\uFFFD")))
	for len(name) > maxAttachmentName {
		_, n := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-n]
	}
	if name == "" || name == "." || name == ".." {
		return "", fmt.Errorf("name the file: ?name=FILE_NAME: %w", errdefs.ErrInvalid)
	}
	return name, nil
}

// isText reports whether a file's start is text: no NUL byte, valid UTF-8
// (the last character may be cut where the start ends).
func isText(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return false
	}
	for i := 0; i < utf8.UTFMax-1 && len(head) > 0 && !utf8.Valid(head); i++ {
		head = head[:len(head)-1]
	}
	return utf8.Valid(head)
}

// mediaType is what a file's start looks like, for display only: a
// download is always served as bytes.
func mediaType(head []byte) string {
	t, _, _ := strings.Cut(http.DetectContentType(head), ";")
	return t
}

// redactReader reads a text file through a Session's redaction set.
type redactReader struct {
	r        io.Reader
	st       *redact.Stream
	buf, out []byte
	eof      bool
}

func (x *redactReader) Read(p []byte) (int, error) {
	for len(x.out) == 0 {
		if x.eof {
			return 0, io.EOF
		}
		if x.buf == nil {
			x.buf = make([]byte, 64<<10)
		}
		n, err := x.r.Read(x.buf)
		x.out = x.st.Redact(x.out[:0], x.buf[:n])
		switch {
		case err == io.EOF:
			x.out, x.eof = x.st.Flush(x.out), true
		case err != nil:
			return 0, err
		}
	}
	n := copy(p, x.out)
	x.out = x.out[n:]
	return n, nil
}

func (h attachmentsAPI) listAttachments(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	var as []store.Attachment
	if err == nil {
		as, err = h.store.Prompts.Attachments(r.Context(), s.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAll(as, apiAttachment))
}

// downloadAttachment sends an Attachment to someone with access to its
// Session, as a download whatever it holds (serveDownload).
func (h attachmentsAPI) downloadAttachment(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	var a store.Attachment
	if err == nil {
		a, err = h.store.Prompts.AttachmentByID(r.Context(), s.ID, r.PathValue("attachment"))
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	serveDownload(w, a.Name, a.Size)
	if err := h.store.Prompts.ReadAttachment(r.Context(), a.ID, w); err != nil && r.Context().Err() == nil {
		h.log.Warn("send an attachment", "attachment", a.ID, "err", err)
	}
}

// promptAttachments checks the Attachments a new prompt names: at most
// api.MaxPromptAttachments, each once, with file names of their own (they
// share the prompt's folder in the Sandbox), and none on a command. The
// store takes them only if they are the author's, of the Session, and on
// no other prompt.
func promptAttachments(ctx context.Context, st *store.Prompts, s store.Session, req api.PromptRequest) ([]store.Attachment, error) {
	switch {
	case len(req.Attachments) == 0:
		return nil, nil
	case req.IsCommand:
		return nil, fmt.Errorf("a command takes no attachments: send them with a prompt: %w", errdefs.ErrInvalid)
	case len(req.Attachments) > api.MaxPromptAttachments:
		return nil, fmt.Errorf("%d attachments: a prompt carries at most %d: %w", len(req.Attachments), api.MaxPromptAttachments, errdefs.ErrInvalid)
	}
	var out []store.Attachment
	files := map[string]bool{}
	for _, id := range req.Attachments {
		a, err := st.AttachmentByID(ctx, s.ID, id)
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, fmt.Errorf("attachment %q: no such file was attached to this Session (upload it first; one no prompt names within a day is deleted): %w", id, errdefs.ErrInvalid)
		}
		if err != nil {
			return nil, err
		}
		if files[a.File] {
			return nil, fmt.Errorf("two attachments would be %s in the Sandbox: rename one: %w", a.File, errdefs.ErrInvalid)
		}
		files[a.File] = true
		out = append(out, store.Attachment{ID: id})
	}
	return out, nil
}

// handleAttachments registers a Runner's request for an Attachment a prompt
// of a Session of its own carries, while the Session is starting or
// awake: the Hub answers with a stream id, and sends the bytes once the
// Runner dials it.
func (h *Hub) handleAttachments(rc *runners.Conn, welcomed <-chan struct{}) {
	own := ownSession(h.store.Sessions, rc, welcomed)
	rc.Conn.Handle(protocol.TypeSessionAttachment, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var req protocol.AttachmentRef
		s, err := own(ctx, body, &req, func() string { return req.SessionID })
		if err != nil {
			return nil, err
		}
		if s.State != store.Starting && s.State != store.Active {
			return nil, fmt.Errorf("session %s is %s, not starting or awake: %w", s.ID, s.State, errdefs.ErrForbidden)
		}
		a, err := h.store.Prompts.AttachmentByID(ctx, s.ID, req.AttachmentID)
		if err != nil || a.PromptID == "" {
			return nil, fmt.Errorf("attachment %q: %w", req.AttachmentID, errdefs.ErrNotFound)
		}
		stream, take := h.runners.ExpectStream(rc)
		h.life.Go(func(life context.Context) { h.sendAttachment(life, a, take) })
		return protocol.AttachmentStream{Stream: stream, Size: a.Size, SHA256: hex.EncodeToString(a.SHA256)}, nil
	})
}

// sendAttachment writes an Attachment's bytes to the stream its Runner
// dials back, within life, the Hub's: the Runner's request is answered
// before the stream comes.
func (h *Hub) sendAttachment(life context.Context, a store.Attachment, take func(context.Context) (net.Conn, error)) {
	ctx, cancel := context.WithTimeout(life, runners.StreamWait)
	conn, err := take(ctx)
	cancel()
	if err != nil {
		h.log.Warn("attachment not sent", "session", a.SessionID, "attachment", a.ID, "err", err)
		return
	}
	defer conn.Close()
	conn.SetWriteDeadline(time.Now().Add(attachmentSendTime))
	if err := h.store.Prompts.ReadAttachment(life, a.ID, conn); err != nil {
		h.log.Warn("attachment not sent", "session", a.SessionID, "attachment", a.ID, "err", err)
	}
}
