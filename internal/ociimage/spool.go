package ociimage

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Layers must be applied in order (a later one's whiteouts remove an earlier
// one's files), but nothing orders their downloads: while the first layer
// is unpacked as it arrives, the others are fetched at once, spoolSlots at a
// time as container engines do, each into a file beside the tree, checked
// against its digest as it ends.
const spoolSlots = 3

// spool is a later layer's download.
type spool struct {
	path string
	done chan struct{}
	err  error
}

// spoolLayers starts the downloads of layers into dir. Each ends, at the
// latest, one read after ctx is done.
func spoolLayers(ctx context.Context, layers []v1.Layer, dir string, m *meter) []*spool {
	slots := make(chan struct{}, spoolSlots)
	spools := make([]*spool, len(layers))
	for i, l := range layers {
		s := &spool{path: filepath.Join(dir, fmt.Sprintf("layer-%d", i+2)), done: make(chan struct{})}
		spools[i] = s
		go func() {
			defer close(s.done)
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				s.err = s.fetch(ctx, l, m)
			case <-ctx.Done():
				s.err = ctx.Err()
			}
		}()
	}
	return spools
}

func (s *spool) fetch(ctx context.Context, l v1.Layer, m *meter) error {
	rc, err := l.Compressed()
	if err != nil {
		return classify(err)
	}
	defer rc.Close()
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// The registry client checks the digest at the blob's end.
	if _, err := io.Copy(f, &counter{r: rc, m: m, ctx: ctx}); err != nil {
		f.Close()
		return classify(err)
	}
	return f.Close()
}

// open waits for the download and opens what it fetched.
func (s *spool) open() (io.ReadCloser, error) {
	<-s.done
	if s.err != nil {
		return nil, s.err
	}
	return os.Open(s.path)
}
