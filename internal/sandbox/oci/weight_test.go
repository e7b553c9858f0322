package oci_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
)

// TestACPUWeightSetOnARunningSandboxIsItsCgroups: the weight a warm pool
// Sandbox fills at is the one its own cgroup shows inside (cpu.weight, or
// cpu.shares on v1), and back at the default once handed over.
func TestACPUWeightSetOnARunningSandboxIsItsCgroups(t *testing.T) {
	base := requireOCI(t)
	b := newBackend(t, oci.Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: freePort(t)})
	if !slices.Contains(b.Host().Limits, "cpu") {
		t.Skipf("this host enforces only %v", b.Host().Limits)
	}
	ctx := context.Background()
	if err := b.SetCPUWeight(ctx, "weight", 10); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("SetCPUWeight before the Sandbox is made: got %v, want ErrNotFound", err)
	}
	id := start(t, b, sandbox.Spec{ID: "weight", Layers: []string{base}})
	const script = `for f in cpu/cpu.shares cpu.weight; do test -f /sys/fs/cgroup/$f && echo "$f=$(cat /sys/fs/cgroup/$f)"; done`
	tests := []struct {
		weight int
		v1, v2 string
	}{
		{10, "cpu/cpu.shares=102", "cpu.weight=10"},
		{100, "cpu/cpu.shares=1024", "cpu.weight=100"},
	}
	for _, tt := range tests {
		if err := b.SetCPUWeight(ctx, id, tt.weight); err != nil {
			t.Fatalf("SetCPUWeight %d: %v", tt.weight, err)
		}
		if got := run(t, b, id, script); got != tt.v1 && got != tt.v2 {
			t.Errorf("weight %d inside: got %q, want %q (v1) or %q (v2)", tt.weight, got, tt.v1, tt.v2)
		}
	}
	if err := b.SetCPUWeight(ctx, id, 0); err == nil {
		t.Fatal("SetCPUWeight 0: got nil, want an error")
	}
}
