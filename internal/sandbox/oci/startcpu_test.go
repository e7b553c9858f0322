package oci_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/testkit"
)

// BenchmarkCreateStartExecCPU is the CPU a Sandbox's create, start and
// exec of `true` cost, gVisor beside crun, one of each an iteration in
// turn: the runtime's commands (this process's children, waited for) and
// the Sandbox's cgroup by the exec's end, which holds crun's init and
// runsc's Sentry and gofer. It prints one line a script reads, the target
// being a ratio of at most 5:
//
//	create-start-exec-cpu crun_ms=… gvisor_ms=… gvisor_ratio=… … floor_ratio=… load=… host=…
//
// KNDL_BENCH_RUNSC_FLAGS adds a third, runsc with those flags put before
// the backend's own (a wrapper script, which costs a shell start a
// command), to try a flag against the same run's gVisor and crun.
//
// The floor_ figures are the two runtimes alone, each iteration too: the
// same init and `true` in a bundle with nothing of the backend's (floor).
// Their ratio is what the host gives any runsc against crun; the
// difference to gvisor_ratio is the backend's.
//
//	CGO_ENABLED=0 go test -run '^$' -bench CreateStartExecCPU -benchtime 10x ./internal/sandbox/oci/
func BenchmarkCreateStartExecCPU(b *testing.B) {
	base := requireOCI(b)
	type runtime struct {
		name     string
		be       *oci.OCI
		cpu, all []time.Duration
	}
	runsc := testkit.Runsc(b)
	rs := []*runtime{{name: "crun"}, {name: "gvisor"}}
	if flags := os.Getenv("KNDL_BENCH_RUNSC_FLAGS"); flags != "" {
		rs = append(rs, &runtime{name: "flags"})
		b.Logf("flags: runsc %s", flags)
	}
	for _, r := range rs {
		opts := oci.Options{StateDir: b.TempDir() + "/state", RelayPort: freePort(b), Logger: quiet}
		switch r.name {
		case "gvisor":
			opts.Runtime, opts.RuntimePath = "runsc", runsc
		case "flags":
			wrapper := filepath.Join(b.TempDir(), "runsc")
			script := "#!/bin/sh\nexec " + runsc + " " + os.Getenv("KNDL_BENCH_RUNSC_FLAGS") + ` "$@"` + "\n"
			if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
				b.Fatal(err)
			}
			opts.Runtime, opts.RuntimePath = "runsc", wrapper
		}
		r.be = newBackend(b, opts)
	}
	floors := newFloors(b, base, runsc)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		for _, r := range rs {
			id := fmt.Sprintf("cpu-%s-%d", r.name, i)
			before := childrenCPU(b)
			start := time.Now()
			if err := r.be.Create(ctx, sandbox.Spec{ID: id, Layers: []string{base}}); err != nil {
				b.Fatal(err)
			}
			if err := r.be.Start(ctx, id); err != nil {
				b.Fatal(err)
			}
			p, err := r.be.Exec(ctx, id, sandbox.Cmd{Args: []string{"true"}})
			if err != nil {
				b.Fatal(err)
			}
			if code, err := p.Wait(); err != nil || code != 0 {
				b.Fatalf("%s: true: exit %d, %v", r.name, code, err)
			}
			r.all = append(r.all, time.Since(start))
			r.cpu = append(r.cpu, childrenCPU(b)-before+cgroupCPU(b, id))
			b.StopTimer()
			if err := r.be.Remove(ctx, id); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		for _, f := range floors {
			f.run(b, fmt.Sprintf("floor-%s-%d", f.name, i))
		}
	}
	line := "create-start-exec-cpu"
	crun := median(rs[0].cpu)
	for _, r := range rs {
		c := median(r.cpu)
		line += fmt.Sprintf(" %s_ms=%.1f %s_wall_ms=%.1f", r.name, ms(c), r.name, ms(median(r.all)))
		if r.name != "crun" {
			line += fmt.Sprintf(" %s_ratio=%.2f", r.name, float64(c)/float64(crun))
		}
		b.ReportMetric(ms(c), r.name+"-cpu-ms")
	}
	line += floorLine(floors)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("%s load=%s host=%q\n", line, strings.Fields(string(load))[0], lscpuModel())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// childrenCPU is the user and system time of this process's children that
// have ended and been waited for.
func childrenCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cgroupCPU is the CPU time Sandbox id's cgroup was charged.
func cgroupCPU(b *testing.B, id string) time.Duration {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/cpuacct/kndl/" + id + "-*")
	if len(dirs) == 0 {
		dirs, _ = filepath.Glob("/sys/fs/cgroup/kndl/" + id + "-*")
	}
	if len(dirs) != 1 {
		b.Fatalf("the cpu cgroup of %s: got %v, want one", id, dirs)
	}
	return usageIn(b, dirs[0])
}

// cgroupUsage is the CPU time the cgroup rel (below the root) was charged.
func cgroupUsage(b *testing.B, rel string) time.Duration {
	if dir := "/sys/fs/cgroup/cpuacct/" + rel; fileExists(dir) {
		return usageIn(b, dir)
	}
	return usageIn(b, "/sys/fs/cgroup/"+rel)
}

// usageIn reads a cgroup's CPU time: cpuacct's on cgroup v1 and hybrid
// hosts, cpu.stat's on v2.
func usageIn(b *testing.B, dir string) time.Duration {
	if raw, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage")); err == nil {
		ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return time.Duration(ns)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, _ := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond
		}
	}
	b.Fatalf("%s/cpu.stat has no usage_usec", dir)
	return 0
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// lscpuModel is lscpu's model name of this host.
func lscpuModel() string {
	raw, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
