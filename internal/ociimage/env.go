package ociimage

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"kndl.dev/kndl/internal/errdefs"
)

// Env reads the environment an image's config sets (NAME=value), for
// linux/amd64 as Pull takes it, through the same registry settings,
// fetching the manifest and config alone.
func Env(ctx context.Context, ref string, opts Options) ([]string, error) {
	var nameOpts []name.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nameOpts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (want a reference such as debian:bookworm)", errdefs.ErrInvalid, err)
	}
	img, err := remote.Image(r, append(opts.remote(ctx), remote.WithPlatform(platform))...)
	if err != nil {
		return nil, classify(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, classify(err)
	}
	return cf.Config.Env, nil
}
