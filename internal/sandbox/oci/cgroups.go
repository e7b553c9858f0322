package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	cgroupRoot   = "/sys/fs/cgroup"
	unifiedMount = "/sys/fs/cgroup/unified"
	// cgroupParent holds every Sandbox's cgroup: <parent>/<tag>-<id> in each
	// hierarchy. The parent stays; each Sandbox's cgroup goes with it.
	cgroupParent = "kndl"
	// pidsLimit bounds the processes of one Sandbox: a fork bomb stops there.
	pidsLimit = 8192
)

// cgroupLayout is what this host's cgroups look like and what they let us
// enforce.
type cgroupLayout struct {
	// kind is "v2", "v1" or "hybrid" (v1 controllers plus a v2 mount at
	// /sys/fs/cgroup/unified).
	kind string
	// memory, cpu and pids say whether that controller can limit a Sandbox.
	memory, cpu, pids bool
	// swap says whether memory+swap can be limited (v1 memsw, v2 swap.max).
	swap bool
}

// detectCgroups reads the layout from the mounts at /sys/fs/cgroup rather
// than assuming one: a pure v2 host needs none of the hybrid workaround.
func detectCgroups() (cgroupLayout, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &st); err != nil {
		return cgroupLayout{}, fmt.Errorf("statfs %s: %w", cgroupRoot, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		b, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers"))
		if err != nil {
			return cgroupLayout{}, fmt.Errorf("read cgroup v2 controllers: %w", err)
		}
		ctl := strings.Fields(string(b))
		l := cgroupLayout{kind: "v2", memory: has(ctl, "memory"), cpu: has(ctl, "cpu"), pids: has(ctl, "pids")}
		// The root has no memory.swap.max; any child shows whether the
		// kernel accounts swap.
		swap, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", "memory.swap.max"))
		l.swap = l.memory && len(swap) > 0
		return l, nil
	}
	l := cgroupLayout{kind: "v1"}
	if unix.Statfs(unifiedMount, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		l.kind = "hybrid"
	}
	l.memory = isCgroup1(filepath.Join(cgroupRoot, "memory"))
	l.cpu = isCgroup1(filepath.Join(cgroupRoot, "cpu"))
	l.pids = isCgroup1(filepath.Join(cgroupRoot, "pids"))
	_, err := os.Stat(filepath.Join(cgroupRoot, "memory", "memory.memsw.limit_in_bytes"))
	l.swap = l.memory && err == nil
	return l, nil
}

func isCgroup1(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP_SUPER_MAGIC
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// limits lists what the layout enforces, in HostInfo's words.
func (l cgroupLayout) limits() []string {
	var out []string
	if l.cpu {
		out = append(out, "cpu")
	}
	if l.memory {
		out = append(out, "memory")
	}
	if l.pids {
		out = append(out, "pids")
	}
	return out
}

// notes are HostInfo sentences about the layout under runtime rt.
func (l cgroupLayout) notes(rt ociRuntime) []string {
	var out []string
	switch {
	case l.kind == "hybrid" && rt.gvisor:
		out = append(out, "cgroups are hybrid (v1 controllers, v2 mounted at /sys/fs/cgroup/unified): limits are enforced with the v1 controllers.")
	case l.kind == "hybrid":
		out = append(out, "cgroups are hybrid (v1 controllers, v2 mounted at /sys/fs/cgroup/unified): limits are enforced with the v1 controllers, and crun runs with the v2 mount hidden in a private mount namespace.")
	case l.kind == "v1":
		out = append(out, "cgroups are v1: limits are enforced with the v1 controllers.")
	case l.kind == "v2":
		out = append(out, "cgroups are v2: limits are enforced with the unified hierarchy.")
	}
	if l.memory && !l.swap && hostHasSwap() {
		out = append(out, "Swap is not accounted in this host's cgroups, so a Sandbox may use swap beyond its memory limit.")
	}
	for _, c := range []struct {
		ok   bool
		name string
	}{{l.cpu, "cpu"}, {l.memory, "memory"}, {l.pids, "pids"}} {
		if !c.ok {
			out = append(out, fmt.Sprintf("The %s cgroup controller is not available, so Sandboxes' %s is not limited.", c.name, c.name))
		}
	}
	return out
}

// needsHiddenUnified reports whether the runtime must run with the v2 mount
// hidden (see runRuntime).
func (l cgroupLayout) needsHiddenUnified() bool { return l.kind == "hybrid" }

// removeCgroup removes a Sandbox's cgroup from every hierarchy, for what a
// crash left behind; crun delete removes it otherwise. A cgroup still
// holding processes is kept (rmdir fails with EBUSY).
func removeCgroup(rel string) {
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", cgroupParent, rel))
	if d := filepath.Join(cgroupRoot, cgroupParent, rel); exists(d) {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		unix.Rmdir(d)
	}
}

// delegateCgroup hands a Sandbox's cgroup, in every v1 hierarchy, to its
// root (host uid uid), so dockerd can make its containers' cgroups below
// it: the directory and the files that take processes, never the files
// of its own limits, which stay the host's. A child's limits cannot go
// past its parent's.
func delegateCgroup(rel string, uid int) error {
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", cgroupParent, rel))
	var errs []error
	for _, d := range dirs {
		for _, p := range []string{d, filepath.Join(d, "cgroup.procs"), filepath.Join(d, "tasks")} {
			if err := os.Lchown(p, uid, uid); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// oomKills is how many processes the kernel killed in a Sandbox's cgroup
// for want of memory: memory.events on v2, memory.oom_control on v1 (and
// hybrid, whose memory controller is v1). 0 when the cgroup is gone.
func (l cgroupLayout) oomKills(rel string) int64 {
	path := filepath.Join(cgroupRoot, "memory", cgroupParent, rel, "memory.oom_control")
	if l.kind == "v2" {
		path = filepath.Join(cgroupRoot, cgroupParent, rel, "memory.events")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// hostHasSwap reports whether any swap is active (/proc/swaps has more
// than its header).
func hostHasSwap() bool {
	b, err := os.ReadFile("/proc/swaps")
	return err == nil && len(strings.Split(strings.TrimSpace(string(b)), "\n")) > 1
}
