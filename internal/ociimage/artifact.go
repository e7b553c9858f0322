package ociimage

import (
	"context"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"kndl.dev/kndl/internal/errdefs"
)

// Artifact fetches the one layer of the OCI artifact ref, such as a Dev
// Container Feature (containers.dev, Features distribution: a manifest
// with a single tar layer), through the same registry settings as Pull.
// It returns the manifest's digest and the layer's bytes as stored,
// refusing a layer over max bytes (ErrTooLarge) or an artifact of other
// than one layer (ErrInvalid).
func Artifact(ctx context.Context, ref string, max int64, opts Options) (digest string, layer []byte, err error) {
	var nameOpts []name.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nameOpts...)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v (want a reference such as ghcr.io/devcontainers/features/go:1)", errdefs.ErrInvalid, err)
	}
	img, err := remote.Image(r, opts.remote(ctx)...)
	if err != nil {
		return "", nil, classify(err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", nil, classify(err)
	}
	m, err := img.Manifest()
	if err != nil {
		return "", nil, classify(err)
	}
	if len(m.Layers) != 1 {
		return "", nil, fmt.Errorf("%w: %s has %d layers; an artifact such as a Feature has one", errdefs.ErrInvalid, ref, len(m.Layers))
	}
	if m.Layers[0].Size > max {
		return "", nil, fmt.Errorf("%w: %s's layer is %d bytes; at most %d", errdefs.ErrTooLarge, ref, m.Layers[0].Size, max)
	}
	l, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		return "", nil, classify(err)
	}
	// Compressed is the blob as stored, checked against its digest as it
	// is read: a Feature's layer is a plain tar, not gzip.
	rc, err := l.Compressed()
	if err != nil {
		return "", nil, classify(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return "", nil, classify(err)
	}
	if int64(len(b)) > max {
		return "", nil, fmt.Errorf("%w: %s's layer is over %d bytes", errdefs.ErrTooLarge, ref, max)
	}
	return d.String(), b, nil
}
