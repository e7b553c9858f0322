package ociimage_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/ociimage"
)

// TestEnvReadsTheConfigAlone: the linux/amd64 image's Env, from its
// config, no layer fetched; through the outbound rules as Pull.
func TestEnvReadsTheConfigAlone(t *testing.T) {
	reg := newRegistry(t)
	ref := reg.host + "/multi:latest"
	index := platformIndex(t, map[string]v1.Image{
		"arm64": image(t, []entry{file("arch", "arm64")}),
		"amd64": image(t, []entry{file("arch", "amd64")}, []entry{file("b", "b")}),
	})
	if err := remote.WriteIndex(mustRef(t, ref), index); err != nil {
		t.Fatal(err)
	}
	reg.blobGets.Store(0)
	env, err := ociimage.Env(context.Background(), ref, ociimage.Options{Transport: loopback})
	if want := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}; err != nil || !slices.Equal(env, want) {
		t.Fatalf("got %q, %v; want %q", env, err, want)
	}
	if n := reg.blobGets.Load(); n != 1 {
		t.Errorf("got %d blobs fetched, want 1: the config, no layer", n)
	}
	if _, err := ociimage.Env(context.Background(), ref, ociimage.Options{}); !errors.Is(err, errdefs.ErrForbidden) {
		t.Errorf("through outbound rules that refuse loopback: got %v, want ErrForbidden", err)
	}
}
