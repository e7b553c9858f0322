package transcript

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// waker wakes Follow when something changes on the transcript's path, by
// inotify, so an idle Session's follower sleeps instead of polling every
// DefaultInterval (10 millicores a Session, half of an idle one's CPU).
// It watches each directory from the config dir's projects down to the
// subagents directory that exists, adding the rest as they appear.
type waker struct {
	f     *os.File
	fd    int
	wake  chan struct{}
	ended chan struct{} // closed when read returns: on a read error, Follow polls

	mu   sync.Mutex
	dirs []watchDir
	wds  map[int32]int // watch descriptor -> index in dirs
}

// watchDir is one directory on the path and what of it wakes Follow: only
// a new entry, for those above a transcript file; writes too, for those
// that hold one.
type watchDir struct {
	path    string
	mask    uint32
	watched bool
}

const (
	entryMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	writeMask = entryMask | unix.IN_MODIFY
)

// newWaker watches the directories of Tailer t under configDir, or returns
// an error if inotify is not there (Follow then polls).
func newWaker(configDir string, t *Tailer) (*waker, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	projects := filepath.Join(configDir, "projects")
	w := &waker{
		f:  os.NewFile(uintptr(fd), "inotify"), // non-blocking: read through Go's poller
		fd: fd,
		dirs: []watchDir{
			{path: configDir, mask: entryMask},
			{path: projects, mask: entryMask},
			{path: t.base, mask: writeMask},
			{path: filepath.Dir(t.subagents), mask: entryMask},
			{path: t.subagents, mask: writeMask},
		},
		wds:   map[int32]int{},
		wake:  make(chan struct{}, 1),
		ended: make(chan struct{}),
	}
	w.watch()
	go w.read()
	return w, nil
}

// watch adds a watch on each directory not yet watched, in order, stopping
// at the first that does not exist: its parent's watch says when it does.
func (w *waker) watch() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.dirs {
		d := &w.dirs[i]
		if d.watched {
			continue
		}
		wd, err := unix.InotifyAddWatch(w.fd, d.path, d.mask)
		if err != nil {
			return
		}
		d.watched = true
		w.wds[int32(wd)] = i
	}
}

// read turns inotify's events into wakes, and forgets a watch the kernel
// dropped (its directory removed or moved), so watch adds it again.
func (w *waker) read() {
	defer close(w.ended)
	buf := make([]byte, 16<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			if mask&unix.IN_IGNORED != 0 {
				if i, ok := w.wds[wd]; ok {
					w.dirs[i].watched = false
					delete(w.wds, wd)
				}
			}
			off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
		}
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// broken reports whether read has returned, so nothing wakes Follow.
func (w *waker) broken() bool {
	select {
	case <-w.ended:
		return true
	default:
		return false
	}
}

// close ends the watch and waits for read to return.
func (w *waker) close() {
	w.f.Close()
	<-w.ended
}
