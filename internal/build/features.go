package build

import (
	"bytes"
	"context"
	"fmt"
)

// Feature is a Dev Container Feature to install (containers.dev,
// Features): its artifact by digest and its options.
type Feature struct {
	Ref string
	// Env holds its options, NAME=value, as install.sh reads them.
	Env []string
}

// featureDir is where a Feature is unpacked in the Build's Sandbox while
// its install.sh runs; it is gone before the next.
const featureDir = "/tmp/kndl-feature"

// feature unpacks f's layer in the Sandbox, with the image's tar (never
// on the host: the layer is the registry's, not ours), and runs its
// install.sh as root there, as the specification does: in its folder,
// with the options and the user variables in its environment, and the
// Variables available at build.
func (s step) feature(ctx context.Context, spec Spec, f Feature) error {
	if spec.FetchFeature == nil {
		return fmt.Errorf("this Runner cannot pull Features")
	}
	layer, err := spec.FetchFeature(ctx, f.Ref)
	if err != nil {
		return err
	}
	if err := s.run(ctx, nil, "sh", "-c", "rm -rf "+featureDir+" && mkdir -p "+featureDir+" && tar -x -C "+featureDir, bytes.NewReader(layer)); err != nil {
		return fmt.Errorf("unpack it (the image needs tar): %w", err)
	}
	defer s.quiet(context.WithoutCancel(ctx), "rm", "-rf", featureDir)
	env := append(append(append([]string(nil), spec.ImageEnv...), spec.Env...), f.Env...)
	env = append(env, "_REMOTE_USER=root", "_CONTAINER_USER=root", "_REMOTE_USER_HOME=/root", "_CONTAINER_USER_HOME=/root")
	s.dir = featureDir
	if err := s.run(ctx, env, "sh", "-c", "chmod +x ./install.sh && ./install.sh"); err != nil {
		return fmt.Errorf("its install.sh failed: %w", err)
	}
	return nil
}
