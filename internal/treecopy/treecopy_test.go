package treecopy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestACopyKeepsFilesLinksAndModesAndNeverFollowsALink: regular files
// come across with their bytes, mode and times; a link to a file outside
// the tree is copied as that link, its target unread; a FIFO is left out
// without blocking; a shared file is a hard link; an existing dst is
// refused.
func TestACopyKeepsFilesLinksAndModesAndNeverFollowsALink(t *testing.T) {
	src, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	write := func(rel, body string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	if err := os.WriteFile(secret, []byte("not for the copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	write("a.txt", "hello", 0o640)
	write("bin/run", "#!/bin/sh\n", 0o755)
	write(".git/objects/ab/cdef", "object", 0o444)
	if err := os.Symlink(secret, filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(src, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(src, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "bin"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "bin"), 0o755) })

	dst := filepath.Join(t.TempDir(), "copy")
	res, err := Copy(context.Background(), src, dst, Options{Share: func(rel string) bool { return strings.HasPrefix(rel, ".git/objects/") }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dst, "bin"), 0o755) })
	files := []struct {
		rel, body string
		mode      os.FileMode
	}{
		{"a.txt", "hello", 0o640},
		{"bin/run", "#!/bin/sh\n", 0o755},
		{".git/objects/ab/cdef", "object", 0o444},
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dst, f.rel))
		st, _ := os.Lstat(filepath.Join(dst, f.rel))
		if err != nil || string(b) != f.body || st.Mode().Perm() != f.mode {
			t.Errorf("%s: got %q %v (%v), want %q %v", f.rel, b, st.Mode().Perm(), err, f.body, f.mode)
		}
	}
	if st, _ := os.Stat(filepath.Join(dst, "bin")); st.Mode().Perm() != 0o555 {
		t.Errorf("bin: got mode %v, want 0555", st.Mode().Perm())
	}
	for name, want := range map[string]string{"link": secret, "dirlink": outside} {
		if got, err := os.Readlink(filepath.Join(dst, name)); err != nil || got != want {
			t.Errorf("%s: got link %q (%v), want a link to %q", name, got, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "fifo")); !os.IsNotExist(err) {
		t.Errorf("the FIFO: got %v, want it left out", err)
	}
	a, _ := os.Stat(filepath.Join(src, ".git/objects/ab/cdef"))
	b, _ := os.Stat(filepath.Join(dst, ".git/objects/ab/cdef"))
	if !os.SameFile(a, b) || a.Sys().(*syscall.Stat_t).Nlink != 2 {
		t.Errorf("git's object: got a file of its own, want a hard link to the source's")
	}
	if res.Linked != 1 || res.Skipped != 1 || res.Reflinked+res.Copied != 2 {
		t.Errorf("got %+v, want 1 linked, 1 skipped, 2 reflinked or copied", res)
	}
	if !strings.Contains(res.String(), "git's objects shared by hard link") {
		t.Errorf("got %q, want it to say the objects were shared", res)
	}
	if _, err := Copy(context.Background(), src, dst, Options{}); err == nil {
		t.Errorf("a copy onto an existing dst: got no error, want one")
	}
}
