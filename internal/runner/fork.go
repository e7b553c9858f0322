package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/dockerd"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/treecopy"
)

// Forks. A fork is a new Session whose directory starts as a copy of an
// asleep Session's: its Workspace, and its Sandbox's Disks as kept disks
// (disks/<name>, taken back by the fork's first Sandbox as after a
// restore), Claude Code's conversation among them under the fork's id. The
// copy is made beside the Session directories and renamed into place, so
// a fork is there whole or not at all. What the parent's Sandbox wrote
// outside /workspace and its Disks stays with the parent, and so do
// dockerd's images and containers.

// forkedMark is the file of a fork's directory that holds how it was
// copied, for its first start's log.
const forkedMark = "forked"

// forkPrefix names a fork's directory while it is copied.
const forkPrefix = ".fork-"

// forker makes forks on this host, holding of the Runner only what it
// uses.
type forker struct {
	backend sandbox.Backend
	log     *slog.Logger
	// dir is a Session's directory; awake says one runs here.
	dir   func(id string) string
	awake func(id string) bool
}

func newForker(r *Runner) forker {
	return forker{backend: r.backend, log: r.log, dir: r.sessionDir, awake: func(id string) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.sessions[id] != nil
	}}
}

// fork copies Session req.From, asleep here, as Session req.SessionID. It
// refuses an awake or archived Session, one with no Sandbox here, and a
// backend that lends no disks (ErrConflict).
func (r forker) fork(ctx context.Context, req protocol.SessionFork) (protocol.SessionForked, error) {
	if !protocol.ValidSessionID(req.SessionID) || !protocol.ValidSessionID(req.From) || req.SessionID == req.From {
		return protocol.SessionForked{}, fmt.Errorf("fork %q as %q: %w", req.From, req.SessionID, errdefs.ErrInvalid)
	}
	lender, ok := r.backend.(sandbox.DiskLender)
	if !ok {
		return protocol.SessionForked{}, fmt.Errorf("this Runner's Sandbox backend (%s) cannot lend a Sandbox's disks, which a fork copies: %w", r.backend.Name(), errdefs.ErrConflict)
	}
	src, dst := r.dir(req.From), r.dir(req.SessionID)
	switch {
	case r.awake(req.From):
		return protocol.SessionForked{}, errForkAwake
	case exists(filepath.Join(src, archivedMark)):
		return protocol.SessionForked{}, fmt.Errorf("the Session is archived: restore it (kndl restore), then fork it: %w", errdefs.ErrConflict)
	case exists(dst):
		return protocol.SessionForked{}, fmt.Errorf("session %s already has a directory on this Runner: %w", req.SessionID, errdefs.ErrConflict)
	}
	tmp := filepath.Join(filepath.Dir(dst), forkPrefix+req.SessionID)
	os.RemoveAll(tmp) // a fork cut short
	out, err := r.copyFork(ctx, lender, req, src, tmp)
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return protocol.SessionForked{}, err
	}
	r.log.Info("forked a session", "session", req.SessionID, "from", req.From, "how", out.How)
	return out, nil
}

var errForkAwake = fmt.Errorf("the Session is awake on its Runner: put it to sleep (kndl sleep), then fork it: %w", errdefs.ErrConflict)

// copyFork makes the fork's directory at tmp while the parent's Sandbox is
// held stopped, so no wake changes what is copied.
func (r forker) copyFork(ctx context.Context, lender sandbox.DiskLender, req protocol.SessionFork, src, tmp string) (protocol.SessionForked, error) {
	if err := os.MkdirAll(filepath.Join(tmp, "disks"), 0o700); err != nil {
		return protocol.SessionForked{}, err
	}
	var res treecopy.Result
	err := lender.WithDisks(ctx, sandboxID(req.From), func(disks map[string]string) error {
		ws, err := treecopy.Copy(ctx, filepath.Join(src, "workspace"), filepath.Join(tmp, "workspace"), treecopy.Options{Share: gitObject})
		res = res.Add(ws)
		if err != nil {
			return fmt.Errorf("copy the Workspace: %w", err)
		}
		for name, dir := range disks {
			if name == dockerd.Disk {
				// dockerd's layers hold overlay whiteouts (devices), which
				// the copy leaves out: the fork's dockerd starts empty.
				continue
			}
			d, err := treecopy.Copy(ctx, dir, filepath.Join(tmp, "disks", name), treecopy.Options{})
			res = res.Add(d)
			if err != nil {
				return fmt.Errorf("copy disk %s: %w", name, err)
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, sandbox.ErrRunning):
		return protocol.SessionForked{}, errForkAwake
	case errors.Is(err, sandbox.ErrNotFound):
		return protocol.SessionForked{}, fmt.Errorf("the Session has no Sandbox on this Runner to fork: it never came up; fork one that has run: %w", errdefs.ErrConflict)
	case err != nil:
		return protocol.SessionForked{}, err
	}
	offsets, err := adoptConversation(filepath.Join(tmp, "disks", "claude"), req.From, req.SessionID)
	if err != nil {
		return protocol.SessionForked{}, fmt.Errorf("carry Claude Code's conversation: %w", err)
	}
	how := fmt.Sprintf("Forked from Session %s: its Workspace and disks copied, %s.", req.From, res)
	if err := os.WriteFile(filepath.Join(tmp, forkedMark), []byte(how), 0o600); err != nil {
		return protocol.SessionForked{}, err
	}
	return protocol.SessionForked{Offsets: offsets, How: how}, nil
}

// gitPacked matches what git writes once and never changes in place: a
// loose object, or a pack and its indexes.
var gitPacked = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\.git/objects/([0-9a-f]{2}/[0-9a-f]{38,62}|pack/pack-[0-9a-f]+\.(pack|idx|rev))$`)
})

// gitObject says a Workspace file may be shared with the fork by hard link.
func gitObject(rel string) bool { return gitPacked().MatchString(rel) }

// adoptConversation renames the conversation copied on a fork's Claude
// disk (at dir) from the parent's id to the fork's, and says where each of
// its transcript files ends. The ids are the same length, so the offsets
// hold. The copy is the Sandbox's writing: every step is openat with
// O_NOFOLLOW, and only regular files are read.
func adoptConversation(dir, from, to string) (map[string]int64, error) {
	rel := strings.TrimPrefix(filepath.Dir(claude.TranscriptPath("/", workspaceDir, from)), "/")
	fd, err := openDirs(dir, strings.Split(rel, "/"))
	if errors.Is(err, unix.ENOENT) {
		return nil, nil // no conversation written yet: the fork starts afresh
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	end, err := rewriteFile(fd, from+".jsonl", to+".jsonl", from, to)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	offsets := map[string]int64{to + ".jsonl": end}
	if err := unix.Renameat(fd, from, fd, to); err != nil && !errors.Is(err, unix.ENOENT) {
		return nil, err
	}
	sub, err := openDirs(dir, append(strings.Split(rel, "/"), to, "subagents"))
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return offsets, nil
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(sub)
	names, err := dirNames(sub)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if !strings.HasSuffix(n, ".jsonl") {
			continue
		}
		if end, err := rewriteFile(sub, n, n, from, to); err == nil {
			offsets[path.Join(to, "subagents", n)] = end
		} else if !errors.Is(err, errNotRegular) {
			return nil, err
		}
	}
	return offsets, nil
}

var errNotRegular = errors.New("not a regular file")

// rewriteFile writes the regular file name under dfd as newName with every
// from written as to (the same length), and removes name if it differs. It
// returns the offset just past the last complete line.
func rewriteFile(dfd int, name, newName, from, to string) (int64, error) {
	in, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(in), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(in, &st); err != nil {
		return 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, errNotRegular
	}
	tmp := newName + ".fork"
	unix.Unlinkat(dfd, tmp, 0)
	ofd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, err
	}
	out := os.NewFile(uintptr(ofd), tmp)
	defer out.Close()
	var end, n int64
	br, w := bufio.NewReader(f), bufio.NewWriter(out)
	for {
		line, rerr := br.ReadBytes('\n')
		w.Write(bytes.ReplaceAll(line, []byte(from), []byte(to)))
		n += int64(len(line))
		if len(line) > 0 && line[len(line)-1] == '\n' {
			end = n
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, rerr
		}
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if err := errors.Join(unix.Fchown(ofd, int(st.Uid), int(st.Gid)), unix.Fchmod(ofd, st.Mode&0o777)); err != nil {
		return 0, err
	}
	if err := unix.Renameat(dfd, tmp, dfd, newName); err != nil {
		return 0, err
	}
	if newName != name {
		if err := unix.Unlinkat(dfd, name, 0); err != nil {
			return 0, err
		}
	}
	return end, nil
}

// openDirs opens dir, then each of elems under it, refusing a link at
// every step.
func openDirs(dir string, elems []string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, e := range elems {
		next, err := unix.Openat(fd, e, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// dirNames lists the directory open at fd.
func dirNames(fd int) ([]string, error) {
	d, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}

// sayForked puts how a fork was copied in its first start's log.
func sayForked(dir string, logf func(string, ...any)) {
	p := filepath.Join(dir, forkedMark)
	if b, err := os.ReadFile(p); err == nil {
		logf("%s", b)
		os.Remove(p)
	}
}
