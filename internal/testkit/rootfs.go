package testkit

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// Suite and Packages define the test image: Debian minbase plus what kndl
// needs in a Sandbox (bash, tmux, git) and a few tools tests drive
// (busybox for nc, httpd and wget; procps for ps; gh, which a Repo's
// Bootstrap script would install, for its hosts file).
const Suite = "bookworm"

var Packages = []string{"bash", "tmux", "git", "ca-certificates", "procps", "busybox", "gh"}

// DockerPackages are what DockerRootfs adds: Debian's Docker (dockerd,
// containerd, runc, iptables) and Compose, as a Build installs them, and a
// static busybox, a whole container image in one file.
var DockerPackages = []string{"docker.io", "docker-compose", "busybox-static"}

// CacheDir is where big test downloads are kept between runs:
// $KNDL_TEST_CACHE, or ~/.cache/kndl-test.
func CacheDir() string {
	if d := os.Getenv("KNDL_TEST_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "kndl-test")
}

// Rootfs returns a cached Debian root filesystem built with debootstrap from
// the machine's configured Debian mirror. The first call on a machine takes
// about half a minute; later ones return at once. Callers must not write to
// it.
func Rootfs(t testing.TB) string {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "debootstrap")
	dir, err := buildRootfs(Packages, func(line string) { t.Log(line) })
	if err != nil {
		t.Fatalf("build test rootfs: %v", err)
	}
	return dir
}

// DockerRootfs is Rootfs with DockerPackages, busybox-static in busybox's
// place, for tests of Docker in a Sandbox; cached beside it (about 45 s
// the first time).
func DockerRootfs(t testing.TB) string {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "debootstrap")
	pkgs := append(slices.DeleteFunc(slices.Clone(Packages), func(p string) bool { return p == "busybox" }), DockerPackages...)
	dir, err := buildRootfs(pkgs, func(line string) { t.Log(line) })
	if err != nil {
		t.Fatalf("build test rootfs with Docker: %v", err)
	}
	return dir
}

func buildRootfs(packages []string, progress func(string)) (string, error) {
	mirror := DebianMirror()
	sum := sha256.Sum256([]byte(Suite + "\x00" + strings.Join(packages, ",")))
	key := hex.EncodeToString(sum[:8])
	cache := filepath.Join(CacheDir(), "rootfs")
	dir := filepath.Join(cache, Suite+"-"+key)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	// Test binaries of several packages run at once: one builds, the others
	// wait on the lock and then find it done.
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "usr/bin/tmux")); err == nil {
		return dir, nil
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	progress(fmt.Sprintf("building the test rootfs (debootstrap %s from %s, about 30 s, cached in %s)", Suite, mirror, dir))
	cmd := exec.Command("debootstrap", "--variant=minbase",
		"--include="+strings.Join(packages, ","), Suite, tmp, mirror)
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("debootstrap: %v\n%s", err, tail(out, 2000))
	}
	// Apt's lists and caches are a third of the size and no test needs them.
	for _, g := range []string{"var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb"} {
		matches, _ := filepath.Glob(filepath.Join(tmp, g))
		for _, m := range matches {
			os.RemoveAll(m)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// DebianMirror reads the Debian mirror this machine's apt uses, so the test
// image comes from the same place as the machine's own packages.
func DebianMirror() string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range files {
		if m := mirrorFrom(f, "URIs:"); m != "" {
			return m
		}
	}
	if m := mirrorFrom("/etc/apt/sources.list", "deb"); m != "" {
		return m
	}
	return "http://deb.debian.org/debian"
}

// RequireDebianMirror is for a test whose Sandbox installs packages with
// apt (a Build with Docker on, a Bootstrap script): it lacks a host that
// reaches DebianMirror.
func RequireDebianMirror(t testing.TB) {
	t.Helper()
	m := DebianMirror()
	port := "80"
	if strings.HasPrefix(m, "https://") {
		port = "443"
	}
	h, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(m, "http://"), "https://"), "/")
	if !strings.Contains(h, ":") {
		h = net.JoinHostPort(h, port)
	}
	c, err := net.DialTimeout("tcp", h, 5*time.Second)
	if err != nil {
		testenv.Lack(t, "a host that reaches the Debian mirror "+h)
		return
	}
	c.Close()
}

// mirrorFrom returns the first URI in a deb822 .sources file (prefix
// "URIs:") or a one-line sources.list (prefix "deb") that is not the
// security archive.
func mirrorFrom(path, prefix string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != prefix {
			continue
		}
		for _, u := range fields[1:] {
			if strings.HasPrefix(u, "http") && !strings.Contains(u, "security") {
				return u
			}
		}
	}
	return ""
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
