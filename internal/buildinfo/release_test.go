package buildinfo

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestReleaseIsReproducible: scripts/release run twice over the commit
// checked out, from two clones at different paths and at different
// times, gives the same bytes and SHA256SUMS; the binary is static,
// holds neither clone's path (-trimpath), and its kndl version names the
// commit and the commit's time, not the build's. It builds linux/amd64
// alone: arm64 cross-compiles every package again, minutes on two cores.
// Both builds share the Go build cache (the action ids of a -trimpath
// build do not hold the source's path), so what differs between them is
// the path and the clock; a cold cache makes the first one slow (about
// ten minutes on a busy two-core machine), the second one a link.
func TestReleaseIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short: builds kndl twice")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("runs the linux/amd64 release it builds; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	commit := git(root, "rev-parse", "HEAD")
	when, err := time.Parse(time.RFC3339, git(root, "log", "-1", "--format=%cI", commit))
	if err != nil {
		t.Fatal(err)
	}
	release := func(name string) (dir, src string) {
		t.Helper()
		top := t.TempDir()
		src, dir = filepath.Join(top, "src-"+name), filepath.Join(top, "out")
		git(root, "clone", "--quiet", "--shared", "--no-checkout", root, src)
		git(src, "checkout", "--quiet", "--detach", commit)
		cmd := exec.Command(filepath.Join(src, "scripts", "release"), dir)
		cmd.Env = append(os.Environ(), "ARCHES=amd64", "VERSION=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/release in %s: %v\n%s", src, err, out)
		}
		return dir, src
	}
	a, srcA := release("a")
	b, srcB := release("second")
	for _, f := range []string{"kndl-linux-amd64", "SHA256SUMS"} {
		x, errA := os.ReadFile(filepath.Join(a, f))
		y, errB := os.ReadFile(filepath.Join(b, f))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", f, errA, errB)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s: the two builds differ (%d and %d bytes), want the same bytes", f, len(x), len(y))
		}
	}
	bin := filepath.Join(a, "kndl-linux-amd64")
	data, _ := os.ReadFile(bin)
	for _, src := range []string{srcA, srcB} {
		if bytes.Contains(data, []byte(src)) {
			t.Errorf("the binary holds the path of its source, %s: want -trimpath", src)
		}
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a dynamic loader (PT_INTERP): want a static one (CGO_ENABLED=0)")
		}
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("kndl version: %v", err)
	}
	var v struct{ Commit, Date string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if want := when.UTC().Format(time.RFC3339); v.Commit != commit || v.Date != want {
		t.Errorf("kndl version: got commit %s of %s, want %s of %s (the commit's time)", v.Commit, v.Date, commit, want)
	}
}
