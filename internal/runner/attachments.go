package runner

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// Attachments. Before a prompt that carries files is typed, the Runner
// fetches each from the Hub (session.attachment, then its bytes over a
// stream) and places it in the Session's Workspace at
// protocol.AttachmentPath, /workspace/.kndl/attachments/<prompt>/<file>:
// sleep, wake, archive and restore keep it, the purge deletes it with the
// Workspace, and .git/info/exclude keeps the folder out of git. The prompt
// gets a line @-mentioning each, so Claude Code reads it as it takes the
// prompt. Everything is written through an os.Root on the Workspace, and
// a link on the way is refused: the Sandbox can't lead a file elsewhere.

// fetchTime bounds fetching one Attachment.
const fetchTime = 10 * time.Minute

// placeAttachments places the files a prompt carries and returns the text
// to type: the prompt with an AttachedLine for each. A file a try before
// placed whole is kept. If they can't be placed, the transcript says why.
func (s *session) placeAttachments(ctx context.Context, req protocol.SessionDeliver) (string, error) {
	if len(req.Attachments) == 0 {
		return req.Text, nil
	}
	text, err := s.place(ctx, req)
	if err != nil {
		s.out.add(req.SessionID, protocol.TypeSessionEvents, protocol.SessionEvents{SessionID: req.SessionID, Events: []protocol.Event{{At: time.Now(),
			Kind: protocol.EventError, Text: "The prompt's attachments could not be placed in the Workspace: " + err.Error()}}})
	}
	return text, err
}

func (s *session) place(ctx context.Context, req protocol.SessionDeliver) (string, error) {
	if !protocol.ValidSessionID(req.PromptID) || !protocol.ValidSessionID(req.SessionID) {
		return "", fmt.Errorf("prompt %q: %w", req.PromptID, errdefs.ErrInvalid)
	}
	root, err := os.OpenRoot(filepath.Join(s.dir, "workspace"))
	if err != nil {
		return "", err
	}
	defer root.Close()
	dir, err := attachmentFolder(root, req.PromptID)
	if err != nil {
		return "", err
	}
	lines := []string{req.Text, ""}
	for _, a := range req.Attachments {
		if a.File == "" || protocol.SafeFileName(a.File) != a.File {
			return "", fmt.Errorf("attachment %s: %q is not a safe file name: %w", a.ID, a.File, errdefs.ErrInvalid)
		}
		err := putAttachment(root, dir+"/"+a.File, a.Size, func() (io.ReadCloser, string, error) {
			return s.fetchAttachment(ctx, a)
		})
		if err != nil {
			return "", fmt.Errorf("%s: %w", a.File, err)
		}
		lines = append(lines, protocol.AttachedLine(req.PromptID, a.File))
	}
	return strings.Join(lines, "\n"), nil
}

// fetchAttachment asks the Hub for an Attachment and returns the stream its
// bytes come on, with their SHA-256.
func (s *session) fetchAttachment(ctx context.Context, a protocol.Attachment) (io.ReadCloser, string, error) {
	var st protocol.AttachmentStream
	if err := s.link.request(ctx, protocol.TypeSessionAttachment, protocol.AttachmentRef{SessionID: s.id, AttachmentID: a.ID}, &st); err != nil {
		return nil, "", fmt.Errorf("fetch it from the Hub: %w", err)
	}
	if st.Size != a.Size {
		return nil, "", fmt.Errorf("the Hub has %d bytes of it, not the %d the prompt said", st.Size, a.Size)
	}
	ws, err := s.link.dialStream(ctx, st.Stream)
	if err != nil {
		return nil, "", err
	}
	fctx, cancel := context.WithTimeout(ctx, fetchTime)
	return streamReader{Conn: websocket.NetConn(fctx, ws, websocket.MessageBinary), cancel: cancel}, st.SHA256, nil
}

// streamReader reads a stream, and cancels its deadline as it closes.
type streamReader struct {
	net.Conn
	cancel context.CancelFunc
}

func (s streamReader) Close() error {
	s.cancel()
	return s.Conn.Close()
}

// attachmentFolder makes a prompt's folder for its Attachments in the
// Workspace, through root, and returns its path there. Each of .kndl,
// .kndl/attachments and the prompt's own folder must be a folder, never a
// link (something in the Sandbox could have put one there to send the
// files elsewhere in the Workspace) or a file. The folder is added to
// .git/info/exclude first, so a git add -A in the Sandbox leaves it out.
func attachmentFolder(root *os.Root, promptID string) (string, error) {
	if err := excludeInGit(root, protocol.AttachmentsFolder); err != nil {
		return "", fmt.Errorf("exclude %s from git: %w", protocol.AttachmentsFolder, err)
	}
	dir := ""
	for _, part := range append(strings.Split(strings.TrimSuffix(protocol.AttachmentsFolder, "/"), "/"), promptID) {
		dir = filepath.Join(dir, part)
		fi, err := root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := root.Mkdir(dir, 0o755); err != nil {
				return "", err
			}
		case err != nil:
			return "", err
		case !fi.IsDir():
			return "", fmt.Errorf("%s in the Workspace is a link or a file, not a folder: the attachments are not put there: %w", dir, errdefs.ErrConflict)
		}
	}
	return dir, nil
}

// excludeInGit adds line to the Workspace's .git/info/exclude, once.
func excludeInGit(root *os.Root, line string) error {
	const exclude = ".git/info/exclude"
	b, err := root.ReadFile(exclude)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if slices.Contains(strings.Split(string(b), "\n"), line) {
		return nil
	}
	if err := root.MkdirAll(".git/info", 0o755); err != nil {
		return err
	}
	f, err := root.OpenFile(exclude, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString("\n" + line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// putAttachment writes one Attachment at rel, through root, from what open
// returns (its bytes and their SHA-256 in hex), unless a regular file of
// its size is there already. It takes its name only once whole and
// checked, replacing whatever had the name (a link is replaced, never
// followed).
func putAttachment(root *os.Root, rel string, size int64, open func() (io.ReadCloser, string, error)) error {
	if fi, err := root.Lstat(rel); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		return nil
	}
	src, sum, err := open()
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := fmt.Sprintf("%s.part-%s", rel, rand.Text()[:8])
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(src, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
	case n != size:
		err = fmt.Errorf("the Hub sent %d of its %d bytes", n, size)
	case hex.EncodeToString(h.Sum(nil)) != sum:
		err = fmt.Errorf("its bytes did not match their SHA-256")
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		root.Remove(tmp)
	}
	return err
}
