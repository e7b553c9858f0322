package oci

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/sandbox"
)

// How an Exec's environment reaches it, measured with crun 1.8.1: the
// whole process description (arguments, environment, directory, user) is
// written to a pipe that crun reads as --process /proc/self/fd/3. crun
// reads it to the end (a pipe's size is 0, which it handles), keeps it in
// memory and passes the environment to execve; nothing is written to its
// state directory or to any file, and crun's command line names only the
// pipe. `crun exec --env K=V` would put values on crun's command line, and
// a --process file would put them on disk.

// waitDelay bounds how long Wait keeps copying output after the process
// exits, for output pipes a background child still holds open.
const waitDelay = 2 * time.Second

// Exec runs cmd in the running Sandbox id. The process outlives ctx, which
// only bounds starting it. Its environment is cmd.Env, except that crun
// adds HOME (from the user's passwd entry) when Env has none.
func (b *OCI) Exec(ctx context.Context, id string, c sandbox.Cmd) (sandbox.Process, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	if len(c.Args) == 0 {
		return nil, fmt.Errorf("exec in sandbox %s: no command: %w", id, errdefs.ErrInvalid)
	}
	d := b.dir(id)
	var rec record
	if err := readJSON(d.record(), &rec); err != nil || !rec.Complete {
		return nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	var run runRecord
	if readJSON(d.run(), &run) != nil || !run.alive() {
		return nil, fmt.Errorf("exec in sandbox %s: %w", id, sandbox.ErrNotRunning)
	}
	rootfs := b.rootfsDir(rec.Slot)
	uid, gid, groups, err := lookupUser(rootfs, c.User)
	if err != nil {
		return nil, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}
	dir := c.Dir
	if dir == "" {
		dir = "/"
	}
	args := c.Args
	if !strings.Contains(args[0], "/") {
		// crun looks a bare name up in the process's own PATH; an Env
		// without one still finds the usual places.
		if !hasPath(c.Env) {
			args = append([]string{}, args...)
			if p, ok := findInRoot(rootfs, args[0]); ok {
				args[0] = p
			}
		}
	}
	proc := sandboxProcess(args, c.Env, dir, uid, gid, groups, sandboxCapabilities(rec.Spec))
	if c.TTY != nil {
		proc.Terminal = true
		proc.ConsoleSize = &specs.Box{Height: uint(c.TTY.Rows), Width: uint(c.TTY.Cols)}
	}
	desc, err := json.Marshal(proc)
	if err != nil {
		return nil, err
	}
	p := &process{pidFile: d.path("exec-" + randomName() + ".pid"), exited: make(chan struct{}), killPID: hostKill}
	rtArgs := []string{"exec", "--process", "/proc/self/fd/3", "--pid-file", p.pidFile}
	if b.rt.gvisor {
		// The process has no host PID: it is killed by its pid inside.
		rtArgs[len(rtArgs)-2] = "--internal-pid-file"
		p.killPID = func(pid int) { b.rt.runscKill(id, pid) }
	}
	var console *net.UnixListener
	var master, replica *os.File
	switch {
	case c.TTY != nil && b.rt.gvisor:
		if master, replica, err = openPTY(*c.TTY); err != nil {
			return nil, fmt.Errorf("exec in sandbox %s: %w", id, err)
		}
		defer replica.Close()
	case c.TTY != nil:
		sockDir, err := os.MkdirTemp("", "kndl-pty-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(sockDir)
		// A short path: a socket's path is limited to 108 bytes, and the
		// state directory may be deep.
		sock := filepath.Join(sockDir, "s")
		console, err = net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			return nil, err
		}
		defer console.Close()
		rtArgs = append(rtArgs, "--tty", "--console-socket", sock)
	}
	rtArgs = append(rtArgs, id)
	pr, pw, err := os.Pipe()
	if err != nil {
		if master != nil {
			master.Close()
		}
		return nil, err
	}
	p.cmd = b.rt.command(context.Background(), false, rtArgs...)
	p.cmd.ExtraFiles = []*os.File{pr}
	p.cmd.WaitDelay = waitDelay
	var rtErr bytes.Buffer
	switch {
	case c.TTY == nil:
		p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	case replica != nil:
		// runsc hands its own stdio to the process as its terminal.
		p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = replica, replica, replica
		p.cmd.SysProcAttr.Setctty = true
	default:
		p.cmd.Stderr = &rtErr
	}
	if err := p.cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		if master != nil {
			master.Close()
		}
		return nil, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}
	pr.Close()
	go func() {
		pw.Write(desc)
		pw.Close()
	}()
	go func() {
		p.err = p.cmd.Wait()
		os.Remove(p.pidFile)
		close(p.exited)
	}()
	if c.TTY == nil {
		return p, nil
	}
	if console != nil {
		master, err = receivePTY(ctx, console, p.exited)
		if err != nil {
			p.kill()
			<-p.exited
			return nil, fmt.Errorf("exec in sandbox %s: %w: %s", id, err, tail(rtErr.Bytes(), 400))
		}
	}
	p.pty = master
	p.copied = make(chan struct{})
	go func() {
		defer close(p.copied)
		out := c.Stdout
		if out == nil {
			out = io.Discard
		}
		io.Copy(out, master) // ends with EIO once no process holds the terminal
	}()
	if c.Stdin != nil {
		go io.Copy(master, c.Stdin)
	}
	return p, nil
}

func hasPath(env []string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			return true
		}
	}
	return false
}

func randomName() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// handoverGrace is how long a terminal's handover is waited for once the
// runtime has exited.
const handoverGrace = 2 * time.Second

// receivePTY accepts the runtime's connection on the console socket and
// takes the terminal's master from it (SCM_RIGHTS).
func receivePTY(ctx context.Context, l *net.UnixListener, exited <-chan struct{}) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		conn, err := l.AcceptUnix()
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer conn.Close()
		buf := make([]byte, 256)
		oob := make([]byte, unix.CmsgSpace(4))
		_, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) == 0 {
			ch <- result{nil, errors.New("no terminal received")}
			return
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) == 0 {
			ch <- result{nil, errors.New("no terminal received")}
			return
		}
		for _, fd := range fds[1:] {
			unix.Close(fd)
		}
		// Non-blocking, so the os.File uses the poller and reads can end.
		unix.SetNonblock(fds[0], true)
		ch <- result{os.NewFile(uintptr(fds[0]), "pty"), nil}
	}()
	select {
	case r := <-ch:
		return r.f, r.err
	case <-exited:
		// A detached exec hands the terminal over and exits at once: the
		// handover may be on its way still (seen under load).
		select {
		case r := <-ch:
			return r.f, r.err
		case <-time.After(handoverGrace):
		}
		l.Close()
		return nil, errors.New("the runtime exited before handing over the terminal")
	case <-ctx.Done():
		l.Close()
		return nil, ctx.Err()
	}
}

// process is one Exec.
type process struct {
	cmd     *exec.Cmd
	pidFile string
	exited  chan struct{}
	err     error
	pty     *os.File
	copied  chan struct{}
	once    sync.Once
	// killPID kills the process the runtime wrote to pidFile.
	killPID func(pid int)
}

// hostKill kills a process the runtime started on the host (crun's) and
// the rest of its process group, in which whatever it started stays
// unless it left: a check's `make test` that started a server must not
// outlive it. crun's exec starts each process in a session of its own
// (seen with crun 1.8: its id a crun child's host PID, outside the
// Sandbox's PID namespace, so read from the host), never the Sandbox
// init's, which another crun started, nor another Exec's; the guard
// keeps the Runner's own group out whatever a runtime does.
func hostKill(pid int) {
	if pg, err := unix.Getpgid(pid); err == nil && pg > 1 && pg != unix.Getpgrp() {
		unix.Kill(-pg, unix.SIGKILL)
	}
	unix.Kill(pid, unix.SIGKILL)
}

// Wait returns the process's exit code once it has exited and its output
// is copied. A process killed by a signal reports 128+signal, as a shell
// does.
func (p *process) Wait() (int, error) {
	<-p.exited
	if p.pty != nil {
		p.once.Do(func() {
			// Drain what the terminal still holds; a background child
			// keeping the terminal open must not hold Wait forever.
			p.pty.SetReadDeadline(time.Now().Add(waitDelay))
			<-p.copied
			p.pty.Close()
		})
	}
	err := p.err
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return p.cmd.ProcessState.ExitCode(), nil
}

// Resize sets the terminal's size.
func (p *process) Resize(ws sandbox.WinSize) error {
	if p.pty == nil {
		return fmt.Errorf("resize: the process has no terminal: %w", sandbox.ErrNotSupported)
	}
	// Through the raw descriptor: Fd() would make the file blocking and
	// end Wait's read deadline.
	rc, err := p.pty.SyscallConn()
	if err != nil {
		return err
	}
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) {
		ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
	}); err != nil {
		return err
	}
	return ioctlErr
}

// Kill sends SIGKILL to the process in the Sandbox. The runtime writes the
// process's PID to a file as it starts it (crun its host PID, runsc its pid
// inside the Sandbox); while the runtime has not exited, that PID is still
// the process's (the runtime reaps it).
func (p *process) Kill() error {
	p.kill()
	return nil
}

func (p *process) kill() {
	deadline := time.Now().Add(waitDelay)
	for {
		select {
		case <-p.exited:
			return
		default:
		}
		if pid, err := readPID(p.pidFile); err == nil {
			p.killPID(pid)
			return
		}
		if time.Now().After(deadline) {
			// The runtime never started the process: end the runtime.
			p.cmd.Process.Kill()
			return
		}
		select {
		case <-p.exited:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// lookupUser resolves a Cmd's User inside the Sandbox's root filesystem:
// "" is root, "uid" or "uid:gid" are taken as they are, a name is looked
// up in the Sandbox's /etc/passwd, with its groups from /etc/group.
func lookupUser(rootfs, user string) (uid, gid uint32, groups []uint32, err error) {
	if user == "" || user == "root" {
		return 0, 0, nil, nil
	}
	name, grp, hasGroup := strings.Cut(user, ":")
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		uid = uint32(n)
		gid = uid
		if e, ok := passwdEntry(rootfs, func(f []string) bool { return f[2] == name }); ok {
			gid = e.gid
		}
		if hasGroup {
			g, err := strconv.ParseUint(grp, 10, 32)
			if err != nil {
				return 0, 0, nil, fmt.Errorf("user %q: group must be numeric: %w", user, errdefs.ErrInvalid)
			}
			gid = uint32(g)
		}
		return uid, gid, nil, nil
	}
	if hasGroup {
		return 0, 0, nil, fmt.Errorf("user %q: give a name or uid[:gid]: %w", user, errdefs.ErrInvalid)
	}
	e, ok := passwdEntry(rootfs, func(f []string) bool { return f[0] == name })
	if !ok {
		return 0, 0, nil, fmt.Errorf("no user %q in the sandbox: %w", name, errdefs.ErrInvalid)
	}
	return e.uid, e.gid, groupsOf(rootfs, name, e.gid), nil
}

type passwd struct{ uid, gid uint32 }

func passwdEntry(rootfs string, match func([]string) bool) (passwd, bool) {
	var out passwd
	found := false
	readInRoot(rootfs, "etc/passwd", func(line string) bool {
		f := strings.Split(line, ":")
		if len(f) < 4 || !match(f) {
			return true
		}
		u, err1 := strconv.ParseUint(f[2], 10, 32)
		g, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return true
		}
		out, found = passwd{uint32(u), uint32(g)}, true
		return false
	})
	return out, found
}

func groupsOf(rootfs, name string, primary uint32) []uint32 {
	groups := []uint32{primary}
	readInRoot(rootfs, "etc/group", func(line string) bool {
		f := strings.Split(line, ":")
		if len(f) < 4 {
			return true
		}
		for _, m := range strings.Split(f[3], ",") {
			if m == name {
				if g, err := strconv.ParseUint(f[2], 10, 32); err == nil && uint32(g) != primary {
					groups = append(groups, uint32(g))
				}
			}
		}
		return true
	})
	return groups
}

// readInRoot calls each with every line of rel inside rootfs, resolving
// symbolic links as if rootfs were "/" so a link in the Sandbox cannot
// point the backend at a host file.
func readInRoot(rootfs, rel string, each func(string) bool) {
	f, err := openInRoot(rootfs, rel)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 16<<20))
	for sc.Scan() {
		if !each(sc.Text()) {
			return
		}
	}
}

func openInRoot(rootfs, rel string) (*os.File, error) {
	root, err := unix.Open(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// findInRoot finds a bare command name in the usual PATH inside rootfs.
func findInRoot(rootfs, name string) (string, bool) {
	for _, dir := range filepath.SplitList(sandboxPath) {
		rel := strings.TrimPrefix(filepath.Join(dir, name), "/")
		f, err := openInRoot(rootfs, rel)
		if err != nil {
			continue
		}
		st, err := f.Stat()
		f.Close()
		if err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return "/" + rel, true
		}
	}
	return "", false
}
