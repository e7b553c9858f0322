package oci

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The kernel shares CPU by weight between siblings at each level of the
// cgroup tree, and every Sandbox's cgroup is a child of one parent
// (cgroupParent). At the default weight that parent, so all Sandboxes
// together, weighed as one process against each of the host's: five
// Sessions started beside two busy loops took 2.2× five bare Claude Codes
// on the same host, and 1.15× with the parent weighed as five
// (docs/performance.md). So the parent weighs what its Sandboxes weigh,
// summed, and at least the default: each Sandbox contends with the host's
// other work as it would on its own, and a pool Sandbox at a tenth adds a
// tenth. It is set again at each Start, teardown and SetCPUWeight, and as
// a backend starts (reconcile), under the host lock, so two backends on
// one host agree.

// Each hierarchy's weight file and bounds: cgroup v2's cpu.weight, v1's
// cpu.shares (the kernel's own limits on each).
type weightFile struct {
	name         string
	dflt, lo, hi int
	parentDir    string
	childrenGlob string
}

func (l cgroupLayout) weightFile() weightFile {
	if l.kind == "v2" {
		dir := filepath.Join(cgroupRoot, cgroupParent)
		return weightFile{"cpu.weight", 100, 1, 10000, dir, filepath.Join(dir, "*-*", "cpu.weight")}
	}
	dir := filepath.Join(cgroupRoot, "cpu", cgroupParent)
	return weightFile{"cpu.shares", 1024, 2, 262144, dir, filepath.Join(dir, "*-*", "cpu.shares")}
}

// weighParent sets the parent cgroup's weight from its Sandboxes' now.
// Best effort: a host whose parent can't be weighed runs as before.
func (b *OCI) weighParent() {
	unlock, err := b.lockHost()
	if err != nil {
		b.log.Warn("weigh the Sandboxes' cgroup", "err", err)
		return
	}
	defer unlock()
	b.setParentWeight()
}

// setParentWeight is weighParent with the host lock held.
func (b *OCI) setParentWeight() {
	if !b.cgroups.cpu {
		return
	}
	f := b.cgroups.weightFile()
	files, _ := filepath.Glob(f.childrenGlob)
	sum := 0
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // a Sandbox's cgroup going away
		}
		if w, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && w >= f.lo {
			sum += w
		}
	}
	// Their sum, within the file's bounds and never under the default.
	weight := min(max(sum, f.dflt), f.hi)
	err := os.WriteFile(filepath.Join(f.parentDir, f.name), []byte(strconv.Itoa(weight)), 0)
	if err != nil && !os.IsNotExist(err) {
		b.log.Warn("weigh the Sandboxes' cgroup", "err", err)
	}
}
