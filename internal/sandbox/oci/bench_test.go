package oci_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/testkit"
)

// eachRuntime runs bench on crun and on gVisor (runsc from testkit.Runsc),
// side by side.
func eachRuntime(b *testing.B, bench func(b *testing.B, be *oci.OCI, base string)) {
	base := requireOCI(b)
	for _, name := range []string{"crun", "gvisor"} {
		b.Run(name, func(b *testing.B) {
			opts := oci.Options{StateDir: b.TempDir() + "/state", RelayPort: freePort(b), Logger: quiet}
			if name == "gvisor" {
				opts.Runtime, opts.RuntimePath = "runsc", testkit.Runsc(b)
			}
			bench(b, newBackend(b, opts), base)
		})
	}
}

// BenchmarkCreateStartExec is a Sandbox made from a warm layer set (the
// cached test rootfs), booted, and running `true` once: what a Session's
// start costs the backend. Remove is outside the timer. Reports the
// median too, the figure the target (150 ms) is set on.
//
//	CGO_ENABLED=0 go test -run '^$' -bench CreateStartExec -benchtime 20x ./internal/sandbox/oci/
func BenchmarkCreateStartExec(b *testing.B) { eachRuntime(b, benchCreateStartExec(sandbox.Spec{})) }

// runnerDisks are the Disks a Runner gives a Session's Sandbox: Claude
// Code's state (limited apart), the package cache, the dependency disk.
var runnerDisks = []sandbox.Disk{{Name: "claude", Target: "/var/lib/kndl/claude", Apart: true},
	{Name: "cache", Target: "/var/cache/kndl"}, {Name: "deps", Target: "/var/lib/kndl/deps"}}

// BenchmarkCreateStartExecDiskLimit is BenchmarkCreateStartExec with a
// Session's Disks, without and with a 10 GiB disk limit: what the sparse
// images (two: one shared, one for Claude Code's state), their ext4 and
// their loop mounts add (disk.go).
//
//	CGO_ENABLED=0 go test -run '^$' -bench CreateStartExecDiskLimit -benchtime 20x ./internal/sandbox/oci/
func BenchmarkCreateStartExecDiskLimit(b *testing.B) {
	b.Run("unlimited", func(b *testing.B) { eachRuntime(b, benchCreateStartExec(sandbox.Spec{Disks: runnerDisks})) })
	b.Run("limited", func(b *testing.B) {
		eachRuntime(b, benchCreateStartExec(sandbox.Spec{Disks: runnerDisks, Resources: sandbox.Resources{DiskMiB: 10 << 10}}))
	})
}

// benchCreateStartExec runs benchCreateStartExecWith on Specs like spec.
func benchCreateStartExec(spec sandbox.Spec) func(*testing.B, *oci.OCI, string) {
	return func(b *testing.B, be *oci.OCI, base string) {
		benchCreateStartExecWith(b, be, base, spec)
	}
}

func benchCreateStartExecWith(b *testing.B, be *oci.OCI, base string, spec sandbox.Spec) {
	ctx := context.Background()
	var times []time.Duration
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("bench-%d", i)
		start := time.Now()
		spec.ID, spec.Layers = id, []string{base}
		if err := be.Create(ctx, spec); err != nil {
			b.Fatal(err)
		}
		if err := be.Start(ctx, id); err != nil {
			b.Fatal(err)
		}
		p, err := be.Exec(ctx, id, sandbox.Cmd{Args: []string{"true"}})
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(); err != nil || code != 0 {
			b.Fatalf("true: exit %d, %v", code, err)
		}
		times = append(times, time.Since(start))
		b.StopTimer()
		if err := be.Remove(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(median(times).Microseconds())/1000, "median-ms")
}

func median[T int64 | time.Duration](xs []T) T {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

var quiet = slog.New(slog.DiscardHandler)

// BenchmarkExec is one `true` in a running Sandbox: the cost of every
// command the Runner runs there.
//
//	CGO_ENABLED=0 go test -run '^$' -bench 'Exec$' -benchtime 50x ./internal/sandbox/oci/
func BenchmarkExec(b *testing.B) { eachRuntime(b, benchExec) }

func benchExec(b *testing.B, be *oci.OCI, base string) {
	ctx := context.Background()
	if err := be.Create(ctx, sandbox.Spec{ID: "bench", Layers: []string{base}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Remove(ctx, "bench") })
	if err := be.Start(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p, err := be.Exec(ctx, "bench", sandbox.Cmd{Args: []string{"true"}})
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(); err != nil || code != 0 {
			b.Fatalf("true: exit %d, %v", code, err)
		}
	}
}

// BenchmarkIdleMemory is what an idle Sandbox costs the host in memory, a
// second after Start, over the host processes in its cgroup (crun: its
// init; gVisor: the Sentry and the gofer): their anonymous memory, which is
// each Sandbox's own; their proportional set size, which adds a share of
// the binaries' pages all Sandboxes share; and the cgroup's own count
// (anonymous memory and the page cache it was charged). Medians over the
// iterations.
//
//	CGO_ENABLED=0 go test -run '^$' -bench IdleMemory -benchtime 5x ./internal/sandbox/oci/
func BenchmarkIdleMemory(b *testing.B) { eachRuntime(b, benchIdleMemory) }

func benchIdleMemory(b *testing.B, be *oci.OCI, base string) {
	ctx := context.Background()
	var anon, pss, charged []int64
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("idle-%d", i)
		if err := be.Create(ctx, sandbox.Spec{ID: id, Layers: []string{base}}); err != nil {
			b.Fatal(err)
		}
		if err := be.Start(ctx, id); err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Second)
		a, p, c := cgroupMemory(b, id)
		anon, pss, charged = append(anon, a), append(pss, p), append(charged, c)
		if err := be.Remove(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(median(anon))/(1<<20), "anon-MiB")
	b.ReportMetric(float64(median(pss))/(1<<20), "pss-MiB")
	b.ReportMetric(float64(median(charged))/(1<<20), "cgroup-MiB")
}

// cgroupMemory returns the summed anonymous memory and Pss of the processes
// in Sandbox id's memory cgroup, and what the cgroup is charged, in bytes.
func cgroupMemory(b *testing.B, id string) (anon, pss, charged int64) {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/memory/kndl/" + id + "-*")
	v2, _ := filepath.Glob("/sys/fs/cgroup/kndl/" + id + "-*")
	dirs = append(dirs, v2...)
	if len(dirs) != 1 {
		b.Fatalf("memory cgroups of %s: %v", id, dirs)
	}
	for _, f := range []string{"memory.usage_in_bytes", "memory.current"} {
		if v, err := os.ReadFile(filepath.Join(dirs[0], f)); err == nil {
			charged, _ = strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
		}
	}
	procs, err := os.ReadFile(filepath.Join(dirs[0], "cgroup.procs"))
	if err != nil {
		b.Fatal(err)
	}
	for _, pid := range strings.Fields(string(procs)) {
		rollup, err := os.ReadFile("/proc/" + pid + "/smaps_rollup")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(rollup), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "Anonymous:":
				anon += kb << 10
			case "Pss:":
				pss += kb << 10
			}
		}
	}
	return anon, pss, charged
}

// BenchmarkKeepDisks is a stopped Sandbox replaced by a new one that takes
// its Disk back (RemoveKeepingDisks, then Create with Disk.From), as a
// Session moving to a new Build is, with 100 MiB in 1000 files on the
// Disk: a rename without a disk limit, a copy out of one image and into
// another with one (disk.go). crun; the backend's runtime plays no part.
//
//	CGO_ENABLED=0 go test -run '^$' -bench KeepDisks -benchtime 5x ./internal/sandbox/oci/
func BenchmarkKeepDisks(b *testing.B) {
	base := requireOCI(b)
	for _, c := range []struct {
		name string
		res  sandbox.Resources
	}{{"unlimited", sandbox.Resources{}}, {"limited", sandbox.Resources{DiskMiB: 10 << 10}}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			be := newBackend(b, oci.Options{StateDir: b.TempDir() + "/state", RelayPort: freePort(b), Logger: quiet})
			spec := sandbox.Spec{ID: "keep", Layers: []string{base}, Resources: c.res, Disks: []sandbox.Disk{{Name: "deps", Target: "/deps"}}}
			if err := be.Create(ctx, spec); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { be.Remove(ctx, "keep") })
			if err := be.Start(ctx, "keep"); err != nil {
				b.Fatal(err)
			}
			p, err := be.Exec(ctx, "keep", sandbox.Cmd{Args: []string{"sh", "-c", "for i in $(seq 1000); do head -c 102400 /dev/urandom > /deps/$i; done"},
				Env: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				b.Fatal(err)
			}
			if code, err := p.Wait(); err != nil || code != 0 {
				b.Fatalf("fill the disk: exit %d, %v", code, err)
			}
			if err := be.Stop(ctx, "keep"); err != nil {
				b.Fatal(err)
			}
			var times []time.Duration
			for i := 0; b.Loop(); i++ {
				kept := filepath.Join(b.TempDir(), "kept")
				start := time.Now()
				if err := be.RemoveKeepingDisks(ctx, "keep", kept); err != nil {
					b.Fatal(err)
				}
				spec.Disks[0].From = filepath.Join(kept, "deps")
				if err := be.Create(ctx, spec); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
			}
			b.ReportMetric(float64(median(times).Microseconds())/1000, "median-ms")
		})
	}
}
