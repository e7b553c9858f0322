package oci_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/sandbox/sandboxtest"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

func TestMain(m *testing.M) {
	if code, ok := oci.RunHelper(os.Args, nil); ok {
		os.Exit(code)
	}
	if code, ok := oci.HoldSlotsIfAsked(); ok {
		os.Exit(code)
	}
	if code, ok := oci.OwnSandboxIfAsked(); ok {
		os.Exit(code)
	}
	oci.ReapTests(context.Background())
	// The backend turns IPv4 forwarding on for good; tests put it back.
	fwd, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	code := m.Run()
	if len(fwd) > 0 {
		os.WriteFile("/proc/sys/net/ipv4/ip_forward", fwd, 0o644)
	}
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	base := requireOCI(t)
	port := freePort(t)
	sandboxtest.Run(t, func(t *testing.T, dir string) sandbox.Backend {
		return newBackend(t, oci.Options{StateDir: dir, RelayPort: port})
	}, base, sandboxtest.Options{})
}

// requireOCI skips (or, under CI, fails) without what the backend needs,
// and returns the test base layer.
func requireOCI(t testing.TB) string {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun")
	return testkit.Rootfs(t)
}

// newBackend makes a backend that logs to the test.
func newBackend(t testing.TB, opts oci.Options) *oci.OCI {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	b, err := oci.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Logf("%s", p)
	return len(p), nil
}

// freePort is a relay port, its egress ports after it, claimed for the
// test (testkit.Ports).
func freePort(t testing.TB) uint16 { return uint16(testkit.Ports(t, 3)) }

// TestLimitsInsideTheSandbox reads the limits from the Sandbox's own cgroup
// view: CPUs as a CFS quota, memory, and the pids bound.
func TestLimitsInsideTheSandbox(t *testing.T) {
	base := requireOCI(t)
	b := newBackend(t, oci.Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: freePort(t), MaxCPUs: 1})
	if len(b.Host().Limits) != 3 {
		t.Skipf("this host enforces only %v", b.Host().Limits)
	}
	id := start(t, b, sandbox.Spec{ID: "limits", Layers: []string{base}, Resources: sandbox.Resources{CPUs: 0.5, MemoryMiB: 96}})
	script := `for f in cpu/cpu.cfs_quota_us memory/memory.limit_in_bytes pids/pids.max cpu.max memory.max pids.max; do
		test -f /sys/fs/cgroup/$f && echo "$f=$(cat /sys/fs/cgroup/$f)"; done`
	got := run(t, b, id, script)
	v1 := "cpu/cpu.cfs_quota_us=50000\nmemory/memory.limit_in_bytes=100663296\npids/pids.max=8192"
	v2 := "cpu.max=50000 100000\nmemory.max=100663296\npids.max=8192"
	if got != v1 && got != v2 {
		t.Errorf("limits inside: got %q, want %q (v1) or %q (v2)", got, v1, v2)
	}
}

// TestHardening checks what confines a Sandbox's root beyond its user
// namespace: the capability set, no_new_privs, and, on crun, a seccomp
// filter that refuses new namespaces and mounts. On gVisor those calls
// reach the Sentry, not the host: it has no OCI seccomp filter (runsc
// applies one only with --oci-seccomp), a user namespace of gVisor's own
// may be made, /proc/sys is its network stack's and /sys/fs/cgroup a
// cgroupfs of its own (on crun only a Docker Sandbox's cgroup is
// writable), but it refuses mounts,
// new network and mount namespaces and changes to the Sandbox's interface
// the same way.
func TestHardening(t *testing.T) {
	base := requireOCI(t)
	tests := []struct{ script, crun, gvisor string }{
		{"grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status | tr -s '\\t ' ' '", "NoNewPrivs: 1\nSeccomp: 2", "NoNewPrivs: 1\nSeccomp: 0"},
		// CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP
		// NET_BIND_SERVICE SYS_CHROOT AUDIT_WRITE SETFCAP: bits 0 1 3-8
		// 10 18 29 31
		{"grep ^CapEff: /proc/self/status | cut -f2", "00000000a00405fb", "00000000a00405fb"},
		{"unshare -U true", "refused", "allowed"},
		{"unshare -n true", "refused", "refused"},
		{"unshare -m true", "refused", "refused"},
		{"mount -t tmpfs none /mnt", "refused", "refused"},
		{"mkdir /sys/fs/cgroup/pids/kndl-test", "refused", "allowed"},
		{"busybox ip link set eth0 down", "refused", "refused"},
		{"echo 1 > /proc/sys/net/ipv4/ip_forward", "refused", "allowed"},
		{"chown nobody /etc/shells", "allowed", "allowed"},
		{"(ls -A /sys/class/net; ls -A /sys/devices/virtual/net) 2>/dev/null | wc -l", "0", "0"},
	}
	for _, rt := range []string{"crun", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			opts := oci.Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: freePort(t)}
			if rt == "gvisor" {
				opts.Runtime, opts.RuntimePath = "runsc", testkit.Runsc(t)
			}
			b := newBackend(t, opts)
			id := start(t, b, sandbox.Spec{ID: "hard", Layers: []string{base}})
			for _, tc := range tests {
				want, script := tc.crun, tc.script
				if rt == "gvisor" {
					want = tc.gvisor
				}
				if want == "refused" || want == "allowed" {
					script = "(" + script + ") >/dev/null 2>&1 && echo allowed || echo refused"
				}
				if got := run(t, b, id, script); got != want {
					t.Errorf("%s: got %q, want %q", tc.script, got, want)
				}
			}
		})
	}
}

func TestOptions(t *testing.T) {
	requireOCI(t)
	closed := t.TempDir() // 0700: Sandboxes' uids cannot traverse it
	state := filepath.Join(t.TempDir(), "state")
	tests := []struct {
		name string
		opts oci.Options
		want error
	}{
		{"relative state dir", oci.Options{StateDir: "state"}, errdefs.ErrInvalid},
		{"host dir below a closed directory", oci.Options{StateDir: state, HostDir: filepath.Join(closed, "host")}, errdefs.ErrInvalid},
		{"relative host dir", oci.Options{StateDir: state, HostDir: "host"}, errdefs.ErrInvalid},
		{"relative slots dir", oci.Options{StateDir: state, SlotsDir: "slots"}, errdefs.ErrInvalid},
		{"IPv6 relay", oci.Options{StateDir: "/x", RelayIP: netip.MustParseAddr("::1")}, errdefs.ErrInvalid},
		{"relay inside the pool", oci.Options{StateDir: "/x", RelayIP: netip.MustParseAddr("10.174.3.1")}, errdefs.ErrInvalid},
		{"missing init binary", oci.Options{StateDir: "/x", InitPath: "/nonexistent"}, errdefs.ErrInvalid},
		{"unknown runtime", oci.Options{StateDir: filepath.Join(t.TempDir(), "s"), Runtime: "runc", RuntimePath: "/bin/true"}, errdefs.ErrInvalid},
	}
	for _, tc := range tests {
		if _, err := oci.New(context.Background(), tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, p := range []string{filepath.Join(closed, "host"), state} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was made for refused options", p)
		}
	}
}

// start creates and starts a Sandbox, removed when the test ends.
func start(t *testing.T, b *oci.OCI, spec sandbox.Spec) string {
	t.Helper()
	ctx := context.Background()
	if err := b.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Remove(ctx, spec.ID) })
	if err := b.Start(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	return spec.ID
}

// run runs a bash script as root and returns its trimmed output.
func run(t testing.TB, b *oci.OCI, id, script string) string {
	t.Helper()
	var out bytes.Buffer
	p, err := b.Exec(context.Background(), id, sandbox.Cmd{Args: []string{"bash", "-c", script},
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out.String())
}

// TestBuildWithApt is a Build as the Runner makes one: boot from the base,
// install a package with apt (DNS, egress, apt dropping to its _apt user,
// dpkg changing owners, all under the user namespace and seccomp), stop,
// snapshot, and boot a Session's Sandbox from [snapshot, base].
func TestBuildWithApt(t *testing.T) {
	base := requireOCI(t)
	testkit.RequireDebianMirror(t)
	b := newBackend(t, oci.Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: freePort(t)})
	ctx := context.Background()
	build := start(t, b, sandbox.Spec{ID: "build", Layers: []string{base}})
	if out := run(t, b, build, "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends jq >/dev/null && echo installed"); !strings.HasSuffix(out, "installed") {
		t.Fatalf("apt-get install: %s", out)
	}
	if err := b.Stop(ctx, build); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "build-1")
	if err := b.Snapshot(ctx, build, snap); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(ctx, build); err != nil {
		t.Fatal(err)
	}
	session := start(t, b, sandbox.Spec{ID: "session", Layers: []string{snap, base}})
	if got := run(t, b, session, `echo '{"a":42}' | jq .a; stat -c %U /usr/bin/jq`); got != "42\nroot" {
		t.Errorf("jq in the session: got %q, want 42 and root", got)
	}
}

// TestNoHostUserButRootReadsASandboxsWrites: what a Sandbox writes is
// reached on the host only by root, through a mount that honours no
// setuid bit.
func TestNoHostUserButRootReadsASandboxsWrites(t *testing.T) {
	base := requireOCI(t)
	testenv.RequireCommand(t, "setpriv")
	b := newBackend(t, oci.Options{StateDir: filepath.Join(t.TempDir(), "state"), RelayPort: freePort(t)})
	id := start(t, b, sandbox.Spec{ID: "private", Layers: []string{base}})
	probe := "kndl-probe-" + strings.ReplaceAll(t.Name(), "/", "-")
	run(t, b, id, "echo secret > /"+probe+" && cp /bin/true /suid-"+probe+" && chmod 4755 /suid-"+probe)
	found, _ := filepath.Glob(filepath.Join(oci.DefaultHostDir, "rootfs", "*", "root", probe))
	if len(found) != 1 {
		t.Fatalf("the Sandbox's file on the host: %v, want one", found)
	}
	if b, err := os.ReadFile(found[0]); err != nil || string(b) != "secret\n" {
		t.Fatalf("root reads %q, %v", b, err)
	}
	// A shell as nobody, so every path is looked up as nobody.
	as := func(script string) error {
		return exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/bin/sh", "-c", script).Run()
	}
	if err := as("true"); err != nil {
		t.Fatalf("a shell as nobody: %v", err)
	}
	if err := as("cat " + found[0]); err == nil {
		t.Fatalf("a host user read %s", found[0])
	}
	if err := as(filepath.Join(filepath.Dir(found[0]), "suid-"+probe)); err == nil {
		t.Fatal("a host user ran the Sandbox's setuid file")
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == filepath.Dir(found[0]) && !strings.Contains(f[5], "nosuid") {
			t.Fatalf("the root filesystem is mounted without nosuid: %s", line)
		}
	}
}
