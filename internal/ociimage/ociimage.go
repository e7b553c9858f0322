// Package ociimage pulls container images from an OCI or Docker registry and
// unpacks them into read-only base directories, the bottom layer of every
// Sandbox's root filesystem. Only the Runner imports it.
package ociimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/outbound"
)

// platform is the only one Sandboxes run.
var platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// Options tune a Pull. The zero value pulls over HTTPS (plain HTTP for
// loopback and private addresses) with no credentials, through an
// outbound.Dialer that opens nothing its table refuses.
type Options struct {
	// Insecure allows plain HTTP to any registry, not just local ones.
	Insecure bool
	// Keychain finds registry credentials; nil means none
	// (authn.Anonymous). The host's own, authn.DefaultKeychain
	// (~/.docker/config.json and its credential helpers), is the Runner
	// owner's to give (RUNNER_REGISTRY_AUTH=host): whoever names an image
	// could otherwise read any the host can.
	Keychain authn.Keychain
	// Transport reaches the registries, on every redirect too; nil is an
	// outbound.Dialer's that opens nothing.
	Transport http.RoundTripper
	// Progress, if set, is called while layers download, at most about once
	// a second, and once when they are all done.
	Progress func(Progress)
}

// Progress reports a download in compressed bytes of the whole image.
type Progress struct {
	Ref           string
	Layer, Layers int // the layer being unpacked, from 1
	Done, Total   int64
	// Took is set in the last report: the whole pull, from the first
	// layer asked for to the tree on disk.
	Took time.Duration
}

func (p Progress) String() string {
	if p.Took > 0 {
		return fmt.Sprintf("pulled %s: %.1f MB, unpacked in %v", p.Ref, float64(p.Total)/1e6, p.Took.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("pulling %s: %.1f/%.1f MB", p.Ref, float64(p.Done)/1e6, float64(p.Total)/1e6)
}

// Image is a pulled image.
type Image struct {
	// Digest is the manifest digest of the linux/amd64 image ("sha256:…"):
	// the image's identity, whatever tag named it.
	Digest string
	// Rootfs is the unpacked root filesystem. Nothing may write to it.
	Rootfs string
	Config Config
}

// Config is what Builds use from the image's configuration.
type Config struct {
	Env        []string
	WorkingDir string
	User       string
	Entrypoint []string
	Cmd        []string
}

// Pull resolves ref to a digest and unpacks that image into
// dir/<algorithm>-<hex>/rootfs, unless it is there already: an image already
// pulled costs one manifest request, or none when ref names it by digest.
// Two Pulls of one image, in one process or several, download it once; a
// Pull that fails leaves no image directory behind.
//
// Run as root, Pull keeps the layers' owners and file capabilities; as
// anyone else files belong to the caller. Errors wrap errdefs classes:
// ErrInvalid for a malformed ref or layer, ErrNotFound, ErrUnauthorized,
// ErrUnavailable.
func Pull(ctx context.Context, ref, dir string, opts Options) (Image, error) {
	img, err := pull(ctx, ref, dir, opts)
	if err != nil {
		return Image{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	return img, nil
}

func pull(ctx context.Context, ref, dir string, opts Options) (Image, error) {
	var nameOpts []name.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nameOpts...)
	if err != nil {
		return Image{}, fmt.Errorf("%w: %v (want a reference such as debian:bookworm or ghcr.io/org/img@sha256:…)", errdefs.ErrInvalid, err)
	}
	if d, ok := r.(name.Digest); ok {
		if img, err := open(dir, d.DigestStr()); err == nil {
			return img, nil
		}
	}
	ropts := append(opts.remote(ctx), remote.WithPlatform(platform))
	desc, err := remote.Get(r, ropts...)
	if err != nil {
		return Image{}, classify(err)
	}

	// Find the digest before fetching anything else, so an image already
	// pulled costs nothing more.
	digest := desc.Digest
	var index v1.ImageIndex
	if desc.MediaType.IsIndex() {
		if index, err = desc.ImageIndex(); err != nil {
			return Image{}, classify(err)
		}
		if digest, err = pick(index); err != nil {
			return Image{}, err
		}
	}
	if img, err := open(dir, digest.String()); err == nil {
		return img, nil
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Image{}, err
	}
	final := filepath.Join(dir, digest.Algorithm+"-"+digest.Hex)
	unlock, err := lock(ctx, final+".lock")
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	if img, err := open(dir, digest.String()); err == nil {
		return img, nil // another Pull finished it while we waited
	}

	var image v1.Image
	if index != nil {
		image, err = index.Image(digest)
	} else {
		image, err = desc.Image()
	}
	if err != nil {
		return Image{}, classify(err)
	}
	tmp := final + ".tmp"
	if err := os.RemoveAll(tmp); err != nil { // left by a crash
		return Image{}, err
	}
	if err := unpackImage(ctx, ref, image, tmp, opts.Progress); err != nil {
		os.RemoveAll(tmp)
		return Image{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		return Image{}, err
	}
	return open(dir, digest.String())
}

// remote is how opts reach a registry: its credentials, if any, and its
// transport, an outbound.Dialer's that opens nothing if none.
func (opts Options) remote(ctx context.Context) []remote.Option {
	auth := remote.WithAuth(authn.Anonymous)
	if opts.Keychain != nil {
		auth = remote.WithAuthFromKeychain(opts.Keychain)
	}
	tr := opts.Transport
	if tr == nil {
		tr = (&outbound.Dialer{}).Transport()
	}
	return []remote.Option{remote.WithContext(ctx), auth, remote.WithTransport(tr)}
}

// unpackImage writes image's config and root filesystem into tmp and makes
// them durable, so the rename that publishes them never publishes a torn tree.
func unpackImage(ctx context.Context, ref string, image v1.Image, tmp string, progress func(Progress)) error {
	raw, err := image.RawConfigFile()
	if err != nil {
		return classify(err)
	}
	if _, err := v1.ParseConfigFile(bytes.NewReader(raw)); err != nil {
		return fmt.Errorf("%w: image config: %v", errdefs.ErrInvalid, err)
	}
	layers, err := image.Layers()
	if err != nil {
		return classify(err)
	}
	meter := &meter{fn: progress, p: Progress{Ref: ref, Layers: len(layers)}, start: time.Now(), last: time.Now()}
	for _, l := range layers {
		size, err := l.Size()
		if err != nil {
			return classify(err)
		}
		meter.p.Total += size
	}
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	later := spoolLayers(ctx, layers[1:], tmp, meter)
	defer func() {
		cancel()
		for _, s := range later {
			<-s.done
		}
	}()
	u := newUnpacker(rootfs)
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		meter.unpacking(i + 1)
		if err := u.applyLayer(i, l, later, meter); err != nil {
			digest, _ := l.Digest()
			return fmt.Errorf("layer %d of %d (%s): %w", i+1, len(layers), digest, err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), raw, 0o644); err != nil {
		return err
	}
	d, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return err
	}
	meter.done()
	return nil
}

// open returns the image pulled into dir under digest, if it is complete.
func open(dir, digest string) (Image, error) {
	h, err := v1.NewHash(digest)
	if err != nil {
		return Image{}, err
	}
	base := filepath.Join(dir, h.Algorithm+"-"+h.Hex)
	f, err := os.Open(filepath.Join(base, "config.json"))
	if err != nil {
		return Image{}, err
	}
	defer f.Close()
	cf, err := v1.ParseConfigFile(f)
	if err != nil {
		return Image{}, fmt.Errorf("%s: %w", f.Name(), err)
	}
	c := cf.Config
	return Image{
		Digest: h.String(),
		Rootfs: filepath.Join(base, "rootfs"),
		Config: Config{Env: c.Env, WorkingDir: c.WorkingDir, User: c.User, Entrypoint: c.Entrypoint, Cmd: c.Cmd},
	}, nil
}

// pick finds the image for platform in an index.
func pick(index v1.ImageIndex) (v1.Hash, error) {
	m, err := index.IndexManifest()
	if err != nil {
		return v1.Hash{}, classify(err)
	}
	var have []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			continue
		}
		if d.Platform.OS == platform.OS && d.Platform.Architecture == platform.Architecture {
			return d.Digest, nil
		}
		have = append(have, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	return v1.Hash{}, fmt.Errorf("%w: the image has no %s/%s variant (it has %s); use an image built for it",
		errdefs.ErrNotFound, platform.OS, platform.Architecture, strings.Join(have, ", "))
}

// classify gives a registry error its class and a hint at what to do.
func classify(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var refused *outbound.RefusedError
	if errors.As(err, &refused) {
		return err // errdefs.ErrForbidden, saying how to open the address
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%w: %w (the Runner pulls with no credentials: for a private image its owner sets RUNNER_REGISTRY_AUTH=host and logs in to the registry as root on its host)", errdefs.ErrUnauthorized, err)
		case http.StatusNotFound:
			return fmt.Errorf("%w: %w (check the image name and tag)", errdefs.ErrNotFound, err)
		}
	}
	return fmt.Errorf("%w: %w (check that the registry is reachable from the Runner's host)", errdefs.ErrUnavailable, err)
}

// lock takes an exclusive flock on path, waiting for ctx. Locks held by a
// process that dies are released by the kernel.
func lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// meter counts downloaded bytes, from several downloads at once, and
// reports them at most once a second.
type meter struct {
	mu          sync.Mutex
	fn          func(Progress)
	p           Progress
	start, last time.Time
}

func (m *meter) add(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.p.Done += int64(n)
	if m.fn != nil && time.Since(m.last) >= time.Second {
		m.last = time.Now()
		m.fn(m.p)
	}
}

// unpacking says which layer is being unpacked.
func (m *meter) unpacking(layer int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.p.Layer = layer
}

func (m *meter) done() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.p.Took = time.Since(m.start)
	if m.fn != nil {
		m.fn(m.p)
	}
}
