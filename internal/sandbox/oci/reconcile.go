package oci

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/sandbox"
)

// reconcile brings the host in line with the records, as New starts:
//
//   - a Sandbox whose Create never finished is removed, with its slot,
//     and any kept Disk it was taking back is put back (Disk.From);
//   - a Sandbox whose PID 1 still runs is left running; one whose PID 1 is
//     gone (a crash, a reboot) has what is left of its run torn down;
//   - runtime containers, mounts under the state directory (disk images
//     among them, disk.go), loop devices over its disk images, network
//     namespaces, veths, firewall rules and cgroups carrying the backend's
//     names that no running Sandbox owns are removed;
//   - slots whose owner no longer exists (its state directory deleted) are
//     freed;
//   - the host-wide claims on this backend's Sandboxes' slots, gone with
//     the process that held them, are taken again (retakeSlots).
//
// A Sandbox whose lock is held is being changed by someone else and is
// left alone, and so is whatever another backend claims.
func (b *OCI) reconcile(ctx context.Context) error {
	lost := b.retakeSlots()
	entries, err := os.ReadDir(b.sandboxesDir())
	if err != nil {
		return err
	}
	containers := map[string]bool{}
	ids, err := b.rt.list(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		containers[id] = true
	}
	running := map[string]bool{}
	slots := map[string]int{} // of the Sandboxes found running
	restricted := map[string]bool{}
	for _, e := range entries {
		id := e.Name()
		if validID(id) != nil {
			continue
		}
		d := b.dir(id)
		unlock, err := flock(d.lock(), unix.LOCK_EX|unix.LOCK_NB)
		if err != nil {
			if errors.Is(err, unix.EWOULDBLOCK) {
				running[id] = true // busy: treat as owned
			}
			continue
		}
		var rec record
		recErr := readJSON(d.record(), &rec)
		if recErr != nil {
			rec.Slot = b.slotOf(id)
		}
		if lost[rec.Slot] {
			running[id] = true // another backend's Sandbox has its slot: touch nothing
			unlock()
			continue
		}
		if recErr != nil || !rec.Complete {
			if err := putBackFromImage(ctx, rec, d); err != nil {
				b.log.Error("a sandbox whose create never finished holds a kept disk; left as it is", "sandbox", id, "err", err)
				unlock()
				continue
			}
			b.log.Info("removing a sandbox whose create never finished", "sandbox", id)
			b.tearDown(ctx, id, rec)
			if err := b.removeStopped(id, rec.Slot); err != nil {
				b.log.Warn("remove unfinished sandbox", "sandbox", id, "err", err)
			}
			unlock()
			continue
		}
		var run runRecord
		hasRun := readJSON(d.run(), &run) == nil
		switch {
		case hasRun && run.alive():
			running[id] = true
			slots[id] = rec.Slot
			restricted[id] = rec.Spec.RestrictEgress
		case hasRun || containers[id] || isMountPoint(b.rootfsDir(rec.Slot)) || anyMounted(d.images(rec)):
			b.log.Info("clearing what a stopped sandbox left running", "sandbox", id)
			if err := b.tearDown(ctx, id, rec); err != nil {
				b.log.Warn("clear stopped sandbox", "sandbox", id, "err", err)
			}
		}
		unlock()
	}

	// Runtime containers and mounts no running Sandbox owns.
	for id := range containers {
		if !running[id] && b.rt.state(ctx, id) != "" {
			b.log.Info("deleting an orphaned runtime container", "container", id)
			b.rt.run(ctx, false, "delete", "--force", id)
		}
	}
	// Layers attached by path are detached as soon as the overlay holds
	// them, so any mount here is left from a crash.
	// A running Sandbox's disk images are the mounts it keeps, right in
	// its directory.
	for _, m := range mountsUnder(b.opts.StateDir) {
		if id := filepath.Base(filepath.Dir(m)); running[id] && filepath.Dir(m) == string(b.dir(id)) {
			continue
		}
		b.log.Info("unmounting an orphaned mount", "path", m)
		unix.Unmount(m, unix.MNT_DETACH)
	}
	for dev, img := range loopsUnder(b.opts.StateDir) {
		if id := filepath.Base(filepath.Dir(img)); running[id] && filepath.Dir(img) == string(b.dir(id)) {
			continue
		}
		b.log.Info("detaching an orphaned loop device", "device", dev, "image", img)
		if err := detachLoop(dev); err != nil {
			b.log.Warn("detach orphaned loop device", "device", dev, "err", err)
		}
	}

	unlock, err := b.lockHost()
	if err != nil {
		return err
	}
	defer unlock()
	if err := b.reconcileHost(); err != nil {
		return err
	}
	// A running Sandbox whose relay rule went (the host's ruleset flushed
	// while the Runner was away) gets it back, with its egress rules.
	rules, err := relayRules()
	if err != nil {
		return err
	}
	for id, slot := range slots {
		if len(rules[vethName(slot)]) == 0 {
			b.log.Info("restoring a running sandbox's relay rule", "sandbox", id)
			if err := allowRelay(vethName(slot), b.relay, b.egressFor(restricted[id])); err != nil {
				return err
			}
		}
	}
	b.setParentWeight()
	return nil
}

// putBackFromImage is putBack for a Create that never finished, whose
// Disks may be in its disk image. An image that does not mount (the crash
// came before mkfs.ext4 was done) never had a Disk moved in: then each one
// taken from elsewhere must still be there.
func putBackFromImage(ctx context.Context, rec record, d sandboxDir) error {
	err := withDisk(d, rec, func() error {
		return putBack(ctx, rec.Spec, func(name string) string { return d.diskDir(rec, name) })
	})
	if err != nil && !slices.ContainsFunc(rec.Spec.Disks, func(dk sandbox.Disk) bool { return dk.From != "" && !exists(dk.From) }) {
		return nil
	}
	return err
}

// retakeSlots takes again the host-wide claims on the slots of this
// backend's Sandboxes. It returns the slots another backend's Sandbox has
// claimed meanwhile (logged): such a Sandbox is left as it is, and its
// Start refuses.
func (b *OCI) retakeSlots() map[int]bool {
	lost := map[int]bool{}
	reg, _ := b.registry() // unread, reconcileHost says why
	for n, o := range reg {
		if o.StateDir != b.opts.StateDir || !o.exists() {
			continue
		}
		if err := b.slots.retake(n, o); err != nil {
			b.log.Error("a sandbox's slot is claimed for another backend's sandbox too; both left as they are", "sandbox", o.ID, "slot", n, "err", err)
			lost[n] = true
		}
	}
	return lost
}

// slotOf finds the slot a Sandbox of this backend holds, from the registry.
func (b *OCI) slotOf(id string) int {
	reg, _ := b.registry()
	for n, o := range reg {
		if o == b.owner(id) {
			return n
		}
	}
	return 0
}

// registry reads this HostDir's registry of slots: each slot's owner, none
// where its file does not read.
func (b *OCI) registry() (map[int]slotOwner, error) {
	reg := map[int]slotOwner{}
	entries, err := os.ReadDir(b.slotsDir())
	for _, e := range entries {
		if n, ok := slotFile(e.Name()); ok {
			var o slotOwner
			readJSON(b.slotPath(n), &o)
			reg[n] = o
		}
	}
	return reg, err
}

// reconcileHost clears host-wide objects of slots no running Sandbox
// holds, whichever backend made them. The caller holds the host lock.
func (b *OCI) reconcileHost() error {
	slots, err := b.registry()
	if err != nil {
		return err
	}
	// Slots with something on the host.
	inUse := map[int]bool{}
	if ns, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range ns {
			if n, ok := numbered(e.Name(), netnsPre); ok {
				inUse[n] = true
			}
		}
	}
	if ns, err := os.ReadDir(usernsDir); err == nil {
		for _, e := range ns {
			if n, ok := numbered(e.Name(), ""); ok {
				inUse[n] = true
			}
		}
	}
	if links, err := netlink.LinkList(); err == nil {
		for _, l := range links {
			if n, ok := numbered(l.Attrs().Name, vethPre); ok {
				inUse[n] = true
			}
		}
	}
	rules, err := relayRules()
	if err != nil {
		return err
	}
	for name := range rules {
		if n, ok := numbered(name, vethPre); ok {
			inUse[n] = true
		}
	}
	if dirs, err := os.ReadDir(b.rootfsRoot()); err == nil {
		for _, e := range dirs {
			if n, ok := numbered(e.Name(), ""); ok {
				inUse[n] = true
			}
		}
	}
	cgroups := cgroupDirs()
	for _, dir := range cgroups {
		if n, ok := cgroupSlot(filepath.Base(dir)); ok {
			inUse[n] = true
		}
	}

	for n, o := range slots {
		if o == (slotOwner{}) || !o.exists() {
			b.log.Info("freeing a slot whose sandbox no longer exists", "slot", n)
			b.freeSlot(n, o)
			delete(slots, n)
		}
	}
	for n := range inUse {
		// What another backend claims is its own, whatever this HostDir's
		// registry says.
		mine, registered := slots[n]
		b.slots.unclaimed(n, mine, func() {
			if !registered || !b.slotRunning(n) {
				b.tearDownSlot(n, cgroups)
			}
		})
	}
	return nil
}

// tearDownSlot removes what orphaned slot n left on the host.
func (b *OCI) tearDownSlot(n int, cgroups []string) {
	b.log.Info("tearing down what an orphaned slot left", "slot", n)
	if err := tearDownNetwork(n); err != nil {
		b.log.Warn("tear down orphaned network", "slot", n, "err", err)
	}
	if err := b.removeRootfs(n); err != nil {
		b.log.Warn("unmount orphaned root filesystem", "slot", n, "err", err)
	}
	for _, dir := range cgroups {
		if s, ok := cgroupSlot(filepath.Base(dir)); ok && s == n {
			unix.Rmdir(dir)
		}
	}
}

// slotRunning reports whether slot n's owner runs, or is busy being
// changed (its lock is held).
func (b *OCI) slotRunning(n int) bool {
	var o slotOwner
	if readJSON(b.slotPath(n), &o) != nil {
		return false
	}
	d := sandboxDir(filepath.Join(o.StateDir, "sandboxes", o.ID))
	var run runRecord
	if readJSON(d.run(), &run) == nil && run.alive() {
		return true
	}
	f, err := os.Open(d.lock())
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	return false
}

// numbered parses "<prefix><n>" for a slot number n.
func numbered(name, prefix string) (int, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0 && n <= maxSlot && strconv.Itoa(n) == s
}

// cgroupDirs lists the Sandbox cgroups in every hierarchy.
func cgroupDirs() []string {
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", cgroupParent, "*-*"))
	v2, _ := filepath.Glob(filepath.Join(cgroupRoot, cgroupParent, "*-*"))
	var out []string
	for _, d := range append(dirs, v2...) {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// cgroupSlot reads the slot from a cgroup named by cgroupName.
func cgroupSlot(name string) (int, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return 0, false
	}
	return numbered(name[i+1:], "")
}

// mountsUnder lists mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isMountPoint(path string) bool {
	for _, m := range mountsUnder(path) {
		if m == path {
			return true
		}
	}
	return false
}
