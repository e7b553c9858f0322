// Package treecopy copies a directory tree cheaply, for a fork of a
// Session: each regular file a reflink (FICLONE) where the file system
// shares blocks between files, a plain copy where it does not, and the
// files a caller names (git's objects) hard links. Owners, modes and times
// are kept; extended attributes are not.
//
// The trees it copies are a Sandbox's to write, so it never follows a
// symbolic link and never opens anything but a regular file: each step is
// relative to a directory it holds open (openat with O_NOFOLLOW), a link
// is copied as a link, and a FIFO, socket or device is left out.
//
// Only the Runner imports it.
package treecopy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Options say what may be shared rather than copied.
type Options struct {
	// Share says whether the regular file at rel (slash-separated,
	// relative to the tree's root) may be a hard link to the source's: a
	// file neither tree changes in place, such as git's objects. Nil
	// shares nothing.
	Share func(rel string) bool
}

// Result counts what Copy did.
type Result struct {
	// Reflinked, Copied and Linked count regular files by how each was
	// copied; Skipped counts what was left out (FIFOs, sockets, devices).
	Reflinked, Copied, Linked, Skipped int
	// Bytes are the bytes written by plain copies.
	Bytes int64
}

// Add sums two Results.
func (r Result) Add(o Result) Result {
	return Result{r.Reflinked + o.Reflinked, r.Copied + o.Copied, r.Linked + o.Linked, r.Skipped + o.Skipped, r.Bytes + o.Bytes}
}

// String says how the tree was copied, for a start log.
func (r Result) String() string {
	s := fmt.Sprintf("%d files by reflink", r.Reflinked)
	if r.Reflinked == 0 && r.Copied > 0 {
		s = fmt.Sprintf("%d files by plain copy (%d MiB; this file system has no reflinks)", r.Copied, r.Bytes>>20)
	} else if r.Copied > 0 {
		s += fmt.Sprintf(", %d by plain copy (%d MiB)", r.Copied, r.Bytes>>20)
	}
	if r.Linked > 0 {
		s += fmt.Sprintf(", %d of git's objects shared by hard link", r.Linked)
	}
	if r.Skipped > 0 {
		s += fmt.Sprintf(", %d FIFOs, sockets or devices left out", r.Skipped)
	}
	return s
}

// Copy copies the tree at src to dst, which must not exist; its parent
// must. A Copy that fails leaves dst partly made: the caller removes it.
func Copy(ctx context.Context, src, dst string, opts Options) (Result, error) {
	c := copier{ctx: ctx, opts: opts}
	c.reflink.Store(true)
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return c.res, fmt.Errorf("copy %s: %w", src, err)
	}
	defer unix.Close(sfd)
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return c.res, err
	}
	if err := unix.Mkdir(dst, 0o700); err != nil {
		return c.res, fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return c.res, err
	}
	defer unix.Close(dfd)
	if err := c.dir(sfd, dfd, "."); err != nil {
		return c.res, fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return c.res, keep(dfd, &st)
}

type copier struct {
	ctx  context.Context
	opts Options
	res  Result
	// reflink is cleared once the file system refuses one: the rest go
	// by plain copy without asking again.
	reflink atomic.Bool
}

// dir copies the entries of the directory open at sfd into the one open
// at dfd; rel is its path in the tree.
func (c *copier) dir(sfd, dfd int, rel string) error {
	names, err := readNames(sfd)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		r := path.Join(rel, name)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			err = c.subdir(sfd, dfd, name, r, &st)
		case unix.S_IFREG:
			err = c.file(sfd, dfd, name, r, &st)
		case unix.S_IFLNK:
			err = symlink(sfd, dfd, name, &st)
		default:
			c.res.Skipped++
		}
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
	}
	return nil
}

func (c *copier) subdir(sfd, dfd int, name, rel string, st *unix.Stat_t) error {
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return err
	}
	s, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	d, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	if err := c.dir(s, d, rel); err != nil {
		return err
	}
	return keep(d, st)
}

func (c *copier) file(sfd, dfd int, name, rel string, st *unix.Stat_t) error {
	if c.opts.Share != nil && c.opts.Share(rel) {
		if err := unix.Linkat(sfd, name, dfd, name, 0); err == nil {
			c.res.Linked++
			return nil
		}
		// Linking refused (another file system, or protected_hardlinks):
		// a copy, then.
	}
	// O_NONBLOCK: should the entry have become a FIFO since it was read,
	// opening it does not wait; the check below then refuses it.
	in, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(in)
	var now unix.Stat_t
	if err := unix.Fstat(in, &now); err != nil {
		return err
	}
	if now.Mode&unix.S_IFMT != unix.S_IFREG || now.Ino != st.Ino || now.Dev != st.Dev {
		return errors.New("changed while it was copied")
	}
	out, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer unix.Close(out)
	if c.reflink.Load() {
		err := unix.IoctlFileClone(out, in)
		if err == nil {
			c.res.Reflinked++
			return keep(out, &now)
		}
		if !refusesReflinks(err) {
			return fmt.Errorf("reflink: %w", err)
		}
		c.reflink.Store(false)
	}
	n, err := copyBytes(out, in)
	if err != nil {
		return err
	}
	c.res.Copied++
	c.res.Bytes += n
	return keep(out, &now)
}

// copyBytes copies what in holds to out.
func copyBytes(out, in int) (int64, error) {
	buf := make([]byte, 1<<20)
	var total int64
	for {
		n, err := unix.Read(in, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return total, err
		}
		for b := buf[:n]; len(b) > 0; {
			w, err := unix.Write(out, b)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return total, err
			}
			b = b[w:]
		}
		total += int64(n)
	}
}

// refusesReflinks says err is the file system refusing FICLONE, not a
// failure of this file.
func refusesReflinks(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EXDEV) ||
		errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS)
}

func symlink(sfd, dfd int, name string, st *unix.Stat_t) error {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(sfd, name, buf)
	if err != nil {
		return err
	}
	if err := unix.Symlinkat(string(buf[:n]), dfd, name); err != nil {
		return err
	}
	if err := unix.Fchownat(dfd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return unix.UtimesNanoAt(dfd, name, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

// keep gives the file open at fd the source's owner, mode and times.
func keep(fd int, st *unix.Stat_t) error {
	if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
		return err
	}
	return unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(st.Atim.Nano()), unix.NsecToTimeval(st.Mtim.Nano())})
}

// readNames lists the directory open at fd, leaving fd where it was.
func readNames(fd int) ([]string, error) {
	d, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}
