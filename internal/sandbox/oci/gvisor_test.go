package oci_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/sandbox/sandboxtest"
	"kndl.dev/kndl/internal/testkit"
)

// TestConformanceGVisor is the suite on runsc, then what only a kernel
// between the Sandbox and the host's gives: the Sandbox's kernel is
// gVisor's, its log is the Sentry's, the host kernel's raw interfaces are
// not there, and what runs the Sandbox on the host runs in its own uid
// range, not as root.
func TestConformanceGVisor(t *testing.T) {
	base := requireOCI(t)
	runsc := testkit.Runsc(t)
	port := freePort(t)
	gvisor := func(t *testing.T, dir string) *oci.OCI {
		return newBackend(t, oci.Options{StateDir: dir, RelayPort: port, Runtime: "runsc", RuntimePath: runsc})
	}
	sandboxtest.Run(t, func(t *testing.T, dir string) sandbox.Backend { return gvisor(t, dir) },
		base, sandboxtest.Options{OwnKernel: true, NotSupported: oci.GVisorNotSupported})

	t.Run("ProcVersionIsGVisors", func(t *testing.T) {
		b := gvisor(t, filepath.Join(t.TempDir(), "state"))
		id := start(t, b, sandbox.Spec{ID: "version", Layers: []string{base}})
		if got := run(t, b, id, "cat /proc/version"); !strings.Contains(got, "gvisor") {
			t.Errorf("/proc/version inside: got %q, want gVisor's", got)
		}
		host, _ := os.ReadFile("/proc/version")
		if got := run(t, b, id, "uname -r"); strings.Contains(string(host), got) {
			t.Errorf("uname -r inside is the host kernel's release %q", got)
		}
	})
	t.Run("DmesgShowsTheSentry", func(t *testing.T) {
		b := gvisor(t, filepath.Join(t.TempDir(), "state"))
		id := start(t, b, sandbox.Spec{ID: "dmesg", Layers: []string{base}})
		if got := run(t, b, id, "dmesg 2>&1 | head -3"); !strings.Contains(got, "Starting gVisor") {
			t.Errorf("dmesg inside: got %q, want the Sentry's boot log", got)
		}
	})
	t.Run("NoRawHostKernelInterfaces", func(t *testing.T) {
		b := gvisor(t, filepath.Join(t.TempDir(), "state"))
		id := start(t, b, sandbox.Spec{ID: "raw", Layers: []string{base}})
		// Under crun these are the host kernel's: /sys/kernel and
		// /sys/module list its settings and modules, /proc/kallsyms its
		// symbols.
		got := run(t, b, id, "find /sys/kernel /sys/module -mindepth 1 2>/dev/null | head -5; ls /proc/kallsyms /proc/keys /sys/kernel/security 2>/dev/null")
		if got != "" {
			t.Errorf("host kernel interfaces inside: %q", got)
		}
	})
	// runsc is built with its seccomp programs precompiled
	// (scripts/build-runsc): the Sentry, the gofer and the systrap stubs
	// still each run under a filter (Seccomp 2, filter mode).
	t.Run("HostProcessesAreSeccompFiltered", func(t *testing.T) {
		b := gvisor(t, filepath.Join(t.TempDir(), "state"))
		id := start(t, b, sandbox.Spec{ID: "seccomp", Layers: []string{base}})
		pids := sandboxHostPIDs(id)
		if len(pids) < 2 {
			t.Fatalf("host processes in %s's cgroup: %v, want the Sentry and the gofer at least", id, pids)
		}
		for _, pid := range pids {
			if mode, ok := statusField(pid, "Seccomp:"); ok && mode != "2" {
				comm, _ := os.ReadFile("/proc/" + pid + "/comm")
				t.Errorf("host process %s (%s) of %s: Seccomp %s, want 2 (a filter)", pid, strings.TrimSpace(string(comm)), id, mode)
			}
		}
		t.Logf("%d host processes in %s's cgroup", len(pids), id)
	})
	t.Run("HostProcessesRunInTheSandboxRange", func(t *testing.T) {
		b := gvisor(t, filepath.Join(t.TempDir(), "state"))
		seen := map[int]string{}
		for _, id := range []string{"range-a", "range-b"} {
			start(t, b, sandbox.Spec{ID: id, Layers: []string{base}})
			uids := sandboxHostUIDs(t, id)
			if len(uids) == 0 {
				t.Fatalf("no host process found in %s's cgroup", id)
			}
			for _, uid := range uids {
				if uid == 0 {
					t.Errorf("a host process of %s runs as root", id)
				}
				if other, ok := seen[uid]; ok && other != id {
					t.Errorf("%s and %s run host processes as the same uid %d", other, id, uid)
				}
				seen[uid] = id
			}
		}
	})
}

// sandboxHostPIDs returns the host pids of the processes in Sandbox id's
// cgroup (runsc's sandbox and gofer processes, the systrap stubs), in any
// hierarchy.
func sandboxHostPIDs(id string) []string {
	procs, _ := filepath.Glob("/sys/fs/cgroup/*/kndl/" + id + "-*/cgroup.procs")
	v2, _ := filepath.Glob("/sys/fs/cgroup/kndl/" + id + "-*/cgroup.procs")
	seen := map[string]bool{}
	var pids []string
	for _, f := range append(procs, v2...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(b)) {
			if !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// statusField returns a field of /proc/pid/status ("Uid:", "Seccomp:"):
// its first value.
func statusField(pid, name string) (string, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%s/status", pid))
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == name {
			return fields[1], true
		}
	}
	return "", false
}

// sandboxHostUIDs returns the host uids of the processes in Sandbox id's
// cgroup.
func sandboxHostUIDs(t *testing.T, id string) []int {
	t.Helper()
	var uids []int
	for _, pid := range sandboxHostPIDs(id) {
		if v, ok := statusField(pid, "Uid:"); ok {
			if uid, err := strconv.Atoi(v); err == nil {
				uids = append(uids, uid)
			}
		}
	}
	return uids
}

// TestGVisorLimitsOnTheHost reads a gVisor Sandbox's limits where runsc
// sets them, its cgroup on the host (inside, /sys/fs/cgroup is the Sentry's
// own): CPUs as a CFS quota, memory, and the pids bound.
func TestGVisorLimitsOnTheHost(t *testing.T) {
	base := requireOCI(t)
	b := newBackend(t, oci.Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: freePort(t), MaxCPUs: 1,
		Runtime: "runsc", RuntimePath: testkit.Runsc(t)})
	if len(b.Host().Limits) != 3 {
		t.Skipf("this host enforces only %v", b.Host().Limits)
	}
	start(t, b, sandbox.Spec{ID: "limits", Layers: []string{base}, Resources: sandbox.Resources{CPUs: 0.5, MemoryMiB: 96}})
	read := func(pattern string) string {
		files, _ := filepath.Glob(pattern)
		if len(files) != 1 {
			return ""
		}
		v, _ := os.ReadFile(files[0])
		return strings.TrimSpace(string(v))
	}
	v1 := []string{read("/sys/fs/cgroup/cpu/kndl/limits-*/cpu.cfs_quota_us"), read("/sys/fs/cgroup/memory/kndl/limits-*/memory.limit_in_bytes"), read("/sys/fs/cgroup/pids/kndl/limits-*/pids.max")}
	v2 := []string{read("/sys/fs/cgroup/kndl/limits-*/cpu.max"), read("/sys/fs/cgroup/kndl/limits-*/memory.max"), read("/sys/fs/cgroup/kndl/limits-*/pids.max")}
	if got := strings.Join(v1, " "); got != "50000 100663296 8192" && strings.Join(v2, " ") != "50000 100000 100663296 8192" {
		t.Errorf("the Sandbox's cgroup on the host: v1 %q, v2 %q; want a 50000 µs quota, 96 MiB and 8192 pids", v1, v2)
	}
}
