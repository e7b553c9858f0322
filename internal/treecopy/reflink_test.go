package treecopy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// xfs mounts a fresh XFS made with reflinks (mkfs.xfs's default since
// 5.1, asked for all the same) on a loop device, for the test's length.
func xfs(t testing.TB, size string) string {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "mkfs.xfs", "mount", "umount", "truncate")
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "xfs.img"), filepath.Join(dir, "mnt")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	os.Mkdir(mnt, 0o700)
	run("truncate", "-s", size, img)
	run("mkfs.xfs", "-q", "-m", "reflink=1", img)
	run("mount", "-o", "loop", img, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	return mnt
}

// tree writes n files of size bytes each under dir/src.
func tree(t testing.TB, dir string, n, size int) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	body := bytes.Repeat([]byte("kndl"), size/4)
	for i := range n {
		p := filepath.Join(src, fmt.Sprintf("d%02d", i%16), fmt.Sprintf("f%04d", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// TestOnAFileSystemWithReflinksEveryFileIsAReflink: on XFS every regular
// file of the copy is a reflink, with the source's bytes, and the Result
// says so.
func TestOnAFileSystemWithReflinksEveryFileIsAReflink(t *testing.T) {
	mnt := xfs(t, "320M")
	src := tree(t, mnt, 40, 64<<10)
	res, err := Copy(context.Background(), src, filepath.Join(mnt, "fork"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reflinked != 40 || res.Copied != 0 || !strings.HasPrefix(res.String(), "40 files by reflink") {
		t.Fatalf("got %+v (%q), want 40 files by reflink and none copied", res, res)
	}
	a, _ := os.ReadFile(filepath.Join(src, "d03", "f0003"))
	b, err := os.ReadFile(filepath.Join(mnt, "fork", "d03", "f0003"))
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("a reflinked file: got %d bytes (%v), want the source's %d", len(b), err, len(a))
	}
}

// BenchmarkAForkCopyBesideAPlainCopy copies one tree (2,000 files of
// 64 KiB and 4 of 64 MiB, 381 MiB) on XFS by Copy (reflinks) and by
// cp -a --reflink=never, one after the other in each round, each followed
// by a sync, and reports both times and their ratio, naming the file
// system as the mount table and xfs_info give it.
func BenchmarkAForkCopyBesideAPlainCopy(b *testing.B) {
	mnt := xfs(b, "2G")
	src := tree(b, mnt, 2000, 64<<10)
	big := bytes.Repeat([]byte("kndl"), 16<<20)
	for i := range 4 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("big%d", i)), big, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	exec.Command("sync").Run()
	var fork, plain time.Duration
	b.ResetTimer()
	for i := range b.N {
		dst := filepath.Join(mnt, fmt.Sprintf("fork%d", i))
		start := time.Now()
		res, err := Copy(context.Background(), src, dst, Options{})
		exec.Command("sync").Run() // each timed to its data on disk
		fork += time.Since(start)
		if err != nil || res.Copied > 0 {
			b.Fatalf("got %+v, %v, want every file a reflink", res, err)
		}
		start = time.Now()
		out, err := exec.Command("sh", "-c", "cp -a --reflink=never "+src+" "+dst+"-plain && sync").CombinedOutput()
		plain += time.Since(start)
		if err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
		b.StopTimer()
		os.RemoveAll(dst)
		os.RemoveAll(dst + "-plain")
		b.StartTimer()
	}
	fsys, _ := exec.Command("findmnt", "-n", "-o", "FSTYPE,SOURCE,OPTIONS", mnt).Output()
	info, _ := exec.Command("xfs_info", mnt).Output()
	b.Logf("on %s (%s), %d rounds: fork %v, plain copy %v a round, fork/plain %.3f", strings.TrimSpace(string(fsys)),
		regexp.MustCompile(`reflink=\d`).Find(info), b.N, fork/time.Duration(b.N), plain/time.Duration(b.N), float64(fork)/float64(plain))
	b.ReportMetric(float64(fork.Milliseconds())/float64(b.N), "fork-ms/op")
	b.ReportMetric(float64(plain.Milliseconds())/float64(b.N), "plain-ms/op")
	b.ReportMetric(float64(fork)/float64(plain), "fork/plain")
}
