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
	cpu    []time.Duration
}

const floorCgroup = "kndl-floor"

func newFloors(b *testing.B, rootfs, runsc string) []*floor {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	bundle := b.TempDir()
	spec := specs.Spec{
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
	raw, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), raw, 0o644); err != nil {
		b.Fatal(err)
	}
	crun, err := exec.LookPath("crun")
	if err != nil {
		b.Fatal(err)
	}
	fc := &floor{name: "crun", argv: []string{crun, "--root", b.TempDir()}, bundle: bundle}
	fc.create = fc.argv
	if oci.NeedsHiddenV2() {
		fc.create = append(append([]string{}, oci.RuntimeHelper...), fc.argv...)
	}
	fg := &floor{name: "gvisor", argv: append([]string{runsc, "--root", b.TempDir()}, oci.RunscFlags(oci.RunscShared())...), bundle: bundle}
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
	path := filepath.Join(f.bundle, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		b.Fatal(err)
	}
	spec.Linux.CgroupsPath = "/" + floorCgroup + "/" + id
	if raw, err = json.Marshal(spec); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	// A file, not a pipe: the detached init keeps the runtime's stdio.
	log, err := os.CreateTemp(b.TempDir(), "log")
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	cmd := func(argv []string, args ...string) *exec.Cmd {
		c := exec.Command(argv[0], append(append([]string{}, argv[1:]...), args...)...)
		c.Stdout, c.Stderr = log, log
		return c
	}
	before := childrenCPU(b)
	detach := "--detach"
	if f.name == "crun" {
		detach = "-d"
	}
	if err := cmd(f.create, "run", detach, "--bundle", f.bundle, id).Run(); err != nil {
		out, _ := os.ReadFile(log.Name())
		b.Fatalf("%s run: %v: %s", f.name, err, out)
	}
	if err := cmd(f.argv, "exec", id, "/bin/true").Run(); err != nil {
		out, _ := os.ReadFile(log.Name())
		b.Fatalf("%s exec true: %v: %s", f.name, err, out)
	}
	f.cpu = append(f.cpu, childrenCPU(b)-before+cgroupUsage(b, floorCgroup+"/"+id))
	if err := cmd(f.argv, "delete", "--force", id).Run(); err != nil {
		out, _ := os.ReadFile(log.Name())
		b.Fatalf("%s delete: %v: %s", f.name, err, out)
	}
}

// floorLine is the floor's pair and ratio for the benchmark's line.
func floorLine(fs []*floor) string {
	c, g := median(fs[0].cpu), median(fs[1].cpu)
	return fmt.Sprintf(" floor_crun_ms=%.1f floor_gvisor_ms=%.1f floor_ratio=%.2f", ms(c), ms(g), float64(g)/float64(c))
}
