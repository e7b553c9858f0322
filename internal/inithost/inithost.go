// Package inithost lets a Sandbox's init run kndl's long-lived helpers (the
// ports watcher, the transcript follower) as goroutines of its own, so an
// idle Sandbox holds one Go runtime's memory for kndl instead of one a
// helper. The Runner still starts each helper as a command in the Sandbox;
// the command hands its stdin and stdout to init over a Unix socket
// (SCM_RIGHTS), which init serves (Serve), and exits (Hand). What the
// helpers do stays in their own packages; the jobs init may run are named
// by its caller. internal/sandbox/oci (init) and internal/cli (the
// commands) import it.
package inithost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Socket is where init serves hand-offs: on the Sandbox's /dev, a tmpfs
// the runtime makes at each boot, so the socket is never in the root
// filesystem's upper layer (a Snapshot's) nor left from an earlier boot.
const Socket = "/dev/.kndl-init.sock"

// Job runs one helper with args, reading in and writing out, until in
// closes (the Runner's end went away) or it fails.
type Job func(ctx context.Context, args []string, in io.Reader, out io.Writer) error

// Jobs are the helpers init runs, by name ("ports watch").
type Jobs map[string]Job

// request is what a hand-off says besides its two files.
type request struct {
	Job  string   `json:"job"`
	Args []string `json:"args"`
}

// maxRequest bounds a request's JSON.
const maxRequest = 64 << 10

// handTimeout bounds a hand-off, on both sides.
const handTimeout = 10 * time.Second

// taken is init's answer when it runs the job; any other answer is a
// refusal, and says why.
const taken = "ok"

// Listen makes the socket at path, usable by root alone (connect needs
// write permission on it; SO_PEERCRED is checked anyway).
func Listen(path string) (*net.UnixListener, error) {
	os.Remove(path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Serve takes hand-offs on l until ctx ends. A caller must hold all that
// init holds (peerCheck): root, init's capabilities, its namespaces and no
// more seccomp filters, so a job runs with no more privilege than its
// command had running it itself. Each job runs in a goroutine until it
// returns; a panic ends that job alone, as a crash ended its process
// before: its files close and the Runner starts it again.
func Serve(ctx context.Context, l *net.UnixListener, jobs Jobs) error {
	context.AfterFunc(ctx, func() { l.Close() })
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			continue
		}
		go serveOne(ctx, c, jobs)
	}
}

// serveOne takes one hand-off: it reads the request and its files, checks
// the caller, answers, and runs the job.
func serveOne(ctx context.Context, c *net.UnixConn, jobs Jobs) {
	c.SetDeadline(time.Now().Add(handTimeout))
	// Read first, so that a refused caller hears why rather than EPIPE;
	// the files of one refused are closed unused.
	req, files, err := receive(c)
	if err == nil {
		err = peerCheck(c)
	}
	job := jobs[req.Job]
	if err == nil && job == nil {
		err = fmt.Errorf("init runs no helper %q", req.Job)
	}
	if err == nil {
		_, err = c.Write([]byte(taken)) // failing, the caller went: the Runner sees its stdout end
	} else {
		c.Write([]byte(err.Error()))
	}
	c.Close()
	if err != nil {
		closeAll(files)
		return
	}
	defer closeAll(files)
	defer func() { recover() }()
	job(ctx, req.Args, files[0], files[1])
}

// receive reads the request and its two files (stdin, stdout), which come
// with its first byte; files past two are closed.
func receive(c *net.UnixConn) (request, []*os.File, error) {
	var req request
	buf := make([]byte, maxRequest)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	var files []*os.File
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	for i := range msgs {
		fds, _ := unix.ParseUnixRights(&msgs[i])
		for _, fd := range fds {
			if len(files) == 2 {
				unix.Close(fd)
				continue
			}
			// Non-blocking, so the file uses Go's poller and Close ends a
			// read that waits on it.
			unix.SetNonblock(fd, true)
			files = append(files, os.NewFile(uintptr(fd), "hand-off"))
		}
	}
	if err != nil {
		return req, files, err
	}
	if len(files) != 2 {
		return req, files, errors.New("a hand-off carries stdin and stdout")
	}
	rest, err := io.ReadAll(io.LimitReader(c, int64(maxRequest-n)))
	if err != nil {
		return req, files, err
	}
	if err := json.Unmarshal(append(buf[:n], rest...), &req); err != nil {
		return req, files, fmt.Errorf("a hand-off's request: %w", err)
	}
	return req, files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// ErrNotTaken is Hand's error when init does not run the job: there is no
// socket (a Sandbox an earlier kndl booted), or init refused, saying why.
// The caller runs the job itself.
var ErrNotTaken = errors.New("init does not run it")

// Hand asks init, at socket, to run job with args on in and out. It
// returns nil once init has them: the caller's work is done, and its own
// copies of in and out can close. An error wrapping ErrNotTaken means init
// has not taken them; any other, that init may or may not have them, and
// the caller must not run the job as well.
func Hand(ctx context.Context, socket, job string, args []string, in, out *os.File) error {
	ctx, cancel := context.WithTimeout(ctx, handTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotTaken, err)
	}
	c := nc.(*net.UnixConn)
	defer c.Close()
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	body, err := json.Marshal(request{Job: job, Args: args})
	if err != nil || len(body) > maxRequest {
		return fmt.Errorf("%w: a request of %d bytes", ErrNotTaken, len(body))
	}
	n, _, err := c.WriteMsgUnix(body, unix.UnixRights(int(in.Fd()), int(out.Fd())), nil)
	if n == 0 && err != nil {
		return fmt.Errorf("%w: %v", ErrNotTaken, err) // nothing sent
	}
	if err == nil && n < len(body) {
		_, err = c.Write(body[n:])
	}
	if err != nil {
		return fmt.Errorf("hand to init: %w", err)
	}
	c.CloseWrite()
	answer, err := io.ReadAll(io.LimitReader(c, 4096))
	switch {
	case err != nil:
		return fmt.Errorf("init's answer: %w", err)
	case string(answer) == taken:
		return nil
	case len(answer) == 0:
		return errors.New("init ended the hand-off without an answer")
	}
	return fmt.Errorf("%w: %s", ErrNotTaken, answer)
}
