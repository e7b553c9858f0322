package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/ports"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
)

// handleLive registers what the Hub asks for the web UI: the terminal
// mirror, forwarded ports, Workspace files and changes.
func (r *Runner) handleLive(conn *protocol.Conn) {
	handleRunning(conn, r, protocol.TypeTerminalOpen, func(ctx context.Context, s *session, req protocol.SessionRef) (any, error) {
		return nil, s.terminalOpen(ctx)
	})
	handleRunning(conn, r, protocol.TypeTerminalClose, func(ctx context.Context, s *session, req protocol.SessionRef) (any, error) {
		s.mirror.close()
		return nil, nil
	})
	handleRunning(conn, r, protocol.TypeTerminalInput, func(ctx context.Context, s *session, req protocol.TerminalInput) (any, error) {
		return nil, s.terminalInput(ctx, req)
	})
	handleRunning(conn, r, protocol.TypeTerminalResize, func(ctx context.Context, s *session, req protocol.TerminalResize) (any, error) {
		return nil, s.terminalResize(ctx, req)
	})
	handleRunning(conn, r, protocol.TypeSessionDial, func(ctx context.Context, s *session, req protocol.SessionDial) (any, error) {
		return nil, s.dialPort(ctx, req)
	})
	handleAs(conn, protocol.TypeSessionFile, func(ctx context.Context, req protocol.SessionFile) (any, error) {
		return r.sendFile(ctx, req)
	})
	handleAs(conn, protocol.TypeSessionDiff, func(ctx context.Context, req protocol.SessionDiff) (any, error) {
		return r.sendChanges(ctx, req)
	})
}

// handleAs registers a request handler that decodes its body as T.
func handleAs[T any](conn *protocol.Conn, typ string, run func(context.Context, T) (any, error)) {
	conn.Handle(typ, false, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var req T
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("%s: %v: %w", typ, err, errdefs.ErrInvalid)
		}
		return run(ctx, req)
	})
}

// handleRunning registers a request about a Session running here, named
// by its session_id (as every protocol request about one names it): run
// gets the Session's supervisor and the request decoded as T.
func handleRunning[T any](conn *protocol.Conn, r *Runner, typ string, run func(context.Context, *session, T) (any, error)) {
	conn.Handle(typ, false, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var ref protocol.SessionRef
		var req T
		if err := json.Unmarshal(raw, &ref); err != nil {
			return nil, fmt.Errorf("%s: %v: %w", typ, err, errdefs.ErrInvalid)
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("%s: %v: %w", typ, err, errdefs.ErrInvalid)
		}
		s, err := r.session(ref.SessionID)
		if err != nil {
			return nil, err
		}
		return run(ctx, s, req)
	})
}

// portList is the last list of a Session's listening ports.
type portList struct {
	mu   sync.Mutex
	list []protocol.Port
	sent bool
}

// portsWatchArgs is the ports watcher's command.
var portsWatchArgs = []string{kndlBin, "ports", "watch", "--skip-exe", claude.MountDir}

// watchPorts runs kndl ports watch in the Sandbox while the Session runs,
// and sends the Hub each list it writes: it writes one when the listening
// sockets change, reading them every 2 seconds. Claude Code's own ports
// (its login callback) are left out. A watcher that dies is started again.
func (s *session) watchPorts(ctx context.Context, first helperStream) {
	for ctx.Err() == nil {
		out, done, err := first.out, first.done, first.err
		if out == nil && err == nil {
			out, done, err = s.execHelper(ctx, portsWatchArgs)
		}
		first = helperStream{}
		if err != nil {
			s.log.Warn("ports watcher did not start", "session", s.id, "err", err)
		} else {
			dec := ports.NewDecoder(out)
			for {
				list, err := dec.Next()
				if err != nil {
					break
				}
				s.ports.mu.Lock()
				s.ports.list, s.ports.sent = list, true
				s.ports.mu.Unlock()
				s.out.add(s.id, protocol.TypeSessionPorts, protocol.SessionPorts{SessionID: s.id, Ports: list})
			}
			done()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			s.log.Warn("ports watcher ended; starting it again", "session", s.id)
		}
	}
}

// resendPorts sends each running Session's list again on a new connection:
// the Hub drops the lists of a Runner that went away.
func (r *Runner) resendPorts() {
	r.mu.Lock()
	ss := make([]*session, 0, len(r.sessions))
	for _, s := range r.sessions {
		ss = append(ss, s)
	}
	r.mu.Unlock()
	for _, s := range ss {
		s.ports.mu.Lock()
		list, sent := slices.Clone(s.ports.list), s.ports.sent
		s.ports.mu.Unlock()
		if sent {
			r.notify(s.id, protocol.TypeSessionPorts, protocol.SessionPorts{SessionID: s.id, Ports: list})
		}
	}
}

// dialTimeout bounds connecting to a port in the Sandbox.
const dialTimeout = 10 * time.Second

// dialPort connects to a port in the Session's Sandbox from inside it (so a
// server on the Sandbox's loopback is reached), and carries that one
// connection over a stream dialled back to the Hub.
func (s *session) dialPort(ctx context.Context, req protocol.SessionDial) error {
	if req.Port < 1 || req.Port > 65535 {
		return fmt.Errorf("port %d: %w", req.Port, errdefs.ErrInvalid)
	}
	// The connection outlives the request that asked for it, not Run.
	pctx, cancel := context.WithCancel(s.life)
	stdinR, stdinW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &lockedBuffer{b: cappedBuffer{max: 4096}}
	p, err := s.backend.Exec(pctx, s.sandbox, sandbox.Cmd{
		Args:  []string{kndlBin, "ports", "dial", strconv.Itoa(req.Port)},
		Stdin: stdinR, Stdout: outW, Stderr: stderr,
	})
	if err != nil {
		cancel()
		return fmt.Errorf("start the dialler in the Sandbox: %w", err)
	}
	exited := make(chan struct{})
	s.spawn(func() { p.Wait(); outW.Close(); close(exited) })
	fail := func(err error) error {
		cancel()
		stdinW.Close()
		return err
	}
	out := bufio.NewReader(outR)
	ready := make(chan error, 1)
	s.spawn(func() {
		line, err := readField(out, '\n', 256) // the Sandbox's to write: bounded
		if err == nil && strings.TrimSpace(line) != ports.DialReady {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
	})
	select {
	case err := <-ready:
		if err != nil {
			<-exited
			msg := strings.TrimSpace(stderr.String())
			if msg == "" {
				msg = err.Error()
			}
			return fail(fmt.Errorf("%s: %w", strings.TrimPrefix(msg, "kndl ports dial: "), errdefs.ErrUnavailable))
		}
	case <-time.After(dialTimeout):
		return fail(fmt.Errorf("port %d did not answer within %s: %w", req.Port, dialTimeout, errdefs.ErrUnavailable))
	}
	ws, err := s.link.dialStream(ctx, req.Stream)
	if err != nil {
		return fail(err)
	}
	nc := websocket.NetConn(pctx, ws, websocket.MessageBinary)
	s.spawn(func() {
		io.Copy(stdinW, nc)
		stdinW.Close() // the Hub's side ended: half-close toward the port
	})
	s.spawn(func() {
		io.Copy(nc, out)
		nc.Close()
		cancel()
	})
	return nil
}

// fileMax bounds a Workspace file sent to a browser.
const fileMax = 256 << 20

// sendFile sends a file of the Session's Workspace over a stream dialled
// back to the Hub. It reads on the Runner's host through an os.Root on the
// Workspace, so a link made in the Sandbox can't lead it anywhere else, and
// serves a regular file alone: a FIFO or a device the Sandbox made would
// otherwise hold the open, or the read, and the goroutine with it.
func (r *Runner) sendFile(ctx context.Context, req protocol.SessionFile) (protocol.SessionFileInfo, error) {
	var info protocol.SessionFileInfo
	r.mu.Lock()
	_, running := r.sessions[req.SessionID]
	r.mu.Unlock()
	if !running || !protocol.ValidSessionID(req.SessionID) {
		return info, fmt.Errorf("session %s is not running on this Runner: %w", req.SessionID, errdefs.ErrNotFound)
	}
	rel := path.Clean("/" + strings.TrimPrefix(req.Path, workspaceDir+"/"))[1:]
	if rel == "" || rel == "." {
		return info, fmt.Errorf("name a file in the Workspace: %w", errdefs.ErrInvalid)
	}
	root, err := os.OpenRoot(filepath.Join(r.sessionDir(req.SessionID), "workspace"))
	if err != nil {
		return info, err
	}
	defer root.Close()
	f, st, err := openRegular(root, rel)
	if err != nil {
		return info, err
	}
	if st.Size() > fileMax {
		f.Close()
		return info, fmt.Errorf("%s is %d bytes, over the %d-byte limit for a download: %w", rel, st.Size(), fileMax, errdefs.ErrTooLarge)
	}
	ws, err := r.link.dialStream(ctx, req.Stream)
	if err != nil {
		f.Close()
		return info, err
	}
	r.spawn(func() {
		defer f.Close()
		nc := websocket.NetConn(r.life, ws, websocket.MessageBinary)
		// The Hub sends the size it was told as Content-Length: a file cut
		// short meanwhile ends the stream with an error, never as if whole.
		if n, err := io.Copy(nc, io.LimitReader(f, st.Size())); err != nil || n != st.Size() {
			if r.life.Err() != nil {
				// The Runner stops: a close handshake would hold Run up to
				// 10 s (5 to write, 5 to hear back) on a Hub not reading.
				ws.CloseNow()
				return
			}
			ws.Close(websocket.StatusInternalError, "the file changed while it was read")
			return
		}
		nc.Close()
	})
	return protocol.SessionFileInfo{Name: path.Base(rel), Size: st.Size()}, nil
}

// openRegular opens rel in root if it is a regular file, not a link: it
// is looked at first (Lstat), opened non-blocking (a FIFO swapped in
// meanwhile can't hold the open), and must be the very file looked at.
func openRegular(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	notFile := fmt.Errorf("%s is not a file in the Workspace: %w", rel, errdefs.ErrNotFound)
	lst, err := root.Lstat(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "escapes") {
			return nil, nil, fmt.Errorf("no file %s in the Workspace: %w", rel, errdefs.ErrNotFound)
		}
		return nil, nil, notFile
	}
	if !lst.Mode().IsRegular() {
		return nil, nil, notFile
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, notFile
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || !os.SameFile(lst, st) {
		f.Close()
		return nil, nil, notFile
	}
	return f, st, nil
}

// lockedBuffer is a cappedBuffer safe to write from another goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  cappedBuffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
