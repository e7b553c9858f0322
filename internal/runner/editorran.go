package runner

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// openWatch tells the Runner when the staged prompt is opened: only the
// editor script opens it (cat), in the Sandbox, through the read-only
// mount of the mod directory, and inotify on the host sees an open through
// any mount of the file. So the Runner knows for certain that Claude Code
// ran its editor for the editor key it pressed, without the editor writing
// anything (the mod directory is read-only in the Sandbox).
type openWatch struct{ fd int }

// watchOpens watches path, which must exist, for opens. Its inotify
// instance lives while one prompt fills, one a Session at a time: the
// spare one of inotifyPerSession.
func watchOpens(path string) (*openWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &openWatch{fd: fd}, nil
}

// opened reports whether path was opened since the last call; it never
// waits.
func (w *openWatch) opened() bool {
	var buf [4 << 10]byte
	n, err := unix.Read(w.fd, buf[:])
	if err != nil || n <= 0 { // EAGAIN: nothing yet
		return false
	}
	seen := false
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		seen = seen || binary.NativeEndian.Uint32(buf[off+4:])&unix.IN_OPEN != 0
		off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
	}
	return seen
}

// close ends the watch.
func (w *openWatch) close() { unix.Close(w.fd) }
