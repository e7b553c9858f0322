package oci

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestGVisorBindsAreIdmappedOnTheHostAndDetachedAtStop: runsc is given no
// idmapped mount to make (each cost it a process start), the backend's
// are attached beside the root filesystem while the Sandbox runs (in its
// 0700 directory, nosuid and nodev, read-only where asked), and
// Stop detaches them and leaves their sources as they were. What the
// Sandbox sees through them (owners, read-only) is sandboxtest's.
func TestGVisorBindsAreIdmappedOnTheHostAndDetachedAtStop(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun")
	base := testkit.Rootfs(t)
	ctx := context.Background()
	b, err := New(ctx, Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: uint16(testkit.Ports(t, 3)),
		Runtime: "runsc", RuntimePath: testkit.Runsc(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{ID: "binds", Layers: []string{base}, Disks: []sandbox.Disk{{Name: "data", Target: "/data"}},
		Binds: []sandbox.Bind{{Source: src, Target: "/workspace"}, {Source: src, Target: "/ro", ReadOnly: true}}}
	if err := b.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Remove(ctx, "binds") })
	for round := range 2 {
		if err := b.Start(ctx, "binds"); err != nil {
			t.Fatal(err)
		}
		var rec record
		readJSON(b.dir("binds").record(), &rec)
		var cfg specs.Spec
		if err := readJSON(filepath.Join(b.dir("binds").bundle(), "config.json"), &cfg); err != nil {
			t.Fatal(err)
		}
		dir := b.bindsDir(rec.Slot)
		var st unix.Stat_t
		if err := unix.Stat(filepath.Dir(dir), &st); err != nil || st.Mode&0o777 != 0o700 || st.Uid != slotUIDBase(rec.Slot) {
			t.Errorf("round %d: %s: mode %o, owner %d, %v; want 0700, the Sandbox's root's", round, filepath.Dir(dir), st.Mode&0o777, st.Uid, err)
		}
		var binds int
		for _, m := range cfg.Mounts {
			if len(m.UIDMappings) > 0 || slices.Contains(m.Options, "idmap") {
				t.Errorf("round %d: runsc is asked to idmap %s itself: %+v", round, m.Destination, m)
			}
			if filepath.Dir(m.Source) == dir {
				binds++
				opts := mountOptions(m.Source)
				want := []string{"nosuid", "nodev", "idmapped"}
				if slices.Contains(m.Options, "ro") {
					want = append(want, "ro")
				}
				for _, o := range want {
					if !slices.Contains(opts, o) {
						t.Errorf("round %d: %s's source %s is mounted with %v, want %s among them", round, m.Destination, m.Source, opts, o)
					}
				}
			}
		}
		// /etc/hosts, resolv.conf and hostname, the Disk and two Binds.
		if binds != 6 {
			t.Errorf("round %d: %d mounts from %s, want 6", round, binds, dir)
		}
		if err := b.Stop(ctx, "binds"); err != nil {
			t.Fatal(err)
		}
		if m := mountsUnder(dir); len(m) > 0 || exists(dir) {
			t.Errorf("round %d: after Stop, %s is there (%v) with %v mounted; want neither", round, dir, exists(dir), m)
		}
		if got, err := os.ReadFile(filepath.Join(src, "f")); string(got) != "kept\n" {
			t.Errorf("round %d: the Bind's file after Stop: got %q, %v", round, got, err)
		}
	}
}

// mountOptions are the options /proc/self/mountinfo gives the mount at
// path (per mount and per superblock), none if nothing is mounted there.
func mountOptions(path string) []string {
	raw, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == path {
			return strings.Split(f[5], ",")
		}
	}
	return nil
}

// TestDetachBindsRemovesNothingButMountPoints: what detachBinds finds
// there that is not a mount (a crash's leftover, a bug) is an error, and
// stays; a bind's source keeps its files.
func TestDetachBindsRemovesNothingButMountPoints(t *testing.T) {
	testenv.RequireRoot(t)
	src, dir := t.TempDir(), filepath.Join(t.TempDir(), "binds")
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	userns, err := Userns(uidBase)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(userns)
	spec := &specs.Spec{Mounts: []specs.Mount{{Destination: "/w", Type: "bind", Source: src, Options: []string{"rbind", "idmap"}}}}
	if err := attachIdmapped(spec, dir, userns); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(spec.Mounts[0].Source, "f"), &st); err != nil || st.Uid != uidBase {
		t.Fatalf("the file through the idmapped bind: uid %d, %v; want %d", st.Uid, err, uidBase)
	}
	if slices.Contains(spec.Mounts[0].Options, "idmap") {
		t.Errorf("options after: %v, want no idmap", spec.Mounts[0].Options)
	}
	stray := filepath.Join(dir, "stray")
	if err := os.MkdirAll(stray, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stray, "g"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := detachBinds(dir); err == nil {
		t.Error("detachBinds over a directory with files that is not a mount: got no error")
	}
	if _, err := os.Stat(filepath.Join(stray, "g")); err != nil {
		t.Errorf("the stray file: %v, want it kept", err)
	}
	if _, err := os.Stat(filepath.Join(src, "f")); err != nil {
		t.Errorf("the bind's source: %v, want its file kept", err)
	}
	if m := mountsUnder(dir); len(m) > 0 {
		t.Errorf("still mounted: %v", m)
	}
	os.RemoveAll(stray) // nothing is mounted here any more
	if err := detachBinds(dir); err != nil || exists(dir) {
		t.Errorf("detachBinds again: %v, %s there %v", err, dir, exists(dir))
	}
	if err := detachBinds(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("detachBinds with nothing there: %v", err)
	}
}
