package oci

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestReconcileRemovesWhatACrashLeft makes what a Runner killed mid-way
// leaves behind and checks a new backend clears it: a Create that never
// finished (with its slot; a kept disk it took goes back), a Sandbox whose
// PID 1 died with its network, mounts (its disk image's among them) and
// runtime state still up, a loop device left over a stopped Sandbox's
// disk image, and a network and cgroup of a slot no Sandbox holds; a
// running Sandbox keeps its disk image mounted.
func TestReconcileRemovesWhatACrashLeft(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun")
	base := testkit.Rootfs(t)
	t.Run("crun", func(t *testing.T) {
		testReconcile(t, base, Options{StateDir: filepath.Join(t.TempDir(), "state")})
	})
	t.Run("gvisor", func(t *testing.T) {
		testReconcile(t, base, Options{StateDir: filepath.Join(t.TempDir(), "state"), Runtime: "runsc", RuntimePath: testkit.Runsc(t)})
	})
}

func testReconcile(t *testing.T, base string, opts Options) {
	ctx := context.Background()
	opts.RelayPort, opts.Logger = 7391, slog.New(slog.DiscardHandler)
	b, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}

	// A Create that crashed after taking its slot, writing its record and
	// taking back a kept disk.
	unlock, _ := b.lockHost()
	halfSlot, err := b.allocSlot("half")
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	half := b.dir("half")
	os.MkdirAll(half.upper(), 0o700)
	kept := filepath.Join(t.TempDir(), "claude")
	os.MkdirAll(half.disk("claude"), 0o755)
	os.WriteFile(filepath.Join(half.disk("claude"), "f"), []byte("state"), 0o644)
	writeJSON(half.record(), record{Spec: sandbox.Spec{ID: "half", Layers: []string{base},
		Disks: []sandbox.Disk{{Name: "claude", Target: "/var/lib/kndl/claude", From: kept}}}, Slot: halfSlot})

	// A running Sandbox whose PID 1 dies while the Runner is away.
	limited := sandbox.Resources{DiskMiB: 64}
	if err := b.Create(ctx, sandbox.Spec{ID: "died", Layers: []string{base}, Resources: limited}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Remove(ctx, "died") })
	if err := b.Start(ctx, "died"); err != nil {
		t.Fatal(err)
	}
	var run runRecord
	readJSON(b.dir("died").run(), &run)
	var diedRec record
	readJSON(b.dir("died").record(), &diedRec)
	unix.Kill(run.PID, unix.SIGKILL)
	testenv.Eventually(t, testenv.WaitShort, "PID 1 of died is gone", func() bool { return !run.alive() })

	// A running Sandbox with a disk image, and a stopped one whose image a
	// crash left on a loop device (attached without autoclear, by losetup).
	for _, id := range []string{"alive", "asleep"} {
		if err := b.Create(ctx, sandbox.Spec{ID: id, Layers: []string{base}, Resources: limited}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Remove(ctx, id) })
	}
	if err := b.Start(ctx, "alive"); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("losetup", "-f", b.dir("asleep").diskImage()).CombinedOutput(); err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}

	// A network (a Docker Sandbox's, with the user namespace that owns
	// it) and cgroup of a slot nobody holds.
	const orphan = maxSlot - 7
	unlock, _ = b.lockHost()
	err = setUpNetwork(orphan, b.relay, true, nil)
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join(cgroupRoot, "pids", cgroupParent, cgroupName("gone", orphan))
	if b.cgroups.pids {
		if err := os.MkdirAll(cg, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { tearDownNetwork(orphan); unix.Rmdir(cg) })

	before := map[string]bool{
		"half's directory":            exists(string(half)),
		"died's mount":                isMountPoint(b.rootfsDir(diedRec.Slot)),
		"died's disk image mount":     isMountPoint(b.dir("died").diskMount()),
		"asleep's loop device":        len(loopsUnder(string(b.dir("asleep")))) == 1,
		"died's network namespace":    exists(netnsPath(diedRec.Slot)),
		"died's runtime container":    b.rt.state(ctx, "died") != "",
		"the orphan's veth":           linkExists(vethName(orphan)),
		"the orphan's user namespace": exists(usernsPath(orphan)),
	}
	if b.rt.gvisor {
		before["died's idmapped binds"] = len(mountsUnder(b.bindsDir(diedRec.Slot))) == 3
	}
	for what, ok := range before {
		if !ok {
			t.Fatalf("before reconciling, %s is missing; the checks below prove nothing", what)
		}
	}

	// The Runner is killed: its claims on slots go with it.
	var aliveRec record
	readJSON(b.dir("alive").record(), &aliveRec)
	for n, h := range b.slots.held {
		h.f.Close()
		delete(b.slots.held, n)
	}

	if _, err := New(ctx, opts); err != nil {
		t.Fatal(err)
	}

	if f, err := lockFile(b.slots.path(aliveRec.Slot), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		f.Close()
		t.Error("the restarted backend did not take the running Sandbox's slot again")
	}
	if exists(string(half)) || exists(b.slotPath(halfSlot)) {
		t.Error("the unfinished Create's directory or slot is still there")
	}
	if got, err := os.ReadFile(filepath.Join(kept, "f")); string(got) != "state" {
		t.Errorf("the kept disk the unfinished Create took: got %q, %v; want it put back", got, err)
	}
	st, err := b.Status(ctx, "died")
	if err != nil || st.State != sandbox.StateStopped {
		t.Errorf("status of died: got %+v, %v; want stopped", st, err)
	}
	if isMountPoint(b.rootfsDir(diedRec.Slot)) {
		t.Error("died's root filesystem is still mounted")
	}
	if m := mountsUnder(b.bindsDir(diedRec.Slot)); len(m) > 0 || exists(b.bindsDir(diedRec.Slot)) {
		t.Errorf("died's idmapped binds: %v still mounted, their directory there %v", m, exists(b.bindsDir(diedRec.Slot)))
	}
	if b.rt.state(ctx, "died") != "" {
		t.Error("died's runtime container is still there")
	}
	if exists(usernsPath(orphan)) {
		t.Error("the orphan's user namespace is still there")
	}
	if isMountPoint(b.dir("died").diskMount()) {
		t.Error("died's disk image is still mounted")
	}
	if loops := loopsUnder(opts.StateDir); len(loops) != 1 {
		t.Errorf("loop devices over disk images: got %v, want alive's alone", loops)
	}
	if st, err := b.Status(ctx, "alive"); err != nil || st.State != sandbox.StateRunning || !isMountPoint(b.dir("alive").diskMount()) {
		t.Errorf("alive: got %+v, %v, its disk image mounted %v; want it running on it", st, err, isMountPoint(b.dir("alive").diskMount()))
	}
	for _, slot := range []int{diedRec.Slot, orphan} {
		if exists(netnsPath(slot)) {
			t.Errorf("network namespace of slot %d is still there", slot)
		}
		if linkExists(vethName(slot)) {
			t.Errorf("veth of slot %d is still there", slot)
		}
		if rules, _ := relayRules(); len(rules[vethName(slot)]) > 0 {
			t.Errorf("relay rule of slot %d is still there", slot)
		}
	}
	if exists(cg) {
		t.Errorf("cgroup %s is still there", cg)
	}
	// And died starts again.
	if err := b.Start(ctx, "died"); err != nil {
		t.Fatalf("start after reconcile: %v", err)
	}
}

// TestLayersByPath checks the older kernels' way of giving overlayfs its
// idmapped layers (by path, detached after), forced here.
func TestLayersByPath(t *testing.T) {
	testenv.RequireRoot(t)
	base := testkit.Rootfs(t)
	dir := t.TempDir()
	upper, work, target, scratch := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "rootfs"), filepath.Join(dir, "layers")
	for _, p := range []string{upper, work, target} {
		os.Mkdir(p, 0o755)
	}
	const uidBase = 1 << 31
	userns, err := Userns(uidBase)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(userns)
	if err := mountLowersByPath([]string{base}, upper, work, target, scratch, userns); err != nil {
		t.Fatal(err)
	}
	defer unmountRootfs(target)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(target, "etc/passwd"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != uidBase {
		t.Errorf("owner of /etc/passwd through the idmapped layer: got %d, want %d", st.Uid, uidBase)
	}
	if m := mountsUnder(scratch); len(m) != 0 {
		t.Errorf("idmapped layers left mounted: %v", m)
	}
}

func linkExists(name string) bool {
	_, err := netlink.LinkByName(name)
	return err == nil
}

// TestFirewallComesBack flushes the backend's nftables table, as a host
// firewall reloading its ruleset does, under a running Sandbox: a new
// backend restores the table and the Sandbox's relay rule with its
// egress rules (it is restricted), and a Start works; Remove takes them
// all.
func TestFirewallComesBack(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun")
	base := testkit.Rootfs(t)
	ctx := context.Background()
	opts := Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: 7392, Logger: slog.New(slog.DiscardHandler)}
	b, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, sandbox.Spec{ID: "up", Layers: []string{base}, RestrictEgress: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Remove(ctx, "up") })
	if err := b.Start(ctx, "up"); err != nil {
		t.Fatal(err)
	}
	var rec record
	readJSON(b.dir("up").record(), &rec)
	rules, _ := relayRules()
	restricted := len(rules[vethName(rec.Slot)])
	if restricted < 2 {
		t.Fatalf("a restricted Sandbox has %d rules, want its relay rule and its egress rules", restricted)
	}

	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	c.DelTable(nftKndl())
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if firewallExists() {
		t.Fatal("the table is still there after deleting it")
	}

	b2, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rules, _ := relayRules(); len(rules[vethName(rec.Slot)]) != restricted {
		t.Errorf("rules of the running restricted sandbox after reconciling: got %d, want %d", len(rules[vethName(rec.Slot)]), restricted)
	}
	if err := b2.Remove(ctx, "up"); err != nil {
		t.Fatal(err)
	}
	if rules, _ := relayRules(); len(rules[vethName(rec.Slot)]) != 0 {
		t.Errorf("the removed Sandbox's veth still has %d rules", len(rules[vethName(rec.Slot)]))
	}
	c.DelTable(nftKndl())
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := b2.Create(ctx, sandbox.Spec{ID: "later", Layers: []string{base}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Remove(ctx, "later") })
	if err := b2.Start(ctx, "later"); err != nil {
		t.Fatalf("start with the table gone: %v", err)
	}
	if !firewallExists() {
		t.Error("Start did not put the table back")
	}
}

// TestABackendOverAnotherHostDirLeavesARunningSandboxAlone: a second
// backend on the host over a HostDir of its own (a second Runner) neither
// tears down a running Sandbox's network as an orphan's when it starts nor
// gives its slot to a Sandbox of its own, and both Sandboxes run side by
// side.
func TestABackendOverAnotherHostDirLeavesARunningSandboxAlone(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun")
	base := testkit.Rootfs(t)
	ctx := context.Background()
	backend := func(id string, port uint16) (*OCI, record) {
		// The HostDir's parents must be traversable by Sandboxes' uids.
		top := t.TempDir()
		for _, d := range []string{filepath.Dir(top), top} {
			os.Chmod(d, 0o711)
		}
		b, err := New(ctx, Options{StateDir: filepath.Join(top, "state"), HostDir: filepath.Join(top, "host"), RelayPort: port, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Create(ctx, sandbox.Spec{ID: id, Layers: []string{base}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Remove(ctx, id) })
		if err := b.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		var rec record
		readJSON(b.dir(id).record(), &rec)
		return b, rec
	}
	first, firstRec := backend("first", 7393)
	second, secondRec := backend("second", 7395)
	if firstRec.Slot == secondRec.Slot {
		t.Errorf("both Sandboxes were given slot %d", firstRec.Slot)
	}
	for _, s := range []struct {
		b   *OCI
		id  string
		rec record
	}{{first, "first", firstRec}, {second, "second", secondRec}} {
		st, err := s.b.Status(ctx, s.id)
		if err != nil || st.State != sandbox.StateRunning {
			t.Errorf("%s: got %+v, %v; want it running", s.id, st, err)
		}
		rules, _ := relayRules()
		if !exists(netnsPath(s.rec.Slot)) || !linkExists(vethName(s.rec.Slot)) || len(rules[vethName(s.rec.Slot)]) == 0 {
			t.Errorf("%s's network (slot %d) is gone: namespace %v, veth %v, relay rules %d", s.id, s.rec.Slot,
				exists(netnsPath(s.rec.Slot)), linkExists(vethName(s.rec.Slot)), len(rules[vethName(s.rec.Slot)]))
		}
	}
}
