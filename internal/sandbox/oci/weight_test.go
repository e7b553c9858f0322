package oci_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestTheSandboxesCgroupWeighsWhatItsSandboxesWeigh: the parent cgroup of
// every Sandbox weighs the sum of its Sandboxes' weights, never under the
// default, as Sandboxes start, change weight and go, and again when a
// backend starts over the same state, so each contends with the host's
// other work as it would on its own. Other tests' (and
// packages') Sandboxes share the parent, so each check reads the children
// and the parent until two reads of the children agree around the
// parent's.
func TestTheSandboxesCgroupWeighsWhatItsSandboxesWeigh(t *testing.T) {
	base := requireOCI(t)
	stateDir, port := filepath.Join(t.TempDir(), "state"), freePort(t)
	b := newBackend(t, oci.Options{StateDir: stateDir, RelayPort: port})
	if !slices.Contains(b.Host().Limits, "cpu") {
		t.Skipf("this host enforces only %v", b.Host().Limits)
	}
	dir, file, dflt := "/sys/fs/cgroup/kndl", "cpu.weight", 100
	if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
		dir, file, dflt = "/sys/fs/cgroup/cpu/kndl", "cpu.shares", 1024
	}
	ctx := context.Background()
	// check waits for the parent to weigh the sum of the children it
	// holds, and that sum to be at least least.
	check := func(when string, least int) {
		t.Helper()
		var parent, sum int
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			before := childWeights(t, dir, file)
			parent = readInt(t, filepath.Join(dir, file))
			if after := childWeights(t, dir, file); !slices.Equal(before, after) {
				continue
			}
			sum = 0
			for _, w := range before {
				sum += w
			}
			if parent == max(sum, dflt) && sum >= least {
				return
			}
		}
		t.Fatalf("%s: the parent weighs %d, its Sandboxes %d (want their sum, at least %d and %d)", when, parent, sum, dflt, least)
	}
	a := start(t, b, sandbox.Spec{ID: "weigh-a", Layers: []string{base}})
	check("one Sandbox", dflt)
	c := start(t, b, sandbox.Spec{ID: "weigh-b", Layers: []string{base}})
	check("two Sandboxes", 2*dflt)
	if err := b.SetCPUWeight(ctx, a, 10); err != nil {
		t.Fatal(err)
	}
	check("one at a tenth", dflt+dflt/10)
	if err := b.Stop(ctx, c); err != nil {
		t.Fatal(err)
	}
	check("one stopped", dflt/10)
	// A cgroup below a Sandbox's (a Docker Sandbox's root makes its
	// containers' there) is the Sandbox's to weigh, not the host's: it
	// adds nothing, whatever it weighs.
	own, _ := filepath.Glob(filepath.Join(dir, "*-*"))
	if len(own) != 1 {
		t.Fatalf("Sandbox cgroups under %s: %v, want one", dir, own)
	}
	nested := filepath.Join(own[0], "nested-child")
	if err := os.Mkdir(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(nested) })
	heavy := map[string]int{"cpu.shares": 262144, "cpu.weight": 10000}[file]
	if err := os.WriteFile(filepath.Join(nested, file), []byte(strconv.Itoa(heavy)), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.SetCPUWeight(ctx, a, 10); err != nil {
		t.Fatal(err)
	}
	check("a cgroup nested in a Sandbox's", dflt/10)
	if got := readInt(t, filepath.Join(dir, file)); got != dflt {
		t.Fatalf("with a nested cgroup weighing %d, the parent weighs %d, want %d", heavy, got, dflt)
	}
	if err := os.Remove(nested); err != nil {
		t.Fatal(err)
	}
	// A Runner restarting over the same state weighs the parent again
	// (reconcile): here from a weight a host's reset left.
	c = start(t, b, sandbox.Spec{ID: "weigh-c", Layers: []string{base}})
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.Itoa(dflt)), 0); err != nil {
		t.Fatal(err)
	}
	newBackend(t, oci.Options{StateDir: stateDir, RelayPort: port})
	check("after a restart", dflt+dflt/10)
}

// childWeights reads the weight of each Sandbox cgroup under dir, sorted.
func childWeights(t *testing.T, dir, file string) []int {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*-*", file))
	var out []int
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			w, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

func readInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}
