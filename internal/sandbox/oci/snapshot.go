package oci

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// copyShifted copies the tree src to dst, which must not exist, keeping
// file types, modes, times, extended attributes (overlayfs' whiteouts and
// opaque directories among them) and hard links, with every owner in
// [base, base+uidRange) shifted down by base. The copy is then owned like
// an unpacked image layer, and any Sandbox can use it through its own
// idmapped mount. Owners outside the range (overlayfs' own whiteouts are
// made as host root) are kept.
func copyShifted(ctx context.Context, src, dst string, base uint32) error {
	c := &copier{ctx: ctx, base: base, links: map[[2]uint64]string{}}
	return c.copy(src, dst)
}

type copier struct {
	ctx   context.Context
	base  uint32
	links map[[2]uint64]string
}

func (c *copier) shift(id uint32) uint32 {
	if id >= c.base && id-c.base < uidRange {
		return id - c.base
	}
	return id
}

func (c *copier) copy(src, dst string) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := c.copy(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
	case unix.S_IFREG:
		key := [2]uint64{st.Dev, st.Ino}
		if st.Nlink > 1 {
			if first, ok := c.links[key]; ok {
				return os.Link(first, dst)
			}
			c.links[key] = dst
		}
		if err := copyData(src, dst); err != nil {
			return err
		}
	case unix.S_IFLNK:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
	default: // devices (whiteouts are 0/0 character devices), fifos, sockets
		if err := unix.Mknod(dst, st.Mode, int(st.Rdev)); err != nil {
			return fmt.Errorf("mknod %s: %w", dst, err)
		}
	}
	return c.attrs(src, dst, &st)
}

func copyData(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// *os.File to *os.File: copy_file_range, in the kernel.
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// attrs sets dst's owner, extended attributes, mode and times from src's,
// in that order: chown clears set-uid bits, and writing anything changes
// the times.
func (c *copier) attrs(src, dst string, st *unix.Stat_t) error {
	if err := unix.Lchown(dst, int(c.shift(st.Uid)), int(c.shift(st.Gid))); err != nil {
		return fmt.Errorf("chown %s: %w", dst, err)
	}
	isLink := st.Mode&unix.S_IFMT == unix.S_IFLNK
	if err := c.xattrs(src, dst, isLink); err != nil {
		return err
	}
	if !isLink {
		if err := unix.Chmod(dst, st.Mode&0o7777); err != nil {
			return fmt.Errorf("chmod %s: %w", dst, err)
		}
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", dst, err)
	}
	return nil
}

// droppedXattrs tie an upper file to the inodes of the overlay it was made
// in, and mean nothing in a layer.
var droppedXattrs = map[string]bool{
	"trusted.overlay.origin": true,
	"trusted.overlay.impure": true,
	"trusted.overlay.nlink":  true,
	"trusted.overlay.uuid":   true,
}

func (c *copier) xattrs(src, dst string, isLink bool) error {
	names, err := listXattrs(src)
	if err != nil {
		return err
	}
	for _, name := range names {
		if droppedXattrs[name] {
			continue
		}
		val, err := getXattr(src, name)
		if err != nil {
			return err
		}
		switch name {
		case "security.capability":
			val = c.shiftCaps(val)
		case "system.posix_acl_access", "system.posix_acl_default":
			val = c.shiftACL(val)
		}
		if err := unix.Lsetxattr(dst, name, val, 0); err != nil {
			if isLink && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOTSUP)) {
				continue
			}
			return fmt.Errorf("set %s on %s: %w", name, dst, err)
		}
	}
	return nil
}

func listXattrs(path string) ([]string, error) {
	size, err := unix.Llistxattr(path, nil)
	if err != nil || size == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		return nil, err
	}
	buf := make([]byte, size)
	size, err = unix.Llistxattr(path, buf)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range bytes.Split(buf[:size], []byte{0}) {
		if len(n) > 0 {
			out = append(out, string(n))
		}
	}
	return out, nil
}

func getXattr(path, name string) ([]byte, error) {
	size, err := unix.Lgetxattr(path, name, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", name, path, err)
	}
	buf := make([]byte, size)
	size, err = unix.Lgetxattr(path, name, buf)
	if err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", name, path, err)
	}
	return buf[:size], nil
}

// shiftCaps turns file capabilities set inside the Sandbox (revision 3,
// tied to the host uid of the Sandbox's root) into revision 2, which any
// Sandbox's root gets through its idmapped mount.
func (c *copier) shiftCaps(val []byte) []byte {
	const (
		revMask = 0xFF000000
		rev2    = 0x02000000
		rev3    = 0x03000000
	)
	if len(val) != 24 {
		return val
	}
	magic := binary.LittleEndian.Uint32(val)
	rootid := binary.LittleEndian.Uint32(val[20:])
	if magic&revMask != rev3 || c.shift(rootid) != 0 {
		return val
	}
	out := append([]byte{}, val[:20]...)
	binary.LittleEndian.PutUint32(out, magic&^revMask|rev2)
	return out
}

// shiftACL shifts the user and group entries of a POSIX ACL: a 4-byte
// version, then entries of tag (2), permissions (2) and id (4).
func (c *copier) shiftACL(val []byte) []byte {
	const aclUser, aclGroup = 0x02, 0x08
	out := append([]byte{}, val...)
	for off := 4; off+8 <= len(out); off += 8 {
		tag := binary.LittleEndian.Uint16(out[off:])
		if tag == aclUser || tag == aclGroup {
			id := binary.LittleEndian.Uint32(out[off+4:])
			binary.LittleEndian.PutUint32(out[off+4:], c.shift(id))
		}
	}
	return out
}
