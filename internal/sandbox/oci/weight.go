package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/sandbox"
)

// SetCPUWeight writes a running Sandbox's cpu.weight in its cgroup, the
// one the runtime made from CgroupsPath (crun's and runsc's alike); on
// cgroup v1 its cpu.shares, 1024 standing for 100.
func (b *OCI) SetCPUWeight(ctx context.Context, id string, weight int) error {
	if err := validID(id); err != nil {
		return err
	}
	if weight < 1 || weight > 10000 {
		return fmt.Errorf("cpu weight %d: want 1 to 10000: %w", weight, errdefs.ErrInvalid)
	}
	if !b.cgroups.cpu {
		return fmt.Errorf("cpu weight: this host has no cpu cgroup controller: %w", sandbox.ErrNotSupported)
	}
	var rec record
	if err := readJSON(b.dir(id).record(), &rec); err != nil || !rec.Complete {
		return fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	f := b.cgroups.weightFile()
	value := max(f.lo, weight*f.dflt/100)
	err := os.WriteFile(filepath.Join(f.parentDir, cgroupName(id, rec.Slot), f.name), []byte(strconv.Itoa(value)), 0)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotRunning)
	}
	if err == nil {
		b.weighParent()
	}
	return err
}

var _ sandbox.Weigher = (*OCI)(nil)
