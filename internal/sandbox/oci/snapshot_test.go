package oci

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/testenv"
)

// TestCopyShifted copies a tree shaped like an upper layer: owners in the
// Sandbox's range and outside it, a hard link, a symbolic link, a
// whiteout, an opaque directory, a set-uid file and a fifo.
func TestCopyShifted(t *testing.T) {
	testenv.RequireRoot(t)
	const base = 1<<30 + 5*uidRange
	src, dst := filepath.Join(t.TempDir(), "upper"), filepath.Join(t.TempDir(), "layer")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "home/user/opaque"), 0o755))
	must(os.WriteFile(filepath.Join(src, "home/user/file"), []byte("data"), 0o640))
	must(os.Link(filepath.Join(src, "home/user/file"), filepath.Join(src, "home/user/link")))
	must(os.Symlink("file", filepath.Join(src, "home/user/sym")))
	must(unix.Mknod(filepath.Join(src, "home/user/whiteout"), unix.S_IFCHR, 0))
	must(unix.Mkfifo(filepath.Join(src, "home/user/fifo"), 0o600))
	must(os.WriteFile(filepath.Join(src, "home/user/suid"), []byte("x"), 0o755))
	must(unix.Lsetxattr(filepath.Join(src, "home/user/opaque"), "trusted.overlay.opaque", []byte("y"), 0))
	must(unix.Lsetxattr(filepath.Join(src, "home/user/file"), "trusted.overlay.origin", []byte("handle"), 0))
	for _, c := range []struct {
		path     string
		uid, gid int
	}{
		{"", base, base}, {"home", base, base}, {"home/user", base + 1000, base + 1000},
		{"home/user/file", base + 1000, base + 100}, {"home/user/sym", base + 1000, base + 1000},
		{"home/user/suid", base, base + 5},
	} {
		must(os.Lchown(filepath.Join(src, c.path), c.uid, c.gid))
	}
	must(unix.Chmod(filepath.Join(src, "home/user/suid"), 0o4755))
	// The whiteout stays as overlayfs made it: owned by host root.

	if err := copyShifted(context.Background(), src, dst, base); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path     string
		uid, gid uint32
		mode     uint32
	}{
		{"", 0, 0, unix.S_IFDIR | 0o755},
		{"home/user", 1000, 1000, unix.S_IFDIR | 0o755},
		{"home/user/file", 1000, 100, unix.S_IFREG | 0o640},
		{"home/user/sym", 1000, 1000, unix.S_IFLNK | 0o777},
		{"home/user/whiteout", 0, 0, unix.S_IFCHR},
		{"home/user/fifo", 0, 0, unix.S_IFIFO | 0o600},
		{"home/user/suid", 0, 5, unix.S_IFREG | 0o4755},
	}
	for _, tc := range tests {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dst, tc.path), &st); err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if st.Uid != tc.uid || st.Gid != tc.gid || st.Mode != tc.mode {
			t.Errorf("%s: got %d:%d %o, want %d:%d %o", tc.path, st.Uid, st.Gid, st.Mode, tc.uid, tc.gid, tc.mode)
		}
	}
	var a, b unix.Stat_t
	unix.Lstat(filepath.Join(dst, "home/user/file"), &a)
	unix.Lstat(filepath.Join(dst, "home/user/link"), &b)
	if a.Ino != b.Ino || a.Nlink != 2 {
		t.Errorf("hard link: got inodes %d and %d, %d links; want one inode, 2 links", a.Ino, b.Ino, a.Nlink)
	}
	buf := make([]byte, 8)
	if n, err := unix.Lgetxattr(filepath.Join(dst, "home/user/opaque"), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("opaque directory: got %q, %v; want its xattr kept", buf[:max(n, 0)], err)
	}
	if _, err := unix.Lgetxattr(filepath.Join(dst, "home/user/file"), "trusted.overlay.origin", buf); err == nil {
		t.Error("trusted.overlay.origin was copied; it names inodes of the old overlay")
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "home/user/file")); string(b) != "data" {
		t.Errorf("content: got %q, want data", b)
	}
}

func TestShiftCapsAndACL(t *testing.T) {
	c := &copier{base: 1 << 30}
	caps := func(magic, rootid uint32) []byte {
		b := make([]byte, 24)
		binary.LittleEndian.PutUint32(b, magic)
		binary.LittleEndian.PutUint32(b[4:], 1<<13) // CAP_NET_RAW
		binary.LittleEndian.PutUint32(b[20:], rootid)
		return b
	}
	v2 := caps(0x02000001, 0)[:20]
	tests := []struct {
		name    string
		in, out []byte
	}{
		{"v3 of the sandbox's root becomes v2", caps(0x03000001, 1<<30), v2},
		{"v3 of another root is kept", caps(0x03000001, 5), caps(0x03000001, 5)},
		{"v2 is kept", v2, v2},
	}
	for _, tc := range tests {
		if got := c.shiftCaps(tc.in); !bytes.Equal(got, tc.out) {
			t.Errorf("%s: got %x, want %x", tc.name, got, tc.out)
		}
	}
	acl := func(ids ...uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, 2)
		for i, tag := range []uint16{0x01, 0x02, 0x08, 0x20} { // USER_OBJ USER GROUP OTHER
			b = binary.LittleEndian.AppendUint16(b, tag)
			b = binary.LittleEndian.AppendUint16(b, 6)
			b = binary.LittleEndian.AppendUint32(b, ids[i])
		}
		return b
	}
	got := c.shiftACL(acl(0xFFFFFFFF, 1<<30+1000, 1<<30+100, 0xFFFFFFFF))
	if want := acl(0xFFFFFFFF, 1000, 100, 0xFFFFFFFF); !bytes.Equal(got, want) {
		t.Errorf("ACL: got %x, want %x", got, want)
	}
}

// TestMoveTreeAcrossFilesystems: a kept disk moved to another filesystem
// (a tmpfs mounted here) is copied with its owners as they were, hard links
// kept, and the original removed.
func TestMoveTreeAcrossFilesystems(t *testing.T) {
	testenv.RequireRoot(t)
	other := t.TempDir()
	if err := unix.Mount("tmpfs", other, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(other, unix.MNT_DETACH) })
	src, dst := filepath.Join(t.TempDir(), "claude"), filepath.Join(other, "claude")
	if err := os.MkdirAll(filepath.Join(src, "projects"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(src, "projects", "s.jsonl")
	os.WriteFile(f, []byte("{}\n"), 0o600)
	os.Link(f, filepath.Join(src, "link"))
	os.Lchown(f, 1000, 1000)

	if err := moveTree(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	if exists(src) {
		t.Error("the original is still there")
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dst, "projects", "s.jsonl"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 1000 || st.Gid != 1000 || st.Nlink != 2 || st.Mode&0o777 != 0o600 {
		t.Errorf("moved file: uid %d gid %d links %d mode %o; want 1000, 1000, 2, 600", st.Uid, st.Gid, st.Nlink, st.Mode&0o777)
	}
}
