package claude

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/testenv"
)

// registry is a fake npm registry serving one version of both packages.
// Unless made with newUnpinnedRegistry, its tarball is the one pinned
// while the test runs.
type registry struct {
	*httptest.Server
	tarball   []byte
	serve     []byte        // the bytes the download sends; default tarball
	integrity string        // what the metadata says; default the tarball's
	name      string        // the metadata's name; default the package asked for
	cut       int           // if > 0, the tarball download breaks after this many bytes
	hold      chan struct{} // if set, the tarball download waits for it
	downloads atomic.Int32
}

func sri(b []byte) string {
	sum := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

// tarball builds an npm tarball holding package/claude as a shell script.
func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

var fakeClaude = map[string]string{
	"package/package.json": `{"name":"@anthropic-ai/claude-code-linux-x64"}`,
	"package/claude":       "#!/bin/sh\necho '" + Version + " (Claude Code)'\n",
	"package/README.md":    "readme",
}

func newRegistry(t *testing.T, files map[string]string) *registry {
	r := newUnpinnedRegistry(t, files)
	was := pinned
	pinned = map[Variant]string{Glibc: sri(r.tarball), Musl: sri(r.tarball)}
	t.Cleanup(func() { pinned = was })
	return r
}

// newUnpinnedRegistry is a fake registry whose tarball is not the pinned
// one: the pins stay the real builds'.
func newUnpinnedRegistry(t *testing.T, files map[string]string) *registry {
	r := &registry{tarball: tarball(t, files)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		pkg, ok := strings.CutSuffix(strings.TrimPrefix(req.URL.Path, "/"), "/"+Version)
		switch {
		case ok && (pkg == Glibc.Package() || pkg == Musl.Package()):
			if !strings.Contains(req.URL.EscapedPath(), "%2f") {
				http.Error(w, "scoped names come as @scope%2fname", http.StatusBadRequest)
				return
			}
			m := meta{Name: pkg, Version: Version}
			if r.name != "" {
				m.Name = r.name
			}
			m.Dist.Integrity = sri(r.tarball)
			if r.integrity != "" {
				m.Dist.Integrity = r.integrity
			}
			m.Dist.Tarball = r.URL + "/tarballs/" + strings.ReplaceAll(pkg, "/", "_") + ".tgz"
			json.NewEncoder(w).Encode(m)
		case strings.HasPrefix(req.URL.Path, "/tarballs/"):
			r.downloads.Add(1)
			if r.hold != nil {
				<-r.hold
			}
			body := r.tarball
			if r.serve != nil {
				body = r.serve
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			if r.cut > 0 {
				body = body[:r.cut]
			}
			w.Write(body)
		default:
			http.NotFound(w, req)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func TestInstall(t *testing.T) {
	reg := newRegistry(t, fakeClaude)
	dir := t.TempDir()
	var lines []string
	opts := InstallOptions{Registry: reg.URL + "/", Progress: func(s string) { lines = append(lines, s) }}
	b, err := Install(context.Background(), dir, Glibc, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := Binary{Dir: filepath.Join(dir, Version, "glibc"), Path: filepath.Join(dir, Version, "glibc", "claude"),
		Version: Version, Variant: Glibc, Integrity: sri(reg.tarball)}
	if b != want {
		t.Errorf("got %+v, want %+v", b, want)
	}
	out, err := exec.Command(b.Path, "--version").Output()
	if err != nil || string(out) != Version+" (Claude Code)\n" {
		t.Errorf("installed claude --version: got %q (%v)", out, err)
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "downloading "+Glibc.Package()+"@"+Version) || !strings.HasPrefix(lines[1], "installed ") {
		t.Errorf("progress: got %q, want a downloading line and an installed line", lines)
	}
	entries, _ := os.ReadDir(filepath.Dir(b.Dir))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".glibc.lock glibc" {
		t.Errorf("version dir holds %q, want only the lock and the install", names)
	}

	// Already there: no download, same answer, even offline.
	reg.Close()
	again, err := Install(context.Background(), dir, Glibc, opts)
	if err != nil || again != want {
		t.Errorf("second install: got %+v, %v, want %+v", again, err, want)
	}
	if n := reg.downloads.Load(); n != 1 {
		t.Errorf("downloads: got %d, want 1", n)
	}
}

func TestInstallMusl(t *testing.T) {
	reg := newRegistry(t, fakeClaude)
	b, err := Install(context.Background(), t.TempDir(), Musl, InstallOptions{Registry: reg.URL})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(b.Dir) != "musl" || b.Variant != Musl {
		t.Errorf("got %+v, want the musl install", b)
	}
}

func TestInstallConcurrentCallersDownloadOnce(t *testing.T) {
	reg := newRegistry(t, fakeClaude)
	reg.hold = make(chan struct{})
	dir := t.TempDir()
	const callers = 4
	var wg sync.WaitGroup
	results := make([]Binary, callers)
	errs := make([]error, callers)
	waiting := make(chan string, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Install(context.Background(), dir, Glibc, InstallOptions{Registry: reg.URL, Progress: func(s string) {
				if strings.HasPrefix(s, "waiting") {
					waiting <- s
				}
			}})
		}()
	}
	// Every caller but the one downloading says it waits.
	for range callers - 1 {
		<-waiting
	}
	close(reg.hold)
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || results[i] != results[0] {
			t.Errorf("caller %d: got %+v, %v, want %+v", i, results[i], errs[i], results[0])
		}
	}
	if n := reg.downloads.Load(); n != 1 {
		t.Errorf("downloads: got %d, want 1", n)
	}
}

func TestInstallWaitEndsWithContext(t *testing.T) {
	reg := newRegistry(t, fakeClaude)
	reg.hold = make(chan struct{})
	defer close(reg.hold)
	dir := t.TempDir()
	go Install(context.Background(), dir, Glibc, InstallOptions{Registry: reg.URL})
	testenv.Eventually(t, testenv.WaitShort, "the first Install downloads", func() bool { return reg.downloads.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := Install(ctx, dir, Glibc, InstallOptions{Registry: reg.URL, Progress: func(s string) {
			if strings.HasPrefix(s, "waiting") {
				cancel()
			}
		}})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Install did not end with its context")
	}
}

// notInstalled checks that dir holds nothing that looks installed and no
// temporary directory.
func notInstalled(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(dir, Version))
	for _, e := range entries {
		if e.Name() != ".glibc.lock" {
			t.Errorf("left behind %s, want nothing but the lock file", e.Name())
		}
	}
}

func TestInstallRefuses(t *testing.T) {
	other := tarball(t, map[string]string{"package/claude": "#!/bin/sh\necho tampered\n"})
	tests := []struct {
		name  string
		edit  func(*registry)
		files map[string]string
		want  []string
	}{
		{"metadata naming other bytes", func(r *registry) { r.integrity = sri(other) }, fakeClaude,
			[]string{"install " + Glibc.Package() + "@" + Version + ": the registry offers a tarball with integrity " + sri(other) + ", but kndl pins ", "nothing installed"}},
		{"other bytes under the pinned integrity", func(r *registry) { r.serve = other }, fakeClaude,
			[]string{"integrity mismatch: kndl pins ", "the download is " + sri(other), "nothing installed"}},
		{"integrity not sha512", func(r *registry) { r.integrity = "sha1-AAAA" }, fakeClaude, []string{"no sha512 digest"}},
		{"metadata for another package", func(r *registry) { r.name = "left-pad" }, fakeClaude, []string{"answered left-pad@" + Version}},
		{"download cut short", func(r *registry) { r.cut = 100 }, fakeClaude, []string{"unpack"}},
		{"no binary in the tarball", nil, map[string]string{"package/README.md": "x"}, []string{"no package/claude in the tarball"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := newRegistry(t, tt.files)
			if tt.edit != nil {
				tt.edit(reg)
			}
			dir := t.TempDir()
			_, err := Install(context.Background(), dir, Glibc, InstallOptions{Registry: reg.URL})
			if err == nil {
				t.Fatal("installed, want an error")
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to say %q", err, w)
				}
			}
			notInstalled(t, dir)
		})
	}
}

// TestInstallTakesOnlyThePinnedBytes: a registry serving a build whose
// metadata matches its tarball, but not the integrity pinned beside
// Version, installs nothing, for either build; and an install made from
// other bytes (before the pin, trusting the registry) is made again.
func TestInstallTakesOnlyThePinnedBytes(t *testing.T) {
	reg := newUnpinnedRegistry(t, fakeClaude)
	for _, v := range []Variant{Glibc, Musl} {
		dir := t.TempDir()
		_, err := Install(context.Background(), dir, v, InstallOptions{Registry: reg.URL})
		if err == nil || !strings.Contains(err.Error(), "kndl pins "+pinned[v]) {
			t.Errorf("%s from a registry with other bytes: %v, want a refusal naming the pin", v, err)
		}
		if entries, _ := os.ReadDir(filepath.Join(dir, Version)); len(entries) != 1 {
			t.Errorf("%s: left %d entries, want only the lock file", v, len(entries))
		}
	}
	if n := reg.downloads.Load(); n != 0 {
		t.Errorf("%d tarballs downloaded, want none: the metadata already says they are not the pinned ones", n)
	}

	dir := t.TempDir()
	if _, err := Install(context.Background(), dir, Glibc, InstallOptions{Registry: reg.URL}); err == nil {
		t.Fatal("installed unpinned bytes")
	}
	pinnedReg := newRegistry(t, fakeClaude)
	b, err := Install(context.Background(), dir, Glibc, InstallOptions{Registry: pinnedReg.URL})
	if err != nil {
		t.Fatal(err)
	}
	rec := record{Package: Glibc.Package(), Version: Version, Integrity: sri([]byte("other bytes")), Size: int64(len(fakeClaude["package/claude"]))}
	data, _ := json.Marshal(rec)
	os.WriteFile(filepath.Join(b.Dir, recordName), data, 0o644)
	if _, err := Install(context.Background(), dir, Glibc, InstallOptions{Registry: pinnedReg.URL}); err != nil {
		t.Fatal(err)
	}
	if n := pinnedReg.downloads.Load(); n != 2 {
		t.Errorf("downloads: %d, want 2 (the install from other bytes made again)", n)
	}
}

func TestInstallUnknownVersionOrVariant(t *testing.T) {
	reg := httptest.NewServer(http.NotFoundHandler())
	defer reg.Close()
	_, err := Install(context.Background(), t.TempDir(), Glibc, InstallOptions{Registry: reg.URL})
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), Version) {
		t.Errorf("got %v, want ErrNotFound naming the version", err)
	}
	_, err = Install(context.Background(), t.TempDir(), Variant("arm"), InstallOptions{Registry: reg.URL})
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("got %v, want ErrInvalid", err)
	}
}

// A crash leaves a temporary directory, or an install dir without its
// record: neither counts as installed, and the next Install replaces them.
func TestInstallRecoversFromACrash(t *testing.T) {
	reg := newRegistry(t, fakeClaude)
	dir := t.TempDir()
	tmp := filepath.Join(dir, Version, ".glibc.tmp-123")
	os.MkdirAll(tmp, 0o755)
	os.WriteFile(filepath.Join(tmp, "claude"), []byte("half"), 0o755)
	target := filepath.Join(dir, Version, "glibc")
	os.MkdirAll(target, 0o755)
	os.WriteFile(filepath.Join(target, "claude"), []byte("#!/bin/sh\necho old\n"), 0o755)

	b, err := Install(context.Background(), dir, Glibc, InstallOptions{Registry: reg.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("stale temporary directory still there: %v", err)
	}
	if out, _ := exec.Command(b.Path).Output(); !strings.Contains(string(out), "Claude Code") {
		t.Errorf("got %q from the binary, want the downloaded one", out)
	}

	// A binary changed in size after install is not taken as installed.
	os.WriteFile(b.Path, []byte("truncated"), 0o755)
	if _, err := Install(context.Background(), dir, Glibc, InstallOptions{Registry: reg.URL}); err != nil {
		t.Fatal(err)
	}
	if n := reg.downloads.Load(); n != 2 {
		t.Errorf("downloads: got %d, want 2 (the damaged install replaced)", n)
	}
}

func TestMeterReportsAtMostOnceASecond(t *testing.T) {
	now := time.Unix(0, 0)
	var lines []string
	m := &meter{label: "p@1", total: 10_000_000, report: func(s string) { lines = append(lines, s) }, now: func() time.Time { return now }}
	m.start()
	for range 50 { // 5 s in steps of 100 ms, 200 kB each
		now = now.Add(100 * time.Millisecond)
		m.Write(make([]byte, 200_000))
	}
	want := []string{"downloading p@1 (10.0 MB)", "downloading p@1: 2.0 MB of 10.0 MB", "downloading p@1: 4.0 MB of 10.0 MB",
		"downloading p@1: 6.0 MB of 10.0 MB", "downloading p@1: 8.0 MB of 10.0 MB", "downloading p@1: 10.0 MB of 10.0 MB"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestSHA512SRI(t *testing.T) {
	good := sri([]byte("x"))
	tests := []struct {
		in string
		ok bool
	}{
		{good, true},
		{"sha1-abc " + good, true},
		{good + "?opt", true},
		{"sha256-" + base64.StdEncoding.EncodeToString(make([]byte, 32)), false},
		{"sha512-" + base64.StdEncoding.EncodeToString(make([]byte, 32)), false},
		{"sha512-***", false},
		{"", false},
	}
	for _, tt := range tests {
		if _, err := sha512SRI(tt.in); (err == nil) != tt.ok {
			t.Errorf("sha512SRI(%q): got %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

// The pinned version must exist for both variants, with the pinned
// integrity.
func TestRealRegistryHasBothVariants(t *testing.T) {
	for _, v := range []Variant{Glibc, Musl} {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitMedium)
		var m meta
		err := getJSON(ctx, http.DefaultClient, metadataURL(DefaultRegistry, v.Package(), Version), &m)
		cancel()
		var uerr *url.Error
		if errors.As(err, &uerr) {
			testenv.Lack(t, "the npm registry ("+err.Error()+")")
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != v.Package() || m.Version != Version || m.Dist.Integrity != pinned[v] {
			t.Errorf("%s: got %+v, want %s@%s with the pinned integrity %s", v, m, v.Package(), Version, pinned[v])
		}
	}
}
