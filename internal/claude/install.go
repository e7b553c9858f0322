package claude

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// DefaultRegistry is npm's default registry.
const DefaultRegistry = "https://registry.npmjs.org/"

// Binary is an installed build of Claude Code.
type Binary struct {
	// Dir is DIR/<version>/<variant>, what the Runner mounts read-only at
	// MountDir. It holds the executable claude and the install record.
	Dir     string
	Path    string // Dir/claude
	Version string
	Variant Variant
	// Integrity is the sha512 SRI of the tarball it came from: the pin.
	Integrity string
}

// pinned is each variant's pinned tarball integrity, the constants beside
// Version. Only this package's tests, serving tarballs of their own,
// change it.
var pinned = map[Variant]string{Glibc: glibcIntegrity, Musl: muslIntegrity}

// InstallOptions tune Install; the zero value works.
type InstallOptions struct {
	// Registry is the npm registry's URL; default DefaultRegistry.
	Registry string
	// Client makes the requests; default http.DefaultClient.
	Client *http.Client
	// Progress, if set, gets a line as the download starts, about once a
	// second while it runs, and when it is installed.
	Progress func(string)
	// Pin is the version and integrity hashes to install; the zero value
	// is the one pinned beside Version. Only moving the pin (its probe
	// and smoke test, scripts/pin-claude) installs another.
	Pin Pin
}

// Pin is a Claude Code version with the sha512 integrity of each build's
// npm tarball: what Install checks the bytes against.
type Pin struct {
	Version   string
	Integrity map[Variant]string
}

// Pinned is the pin every Sandbox runs: Version and the integrity
// constants beside it.
func Pinned() Pin {
	return Pin{Version: Version, Integrity: map[Variant]string{Glibc: pinned[Glibc], Musl: pinned[Musl]}}
}

func (o InstallOptions) pin() Pin {
	if o.Pin.Version == "" {
		return Pinned()
	}
	return o.Pin
}

// record is the install record kept beside the binary, so finding an
// install already there costs a read and a stat, not hashing 370 MB: the
// tarball's integrity was checked as it was unpacked.
type record struct {
	Package   string `json:"package"`
	Version   string `json:"version"`
	Integrity string `json:"integrity"`
	Size      int64  `json:"size"`
}

const recordName = "kndl-install.json"

// Install returns the pinned Version (or opts.Pin) of variant's build under dir,
// downloading it from the npm registry first if it is not there.
//
// The tarball is checked against the integrity pinned beside Version while
// it streams (a registry whose metadata names another is refused before
// the download), and unpacked into a hidden temporary directory renamed into place
// only once complete and checked, so a crash leaves nothing that looks
// installed. Concurrent callers, in this process or others, download once:
// the others wait on a lock file (honouring ctx) and then find it there.
func Install(ctx context.Context, dir string, variant Variant, opts InstallOptions) (Binary, error) {
	if err := variant.check(); err != nil {
		return Binary{}, err
	}
	pkg, pin := variant.Package(), opts.pin()
	version, sum := pin.Version, pin.Integrity[variant]
	b := Binary{Dir: filepath.Join(dir, version, string(variant)), Version: version, Variant: variant}
	b.Path = filepath.Join(b.Dir, "claude")
	if rec, ok := installed(b.Dir, pkg, version, sum); ok {
		b.Integrity = rec.Integrity
		return b, nil
	}
	parent := filepath.Dir(b.Dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Binary{}, fmt.Errorf("install claude code: %w", err)
	}
	unlock, err := lock(ctx, filepath.Join(parent, "."+string(variant)+".lock"), func() {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf("waiting for another download of %s@%s", pkg, version))
		}
	})
	if err != nil {
		return Binary{}, fmt.Errorf("install %s@%s: %w", pkg, version, err)
	}
	defer unlock()
	if rec, ok := installed(b.Dir, pkg, version, sum); ok {
		b.Integrity = rec.Integrity
		return b, nil
	}
	// Under the lock, anything else here is left by a crash or is broken.
	stale, _ := filepath.Glob(filepath.Join(parent, "."+string(variant)+".tmp-*"))
	for _, s := range append(stale, b.Dir) {
		if err := os.RemoveAll(s); err != nil {
			return Binary{}, fmt.Errorf("install %s@%s: %w", pkg, version, err)
		}
	}
	start := time.Now()
	rec, err := download(ctx, parent, b.Dir, pkg, version, sum, opts)
	if err != nil {
		return Binary{}, fmt.Errorf("install %s@%s: %w", pkg, version, err)
	}
	if opts.Progress != nil {
		opts.Progress(fmt.Sprintf("installed %s@%s in %s (%.1f s)", pkg, version, b.Dir, time.Since(start).Seconds()))
	}
	b.Integrity = rec.Integrity
	return b, nil
}

// installed reports whether dir holds a complete install of pkg@version
// from the tarball pin names: its record names them and the binary has the
// recorded size. One made from other bytes (before the pin, trusting a
// registry) is not.
func installed(dir, pkg, version, pin string) (record, bool) {
	var rec record
	data, err := os.ReadFile(filepath.Join(dir, recordName))
	if err != nil || json.Unmarshal(data, &rec) != nil || rec.Package != pkg || rec.Version != version || rec.Integrity != pin {
		return record{}, false
	}
	fi, err := os.Stat(filepath.Join(dir, "claude"))
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != rec.Size || fi.Mode().Perm()&0o111 == 0 {
		return record{}, false
	}
	return rec, true
}

// lock takes an exclusive flock on path, polling so that ctx can end the
// wait; waiting is called once if another holder makes it wait.
func lock(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if i == 0 {
			waiting()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// meta is the part of the registry's version document Install reads.
type meta struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Dist    struct {
		Tarball   string `json:"tarball"`
		Integrity string `json:"integrity"`
	} `json:"dist"`
}

// download fetches pkg@version's tarball, unpacks package/claude into a
// temporary directory under parent, checks the tarball against pin, and
// renames the directory to target.
func download(ctx context.Context, parent, target, pkg, version, pin string, opts InstallOptions) (record, error) {
	client := opts.client()
	m, err := metadata(ctx, client, opts.registry(), pkg, version)
	if err != nil {
		return record{}, err
	}
	want, err := sha512SRI(pin)
	if err != nil {
		return record{}, fmt.Errorf("the pinned integrity %q: %w", pin, err)
	}
	// The registry's word is only a shortcut: a registry that names other
	// bytes is refused before they are fetched, and the bytes are checked
	// against the pin all the same.
	said, err := sha512SRI(m.Dist.Integrity)
	if err != nil {
		return record{}, fmt.Errorf("registry's integrity %q: %w", m.Dist.Integrity, err)
	}
	if string(said) != string(want) {
		return record{}, fmt.Errorf("the registry offers a tarball with integrity %s, but kndl pins %s for this version; nothing installed", m.Dist.Integrity, pin)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.Dist.Tarball, nil)
	if err != nil {
		return record{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return record{}, fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return record{}, fmt.Errorf("download %s: %s", m.Dist.Tarball, resp.Status)
	}
	meter := &meter{label: pkg + "@" + version, total: resp.ContentLength, report: opts.Progress, now: time.Now}
	meter.start()
	hash := sha512.New()
	body := io.TeeReader(io.TeeReader(resp.Body, hash), meter)

	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(target)+".tmp-")
	if err != nil {
		return record{}, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	rec, err := unpack(body, filepath.Join(tmp, "claude"))
	if err != nil {
		return record{}, fmt.Errorf("unpack %s: %w", m.Dist.Tarball, err)
	}
	// The hash covers the whole tarball, past the end of the tar stream.
	if _, err := io.Copy(io.Discard, body); err != nil {
		return record{}, fmt.Errorf("download: %w", err)
	}
	if got := hash.Sum(nil); string(got) != string(want) {
		return record{}, fmt.Errorf("integrity mismatch: kndl pins %s, the download is %s; nothing installed",
			pin, "sha512-"+base64.StdEncoding.EncodeToString(got))
	}
	rec.Package, rec.Version, rec.Integrity = pkg, version, pin
	data, _ := json.MarshalIndent(rec, "", "  ")
	if err := writeFileSync(filepath.Join(tmp, recordName), data, 0o644); err != nil {
		return record{}, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return record{}, err
	}
	if err := os.Rename(tmp, target); err != nil {
		return record{}, err
	}
	ok = true
	return rec, syncDir(parent)
}

// unpack writes the tarball's package/claude to path, executable.
func unpack(r io.Reader, path string) (record, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return record{}, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return record{}, errors.New("no package/claude in the tarball")
		}
		if err != nil {
			return record{}, err
		}
		if h.Name != "package/claude" || h.Typeflag != tar.TypeReg {
			continue
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
		if err != nil {
			return record{}, err
		}
		n, err := io.Copy(f, tr)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return record{}, err
		}
		// Read the rest so the gzip trailer's checksum is checked too.
		if _, err := io.Copy(io.Discard, gz); err != nil {
			return record{}, err
		}
		return record{Size: n}, nil
	}
}

func (o InstallOptions) client() *http.Client {
	if o.Client == nil {
		return http.DefaultClient
	}
	return o.Client
}

func (o InstallOptions) registry() string {
	if o.Registry == "" {
		return DefaultRegistry
	}
	return o.Registry
}

// metadata is the registry's version document of pkg@version.
func metadata(ctx context.Context, client *http.Client, registry, pkg, version string) (meta, error) {
	var m meta
	if err := getJSON(ctx, client, metadataURL(registry, pkg, version), &m); err != nil {
		return meta{}, err
	}
	if m.Name != pkg || m.Version != version || m.Dist.Tarball == "" {
		return meta{}, fmt.Errorf("registry answered %s@%s with tarball %q, want %s@%s", m.Name, m.Version, m.Dist.Tarball, pkg, version)
	}
	return m, nil
}

// PinFromRegistry reads version's integrity for both builds from the
// registry: how a version not yet pinned is first trusted, as `npm view
// PACKAGE@VERSION dist.integrity` would. Install then checks the bytes
// against it. Use npm's own registry for this, never a mirror.
func PinFromRegistry(ctx context.Context, version string, opts InstallOptions) (Pin, error) {
	pin := Pin{Version: version, Integrity: map[Variant]string{}}
	for _, v := range []Variant{Glibc, Musl} {
		m, err := metadata(ctx, opts.client(), opts.registry(), v.Package(), version)
		if err != nil {
			return Pin{}, fmt.Errorf("pin claude code %s: %w", version, err)
		}
		if _, err := sha512SRI(m.Dist.Integrity); err != nil {
			return Pin{}, fmt.Errorf("pin claude code %s: the registry's integrity %q for %s: %w", version, m.Dist.Integrity, v.Package(), err)
		}
		pin.Integrity[v] = m.Dist.Integrity
	}
	return pin, nil
}

// metadataURL is where registry describes pkg@version. npm's own client
// asks for a scoped package as @scope%2fname.
func metadataURL(registry, pkg, version string) string {
	return strings.TrimSuffix(registry, "/") + "/" + strings.Replace(pkg, "/", "%2f", 1) + "/" + version
}

func getJSON(ctx context.Context, client *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("ask the npm registry: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("the npm registry has no %s: %w", url, errdefs.ErrNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the npm registry answered %s for %s", resp.Status, url)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("read %s: %w", url, err)
	}
	return nil
}

// sha512SRI returns the sha512 digest of a Subresource Integrity string
// such as npm's dist.integrity ("sha512-<base64>", maybe among others).
func sha512SRI(sri string) ([]byte, error) {
	for _, f := range strings.Fields(sri) {
		b64, ok := strings.CutPrefix(f, "sha512-")
		if !ok {
			continue
		}
		b64, _, _ = strings.Cut(b64, "?")
		sum, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(sum) != sha512.Size {
			return nil, fmt.Errorf("not a sha512 digest: %w", errdefs.ErrInvalid)
		}
		return sum, nil
	}
	return nil, fmt.Errorf("no sha512 digest: %w", errdefs.ErrInvalid)
}

// meter reports download progress at most once a second.
type meter struct {
	label  string
	total  int64 // -1 when unknown
	done   int64
	last   time.Time
	report func(string)
	now    func() time.Time
}

func (m *meter) start() {
	m.last = m.now()
	if m.report != nil {
		m.report(fmt.Sprintf("downloading %s (%s)", m.label, mb(m.total)))
	}
}

func (m *meter) Write(p []byte) (int, error) {
	m.done += int64(len(p))
	if m.report != nil && m.now().Sub(m.last) >= time.Second {
		m.last = m.now()
		m.report(fmt.Sprintf("downloading %s: %s of %s", m.label, mb(m.done), mb(m.total)))
	}
	return len(p), nil
}

func mb(n int64) string {
	if n < 0 {
		return "size unknown"
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

func writeFileSync(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
