package testkit

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"

	"kndl.dev/kndl/internal/testenv"
)

// ImageRepo is the repository and tag ImageRegistry serves the test image as.
const ImageRepo = "kndl/test:" + Suite

// ImageRegistry starts go-containerregistry's in-process registry on
// loopback for the test's lifetime, pushes the test image to it (Rootfs as
// one gzip layer, in an index with a linux/amd64 entry, as Docker Hub serves
// debian:bookworm) and returns its reference, such as
// 127.0.0.1:40123/kndl/test:bookworm. Pulling it goes through the same
// client code as pulling from any registry.
//
// The layer is built once per machine (about 10 s) and cached beside the
// rootfs. The registry serves it straight from that file, so each call
// pushes only the config and manifests: a few milliseconds.
func ImageRegistry(t testing.TB) string {
	t.Helper()
	rootfs := Rootfs(t)
	testenv.RequireCommand(t, "tar")
	lf, err := buildLayer(rootfs, func(line string) { t.Log(line) })
	if err != nil {
		t.Fatalf("build test image layer: %v", err)
	}
	reg := registry.New(
		registry.Logger(log.New(io.Discard, "", 0)),
		registry.WithBlobHandler(layerBlobs{registry.NewInMemoryBlobHandler(), lf}),
	)
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/" + ImageRepo
	if err := pushImage(ref, lf); err != nil {
		t.Fatalf("push the test image to %s: %v", ref, err)
	}
	return ref
}

func pushImage(ref string, lf *layerFile) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	layer, err := partial.CompressedToLayer(lf)
	if err != nil {
		return err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Cmd: []string{"bash"},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	index := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add:        img,
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}},
	})
	return remote.WriteIndex(r, index, remote.WithContext(context.Background()))
}

// layerFile is the test image's one layer, a gzip tarball of the rootfs,
// with the digests a registry needs so that nothing rereads it to hash it.
type layerFile struct {
	path  string
	Blob  v1.Hash `json:"digest"` // of the gzip stream
	Diff  v1.Hash `json:"diffID"` // of the tar inside
	Bytes int64   `json:"size"`
}

var (
	_ partial.CompressedLayer = (*layerFile)(nil)
	_ partial.WithDiffID      = (*layerFile)(nil)
)

func (l *layerFile) Digest() (v1.Hash, error)            { return l.Blob, nil }
func (l *layerFile) DiffID() (v1.Hash, error)            { return l.Diff, nil }
func (l *layerFile) Size() (int64, error)                { return l.Bytes, nil }
func (l *layerFile) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *layerFile) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

// buildLayer returns the cached layer for rootfs, building it if needed:
// GNU tar with numeric owners, xattrs and a fixed order, so the same rootfs
// always gives the same digest.
func buildLayer(rootfs string, progress func(string)) (*layerFile, error) {
	fi, err := os.Stat(rootfs)
	if err != nil {
		return nil, err
	}
	// The rootfs directory is only ever renamed into place whole, so its
	// name and modification time identify one build of it.
	key := fmt.Sprintf("%s-%x", filepath.Base(rootfs), fi.ModTime().UnixNano())
	cache := filepath.Join(CacheDir(), "image")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	lf := &layerFile{path: filepath.Join(cache, key+".tar.gz")}
	meta := filepath.Join(cache, key+".json")
	if b, err := os.ReadFile(meta); err == nil {
		if err := json.Unmarshal(b, lf); err != nil {
			return nil, fmt.Errorf("%s: %w", meta, err)
		}
		return lf, nil
	}

	progress(fmt.Sprintf("building the test image layer from %s (about 10 s, cached in %s)", rootfs, cache))
	f, err := os.Create(lf.path + ".tmp")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	blob, diff := sha256.New(), sha256.New()
	size := &countWriter{}
	zw := gzip.NewWriter(io.MultiWriter(f, blob, size))
	cmd := exec.Command("tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "--sort=name",
		"--format=pax", "--pax-option=delete=atime,delete=ctime", "-C", rootfs, "-c", ".")
	cmd.Stdout = io.MultiWriter(zw, diff)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("tar %s: %v: %s", rootfs, err, stderr.String())
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	lf.Blob = v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", blob.Sum(nil))}
	lf.Diff = v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", diff.Sum(nil))}
	lf.Bytes = size.n
	if err := os.Rename(f.Name(), lf.path); err != nil {
		return nil, err
	}
	b, err := json.Marshal(lf)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(meta+".tmp", b, 0o644); err != nil {
		return nil, err
	}
	return lf, os.Rename(meta+".tmp", meta)
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(b []byte) (int, error) {
	w.n += int64(len(b))
	return len(b), nil
}

// layerBlobs is the registry's blob store: the cached layer file, and
// memory for whatever is pushed.
type layerBlobs struct {
	registry.BlobHandler
	layer *layerFile
}

func (b layerBlobs) Stat(ctx context.Context, repo string, h v1.Hash) (int64, error) {
	if h == b.layer.Blob {
		return b.layer.Bytes, nil
	}
	return b.BlobHandler.(registry.BlobStatHandler).Stat(ctx, repo, h)
}

func (b layerBlobs) Get(ctx context.Context, repo string, h v1.Hash) (io.ReadCloser, error) {
	if h == b.layer.Blob {
		return b.layer.Compressed()
	}
	return b.BlobHandler.Get(ctx, repo, h)
}

func (b layerBlobs) Put(ctx context.Context, repo string, h v1.Hash, rc io.ReadCloser) error {
	return b.BlobHandler.(registry.BlobPutHandler).Put(ctx, repo, h, rc)
}
