package ociimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/errdefs"
)

// Layer tars are untrusted input. Every name is checked (no "..", nothing
// absolute), and every path is resolved as if the root filesystem were "/"
// (what openat2's RESOLVE_IN_ROOT does, and containerd's unpacker): symlinks
// in parent directories are followed, absolute ones from the root and ".."
// stopping at it, so "var/run -> /run" works and nothing lands outside.
// Nothing else writes to the tree while it is unpacked, so resolving with
// Lstat and then acting on the path is not racy.

const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh." // aufs bookkeeping, ignored
	whiteoutOpaque = ".wh..wh..opq"
	maxSymlinks    = 40 // as Linux's MAXSYMLINKS
)

type unpacker struct {
	root string
	// owned: running as root, so owners and xattrs from the tar are kept.
	owned bool
	// seen holds the host paths this layer wrote and their parents, which
	// its own whiteouts must not remove: whiteouts hide lower layers only.
	seen map[string]bool
	// dirs get their modes and times once the layer's files are in them.
	dirs []*tar.Header
	// parents maps directories of the image to the host's, while valid.
	parents map[string]string
	buf     []byte
}

func newUnpacker(root string) *unpacker {
	return &unpacker{root: root, owned: os.Geteuid() == 0, buf: make([]byte, 1<<16)}
}

// applyLayer unpacks layers[i], the first as it downloads, a later one from
// its spool, which it then removes.
func (u *unpacker) applyLayer(i int, l v1.Layer, later []*spool, m *meter) error {
	if i == 0 {
		rc, err := l.Compressed()
		if err != nil {
			return classify(err)
		}
		defer rc.Close()
		return u.apply(&counter{r: rc, m: m})
	}
	s := later[i-1]
	rc, err := s.open()
	if err != nil {
		return err
	}
	defer os.Remove(s.path)
	defer rc.Close()
	return u.apply(rc)
}

// apply unpacks one layer's compressed tar on top of the tree.
func (u *unpacker) apply(compressed io.Reader) error {
	br := bufio.NewReaderSize(compressed, 1<<16)
	dec, err := decompress(br)
	if err != nil {
		return err
	}
	defer dec.Close()
	r := readAhead(dec)
	defer r.Close()
	u.seen = map[string]bool{}
	u.parents = map[string]string{}
	u.dirs = u.dirs[:0]
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, tar.ErrHeader) {
			return fmt.Errorf("%w: %v", errdefs.ErrInvalid, err)
		}
		if err != nil {
			return classify(err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
	}
	// The registry client checks a blob's digest when it reaches its end,
	// which the tar reader may stop short of.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return classify(err)
	}
	for _, hdr := range u.dirs {
		rel, _ := clean(hdr.Name)
		p, err := u.resolve(rel, false)
		if err != nil {
			return err
		}
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue // replaced later in the layer
		}
		if err := os.Chmod(p, mode(hdr)); err != nil {
			return err
		}
		if err := u.times(p, hdr); err != nil {
			return err
		}
	}
	return nil
}

func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := clean(hdr.Name)
	if err != nil {
		return err
	}
	base := path.Base(rel)
	if strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(rel)
	}
	if rel == "" {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("%w: the root must be a directory", errdefs.ErrInvalid)
		}
		return u.dir(u.root, hdr)
	}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeChar, tar.TypeBlock:
		// Skipped: runtimes give a Sandbox its own /dev, and a device node
		// from an untrusted image has no business in a host directory.
		return nil
	}

	parent, err := u.parent(path.Dir(rel))
	if err != nil {
		return err
	}
	p := filepath.Join(parent, base)
	err = u.create(p, hdr, r)
	if errors.Is(err, fs.ErrExist) {
		fi, lerr := os.Lstat(p)
		switch {
		case lerr != nil:
			return lerr
		case fi.IsDir() && hdr.Typeflag == tar.TypeDir:
			err = u.dir(p, hdr) // merged with the directory below
		default:
			// An entry replaces whatever was there, and all that was under it.
			if err := u.remove(p); err != nil {
				return err
			}
			err = u.create(p, hdr, r)
		}
	}
	if err != nil {
		return err
	}
	u.mark(p)
	if hdr.Typeflag == tar.TypeDir {
		u.parents[rel] = p
	}
	return nil
}

// create makes the entry at p, failing with fs.ErrExist, before it reads
// anything of r, if something is there: most entries are new, so finding
// out costs no stat.
func (u *unpacker) create(p string, hdr *tar.Header, r io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := os.Mkdir(p, 0o755); err != nil {
			return err
		}
		return u.dir(p, hdr)
	case tar.TypeReg, tar.TypeGNUSparse:
		return u.file(p, hdr, r)
	case tar.TypeSymlink:
		if err := os.Symlink(hdr.Linkname, p); err != nil {
			return err
		}
		if err := u.chown(p, hdr); err != nil {
			return err
		}
		return u.times(p, hdr)
	case tar.TypeLink:
		target, err := clean(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link: %w", err)
		}
		old, err := u.resolve(target, false)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(old)
		if err != nil || fi.IsDir() {
			return fmt.Errorf("%w: hard link to %s, which is not a file in the image", errdefs.ErrInvalid, hdr.Linkname)
		}
		return os.Link(old, p)
	case tar.TypeFifo:
		if err := unix.Mkfifo(p, 0o600); err != nil {
			return err
		}
		return u.meta(p, hdr)
	}
	return fmt.Errorf("%w: unsupported tar entry type %q", errdefs.ErrInvalid, hdr.Typeflag)
}

// dir gives a directory its owner now and its mode and times once the
// layer's files are in it.
func (u *unpacker) dir(p string, hdr *tar.Header) error {
	if err := u.chown(p, hdr); err != nil {
		return err
	}
	u.dirs = append(u.dirs, hdr)
	return nil
}

// parent resolves dir, a directory's path in the image, to the host's and
// makes it if it is missing. A layer's entries come directory by directory,
// so the answer is kept until something is removed, which may have been on
// the way to it: a directory is never otherwise replaced.
func (u *unpacker) parent(dir string) (string, error) {
	if p, ok := u.parents[dir]; ok {
		return p, nil
	}
	p, err := u.resolve(dir, true)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return "", err
	}
	u.parents[dir] = p
	return p, nil
}

// remove takes p away with all that is under it.
func (u *unpacker) remove(p string) error {
	clear(u.parents)
	return os.RemoveAll(p)
}

func (u *unpacker) file(p string, hdr *tar.Header, r io.Reader) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	// One buffer for every file: io.Copy would allocate one per file.
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, r, u.buf); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return u.meta(p, hdr)
}

// meta sets owner, xattrs, then mode (a chown clears setuid bits), then times.
func (u *unpacker) meta(p string, hdr *tar.Header) error {
	if err := u.chown(p, hdr); err != nil {
		return err
	}
	if err := os.Chmod(p, mode(hdr)); err != nil {
		return err
	}
	return u.times(p, hdr)
}

func (u *unpacker) chown(p string, hdr *tar.Header) error {
	if !u.owned {
		return nil
	}
	if err := os.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeSymlink {
		return nil // Linux keeps no user xattrs on symlinks
	}
	for k, v := range hdr.PAXRecords {
		key, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		// Only user xattrs and file capabilities: trusted.overlay.* would
		// steer the overlay this tree becomes a layer of, and other
		// security.* labels mean nothing here.
		if !ok || !(strings.HasPrefix(key, "user.") || key == "security.capability") {
			continue
		}
		if err := unix.Lsetxattr(p, key, []byte(v), 0); err != nil {
			return fmt.Errorf("set xattr %s: %w", key, err)
		}
	}
	return nil
}

func (u *unpacker) times(p string, hdr *tar.Header) error {
	atime := hdr.AccessTime
	if atime.IsZero() {
		atime = hdr.ModTime
	}
	ts := []unix.Timespec{timespec(atime), timespec(hdr.ModTime)}
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// whiteout applies a ".wh.NAME" entry, which removes NAME from the layers
// below, or ".wh..wh..opq", which empties its directory of them.
func (u *unpacker) whiteout(rel string) error {
	dir, base := path.Dir(rel), path.Base(rel)
	switch {
	case base == whiteoutOpaque:
		d, err := u.resolve(dir, true)
		if err != nil {
			return err
		}
		u.mark(d)
		err = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || p == d || u.seen[p] {
				return err
			}
			if err := u.remove(p); err != nil {
				return err
			}
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	case strings.HasPrefix(base, whiteoutMeta):
		return nil
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("%w: bad whiteout name", errdefs.ErrInvalid)
	}
	parent, err := u.resolve(dir, true)
	if err != nil {
		return err
	}
	p := filepath.Join(parent, name)
	if u.seen[p] {
		return nil
	}
	return u.remove(p)
}

// mark records that this layer wrote p, and so every directory above it.
func (u *unpacker) mark(p string) {
	for ; !u.seen[p] && len(p) > len(u.root); p = filepath.Dir(p) {
		u.seen[p] = true
	}
}

// resolve maps rel, a cleaned path in the image, to a host path inside the
// root, following symlinks as if the root were "/"; the last component is
// followed only if last is true. Components that do not exist yet are taken
// literally.
func (u *unpacker) resolve(rel string, last bool) (string, error) {
	todo := strings.Split(rel, "/")
	done := "" // resolved so far, relative to the root, without symlinks
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			// done holds no symlinks, so ".." is lexical; at the root it
			// stays there.
			done = strings.TrimSuffix(path.Dir("/"+done), "/")
			done = strings.TrimPrefix(done, "/")
			continue
		}
		next := path.Join(done, c)
		if len(todo) == 0 && !last {
			done = next
			break
		}
		fi, err := os.Lstat(filepath.Join(u.root, next))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", err
			}
			done = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", fmt.Errorf("%w: too many levels of symbolic links in %s", errdefs.ErrInvalid, rel)
		}
		target, err := os.Readlink(filepath.Join(u.root, next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			done = ""
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return filepath.Join(u.root, done), nil
}

// clean checks a path from a tar and returns it relative to the root, ""
// for the root itself.
func clean(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: absolute path %q in a layer", errdefs.ErrInvalid, name)
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", fmt.Errorf("%w: path %q in a layer leaves the root", errdefs.ErrInvalid, name)
		}
	}
	if c := path.Clean(name); c != "." {
		return c, nil
	}
	return "", nil
}

// mode is an entry's permissions with its setuid, setgid and sticky bits.
func mode(hdr *tar.Header) os.FileMode {
	return hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

func timespec(t time.Time) unix.Timespec {
	if t.IsZero() {
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return unix.NsecToTimespec(t.UnixNano())
}

// decompress picks the decompressor from the stream's first bytes, as
// registries' media types are not always truthful.
func decompress(br *bufio.Reader) (io.ReadCloser, error) {
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		r, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errdefs.ErrInvalid, err)
		}
		return r, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		r, err := zstd.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errdefs.ErrInvalid, err)
		}
		return r.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}

// counter feeds the bytes read to a meter, and stops reading once its
// context, if it has one, is done.
type counter struct {
	r   io.Reader
	m   *meter
	ctx context.Context
}

func (c *counter) Read(b []byte) (int, error) {
	if c.ctx != nil && c.ctx.Err() != nil {
		return 0, c.ctx.Err()
	}
	n, err := c.r.Read(b)
	c.m.add(n)
	return n, err
}
