package oci_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"kndl.dev/kndl/internal/sandbox/oci"
)

// floor runs a runtime with no backend around it: a bundle of the test
// rootfs, read-only, with a Sandbox's init (this binary, bound where the
// backend binds it) and nothing else (no layers, idmap, network, relay,
// firewall or records). Its create+start+exec costs are what crun and
// runsc spend on their own, the reference that says how much of a
// Sandbox's ratio is the backend's.
type floor struct {
	name   string
	argv   []string // the runtime and its global flags
	create []string // what starts it; RuntimeHelper for crun where needed
	bundle string
	spec   *specs.Spec // the bundle's config, both floors'
	cpu    []time.Duration
}

const floorCgroup = "kndl-floor"

func newFloors(b *testing.B, rootfs, runsc string) []*floor {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	bundle := b.TempDir()
	spec := &specs.Spec{
		Version:  oci.OCIVersion,
		Root:     &specs.Root{Path: rootfs, Readonly: true},
		Hostname: "floor",
		Process:  &specs.Process{Args: oci.InitArgs, Env: oci.InitEnv, Cwd: "/"},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
			{Destination: oci.InitPath, Type: "bind", Source: exe, Options: []string{"bind", "ro", "nosuid", "nodev"}},
		},
		Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: "pid"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}, {Type: "network"}}},
	}
	crun, err := exec.LookPath("crun")
	if err != nil {
		b.Fatal(err)
	}
	fc := &floor{name: "crun", argv: []string{crun, "--root", b.TempDir()}, bundle: bundle, spec: spec}
	fc.create = fc.argv
	if oci.NeedsHiddenV2() {
		fc.create = append(append([]string{}, oci.RuntimeHelper...), fc.argv...)
	}
	fg := &floor{name: "gvisor", argv: append([]string{runsc, "--root", b.TempDir()}, oci.RunscFlags(oci.RunscShared())...), bundle: bundle, spec: spec}
	fg.create = fg.argv
	b.Cleanup(func() {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + floorCgroup)
		for _, d := range append(dirs, "/sys/fs/cgroup/"+floorCgroup) {
			os.Remove(d)
		}
	})
	return []*floor{fc, fg}
}

// run creates, starts and execs `true` in one container named id, and
// adds the CPU it cost to f.cpu: its commands' and its cgroup's by the
// exec's end, as BenchmarkCreateStartExecCPU counts a Sandbox's.
func (f *floor) run(b *testing.B, id string) {
	// The config names the cgroup, so each run writes it again.
	f.spec.Linux.CgroupsPath = "/" + floorCgroup + "/" + id
	raw, err := json.Marshal(f.spec)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.bundle, "config.json"), raw, 0o644); err != nil {
		b.Fatal(err)
	}
	// A file, not a pipe: the detached init keeps the runtime's stdio.
	log, err := os.CreateTemp(b.TempDir(), "log")
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	run := func(argv []string, args ...string) {
		c := exec.Command(argv[0], append(append([]string{}, argv[1:]...), args...)...)
		c.Stdout, c.Stderr = log, log
		if err := c.Run(); err != nil {
			out, _ := os.ReadFile(log.Name())
			b.Fatalf("%s %s: %v: %s", f.name, args[0], err, out)
		}
	}
	before := childrenCPU(b)
	run(f.create, "run", "--detach", "--bundle", f.bundle, id)
	run(f.argv, "exec", id, "/bin/true")
	f.cpu = append(f.cpu, childrenCPU(b)-before+cgroupUsage(b, floorCgroup+"/"+id))
	run(f.argv, "delete", "--force", id)
}

// floorLine is the floor's pair and ratio for the benchmark's line.
func floorLine(fs []*floor) string {
	c, g := median(fs[0].cpu), median(fs[1].cpu)
	return fmt.Sprintf(" floor_crun_ms=%.1f floor_gvisor_ms=%.1f floor_ratio=%.2f", ms(c), ms(g), float64(g)/float64(c))
}
