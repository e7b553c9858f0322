// Package oci is the Sandbox backend that runs each Sandbox as an OCI
// container: an overlayfs root over read-only layers, a user namespace with
// a uid range of its own, a network namespace that reaches the internet and
// the Runner's relay and nothing else of the host, cgroup limits, and a
// seccomp filter. Its runtime is crun (the backend named "crun": the
// Sandbox shares the host's kernel) or gVisor's runsc (named "gvisor": a
// kernel in user space between the Sandbox and the host's, gvisor.go).
// Only the Runner imports it (through the sandbox.Backend seam), and
// cmd/kndl for RunHelper.
package oci

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/gvisor"
)

// Options configure the backend. The Runner fills them from its
// environment; zero values take the defaults named.
type Options struct {
	// StateDir holds the Sandboxes' records, upper layers and Disks, and the
	// runtime's state. Required: the Runner passes <home>/sandboxes/oci.
	// Made mode 0700: upper layers hold files the Sandboxes own.
	StateDir string
	// HostDir is shared by every oci backend on the host: the lock, the
	// registry of slots (uid ranges and networks) and the mount points of
	// running Sandboxes' root filesystems. The runtime reaches a root
	// filesystem as the Sandbox's own root, so HostDir and the directories
	// above it must be traversable by all (o+x); it is made 0711, the rest
	// inside it 0700. Default /var/lib/kndl/oci.
	HostDir string
	// SlotsDir holds the host-wide claims on slots (slots.go), one for
	// every backend on the host whatever its HostDir, so that two Runners
	// (or two test processes) never give out one slot. Made mode 0700.
	// Default DefaultSlotsDir (/var/lib/kndl/slots).
	SlotsDir string
	// Runtime is the OCI runtime: "crun" (the default) or "runsc"
	// (gVisor, built at RunscVersion; Debian's is too old to join a
	// Sandbox's network namespace).
	Runtime string
	// RuntimePath is the runtime's binary; default: Runtime looked up on PATH.
	RuntimePath string
	// InitPath is the host path of a static kndl binary, bound read-only
	// into every Sandbox as its PID 1 (RunHelper's init). Default: this
	// process's own executable.
	InitPath string
	// RelayIP is the address the Runner's relay listens on, added to the
	// host's loopback; Sandboxes reach it as sandbox.RelayHost. Default
	// DefaultRelayIP (10.174.0.1).
	RelayIP netip.Addr
	// RelayPort is the relay's port. Environment: RUNNER_RELAY_PORT.
	// Default 7380.
	RelayPort uint16
	// MaxCPUs caps every Sandbox's CPUs. Environment:
	// RUNNER_SANDBOX_MAX_CPUS. Default: the host's CPU count.
	MaxCPUs float64
	// MaxMemoryMiB caps every Sandbox's memory. Environment:
	// RUNNER_SANDBOX_MAX_MEMORY_MIB. Default: three quarters of the host's.
	MaxMemoryMiB int
	// MaxDiskMiB caps every Sandbox's disk, and is what one that asks for
	// none gets (disk.go says how it is enforced). Environment:
	// RUNNER_SANDBOX_MAX_DISK_MIB. Default 0: no cap, and a Sandbox is
	// limited only if its Spec asks.
	MaxDiskMiB int
	// DNS are the resolvers Sandboxes use, the only private addresses they
	// reach (port 53). Nil means the host's non-loopback IPv4 nameservers;
	// empty means none.
	DNS []netip.Addr
	// EgressPort is where, on the relay's address, the Runner's egress
	// proxy listens for a restricted Sandbox's connections (TCP), and
	// EgressPort+1 where its DNS server answers (UDP and TCP); see
	// Spec.RestrictEgress. Default RelayPort+1, as the Runner leaves it.
	EgressPort uint16
	// Logger gets the backend's operational log; default slog.Default().
	Logger *slog.Logger
}

// Defaults not derived from the host.
const (
	DefaultHostDir   = "/var/lib/kndl/oci"
	DefaultRelayPort = 7380
)

// OCI is the backend. Its methods are safe for concurrent use, and for use
// by several processes over the same StateDir (each change to a Sandbox
// holds that Sandbox's lock file).
type OCI struct {
	opts    Options
	log     *slog.Logger
	rt      ociRuntime
	cgroups cgroupLayout
	host    sandbox.HostInfo
	relay   netip.AddrPort
	fw      firewall
	userns  usernsCache
	slots   *hostSlots
	// canLimitDisk says the host has what disk.go needs.
	canLimitDisk bool
}

// New makes the backend over opts.StateDir, reconciling what an earlier
// backend left: a Sandbox whose Create never finished is removed, a
// running Sandbox is kept running, and anything with the backend's names
// (network namespace, veth, firewall rule, mount, cgroup, runtime state)
// that no Sandbox owns is torn down. It needs root.
func New(ctx context.Context, opts Options) (*OCI, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	b := &OCI{opts: opts, log: opts.Logger.With("component", "sandbox-oci"), slots: newHostSlots(opts.SlotsDir)}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("the oci sandbox backend needs root: %w", errdefs.ErrUnavailable)
	}
	switch opts.Runtime {
	case "crun", "runsc":
	default:
		return nil, fmt.Errorf("sandbox runtime %q: want crun or runsc: %w", opts.Runtime, errdefs.ErrInvalid)
	}
	if err := b.makeDirs(); err != nil {
		return nil, err
	}
	if err := register(opts, b.log); err != nil {
		return nil, err
	}
	var err error
	if b.cgroups, err = detectCgroups(); err != nil {
		return nil, err
	}
	gvisor := opts.Runtime == "runsc"
	// runsc reads hybrid cgroups itself; crun needs the v2 mount hidden.
	b.rt = ociRuntime{path: opts.RuntimePath, root: b.runtimeDir(), gvisor: gvisor, hideUnified: !gvisor && b.cgroups.needsHiddenUnified()}
	if gvisor {
		b.rt.flags = runscFlags(b.runscSharedDir())
	}
	b.relay = netip.AddrPortFrom(opts.RelayIP, opts.RelayPort)
	b.fw = firewall{dns: opts.DNS, blocked: append(append([]netip.Prefix{}, blockedNets...), connectedNets()...)}

	b.host = sandbox.HostInfo{
		Limits:       b.cgroups.limits(),
		Notes:        b.cgroups.notes(b.rt),
		MaxCPUs:      opts.MaxCPUs,
		MaxMemoryMiB: opts.MaxMemoryMiB,
		MaxDiskMiB:   opts.MaxDiskMiB,
		CPUs:         float64(runtime.NumCPU()),
		MemoryMiB:    hostMemoryMiB(),
		Relay:        b.relay.String(),
		EgressProxy:  netip.AddrPortFrom(opts.RelayIP, opts.EgressPort).String(),
		EgressDNS:    netip.AddrPortFrom(opts.RelayIP, opts.EgressPort+1).String(),
	}
	if gvisor {
		b.host.NoDocker = gvisorNoDocker
	}
	how, err := diskEnforcer()
	switch {
	case err != nil:
		b.host.Notes = append(b.host.Notes, fmt.Sprintf("Disk use cannot be limited here (%v): a Sandbox's own writes and Disks grow on the state directory's filesystem.", err))
	case opts.MaxDiskMiB == 0:
		b.canLimitDisk, b.host.DiskLimit = true, how
		b.host.Notes = append(b.host.Notes, "Disk use is not limited (RUNNER_SANDBOX_MAX_DISK_MIB is unset): a Sandbox's own writes and Disks grow on the state directory's filesystem.")
	default:
		b.canLimitDisk, b.host.DiskLimit = true, how
		b.host.Limits = append(b.host.Limits, "disk")
	}
	if len(opts.DNS) == 0 {
		b.host.Notes = append(b.host.Notes, "The host has no resolver a Sandbox can reach (a loopback one is no use from another network namespace), so Sandboxes have no DNS; set the backend's DNS option.")
	}
	unlock, err := b.lockHost()
	if err != nil {
		return nil, err
	}
	notes, err := enableHostNetworking(opts.RelayIP)
	if err == nil {
		err = b.fw.ensure()
	}
	if err == nil && gvisor {
		err = pinNullNetns(b.runscSharedDir())
	}
	unlock()
	if err != nil {
		return nil, err
	}
	b.host.Notes = append(b.host.Notes, notes...)
	if err := b.reconcile(ctx); err != nil {
		return nil, fmt.Errorf("reconcile sandboxes in %s: %w", opts.StateDir, err)
	}
	return b, nil
}

// makeDirs makes the state directory and the host directory, after
// checking that Sandboxes' uids can traverse every directory above the
// host directory (see Options.HostDir).
func (b *OCI) makeDirs() error {
	for p := filepath.Dir(b.opts.HostDir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err == nil && st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("sandbox host dir %s: %s is mode %v, but Sandboxes' uids must traverse it (chmod o+x): %w",
				b.opts.HostDir, p, st.Mode().Perm(), errdefs.ErrInvalid)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{b.opts.StateDir, 0o700}, {b.sandboxesDir(), 0o700}, {b.runtimeDir(), 0o700},
		{b.opts.HostDir, 0o711}, {b.slotsDir(), 0o700}, {b.rootfsRoot(), 0o711}, {b.opts.SlotsDir, 0o700},
	} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return err
		}
	}
	return nil
}

func (o *Options) fill() error {
	if o.StateDir == "" || !filepath.IsAbs(o.StateDir) {
		return fmt.Errorf("sandbox state dir %q must be an absolute path: %w", o.StateDir, errdefs.ErrInvalid)
	}
	o.StateDir = filepath.Clean(o.StateDir)
	if o.HostDir == "" {
		o.HostDir = DefaultHostDir
	}
	if !filepath.IsAbs(o.HostDir) {
		return fmt.Errorf("sandbox host dir %q must be an absolute path: %w", o.HostDir, errdefs.ErrInvalid)
	}
	o.HostDir = filepath.Clean(o.HostDir)
	if o.SlotsDir == "" {
		o.SlotsDir = DefaultSlotsDir
	}
	if !filepath.IsAbs(o.SlotsDir) {
		return fmt.Errorf("sandbox slots dir %q must be an absolute path: %w", o.SlotsDir, errdefs.ErrInvalid)
	}
	o.SlotsDir = filepath.Clean(o.SlotsDir)
	if o.Runtime == "" {
		o.Runtime = "crun"
	}
	if o.RuntimePath == "" {
		p, err := exec.LookPath(o.Runtime)
		if err != nil && o.Runtime == "runsc" {
			return fmt.Errorf("runsc is not installed (build it from gvisor.dev/gvisor/runsc@%s, or install gVisor's release, and put it on PATH or in RUNNER_RUNSC): %w", gvisor.Version, errdefs.ErrUnavailable)
		}
		if err != nil {
			return fmt.Errorf("sandbox runtime %s is not installed (apt-get install %s): %w", o.Runtime, o.Runtime, errdefs.ErrUnavailable)
		}
		o.RuntimePath = p
	}
	if o.InitPath == "" {
		p, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the kndl binary for Sandboxes' init: %w", err)
		}
		o.InitPath = p
	}
	if st, err := os.Stat(o.InitPath); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("sandbox init binary %s is not a file: %w", o.InitPath, errdefs.ErrInvalid)
	}
	if !o.RelayIP.IsValid() {
		o.RelayIP = DefaultRelayIP
	}
	if !o.RelayIP.Is4() {
		return fmt.Errorf("relay address %s must be IPv4: %w", o.RelayIP, errdefs.ErrInvalid)
	}
	if sandboxPool.Contains(o.RelayIP) && o.RelayIP != DefaultRelayIP {
		return fmt.Errorf("relay address %s is inside the Sandbox pool %s: %w", o.RelayIP, sandboxPool, errdefs.ErrInvalid)
	}
	if o.RelayPort == 0 {
		o.RelayPort = DefaultRelayPort
	}
	if o.EgressPort == 0 {
		o.EgressPort = o.RelayPort + 1
	}
	if o.EgressPort == o.RelayPort || o.EgressPort+1 == o.RelayPort || o.EgressPort == 65535 {
		return fmt.Errorf("egress port %d: want a port whose next one is free too, neither the relay's %d: %w", o.EgressPort, o.RelayPort, errdefs.ErrInvalid)
	}
	if o.MaxCPUs <= 0 || math.IsNaN(o.MaxCPUs) {
		o.MaxCPUs = float64(runtime.NumCPU())
	}
	if o.MaxMemoryMiB <= 0 {
		o.MaxMemoryMiB = hostMemoryMiB() * 3 / 4
	}
	if o.MaxDiskMiB < 0 || (o.MaxDiskMiB > 0 && o.MaxDiskMiB < minDiskMiB) {
		return fmt.Errorf("sandbox disk cap %d MiB: want 0 (none) or at least %d MiB: %w", o.MaxDiskMiB, minDiskMiB, errdefs.ErrInvalid)
	}
	if o.DNS == nil {
		o.DNS = hostResolvers("/etc/resolv.conf")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

func hostMemoryMiB() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 1024
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.Atoi(fields[1])
			return kb / 1024
		}
	}
	return 1024
}

// Name is the backend's name: "crun", or "gvisor" for runsc.
func (b *OCI) Name() string {
	if b.rt.gvisor {
		return "gvisor"
	}
	return "crun"
}

// Host reports what this host enforces.
func (b *OCI) Host() sandbox.HostInfo { return b.host }

// Paths.

func (b *OCI) sandboxesDir() string { return filepath.Join(b.opts.StateDir, "sandboxes") }
func (b *OCI) runtimeDir() string   { return filepath.Join(b.opts.StateDir, b.opts.Runtime) }
func (b *OCI) slotsDir() string     { return filepath.Join(b.opts.HostDir, "slots") }
func (b *OCI) rootfsRoot() string   { return filepath.Join(b.opts.HostDir, "rootfs") }

// runscSharedDir is runsc's --shared-root: one for every gvisor backend on
// the host.
func (b *OCI) runscSharedDir() string { return filepath.Join(b.opts.HostDir, "runsc") }

// rootfsDir is where slot's root filesystem is mounted while it runs: in
// a directory of its own, 0700 and owned by the slot's root, so no host
// user but root and the Sandbox reads a Sandbox's files through the mount
// (rootfsRoot itself is 0711: the Sandbox's root must pass through).
func (b *OCI) rootfsDir(slot int) string {
	return filepath.Join(b.rootfsRoot(), strconv.Itoa(slot), "root")
}

// makeRootfsDir makes slot's mount point and its private directory.
func (b *OCI) makeRootfsDir(slot int) error {
	dir := filepath.Dir(b.rootfsDir(slot))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	base := int(slotUIDBase(slot))
	if err := os.Chown(dir, base, base); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return os.Mkdir(b.rootfsDir(slot), 0o700)
}

// removeRootfs detaches slot's root filesystem and its idmapped binds and
// removes their directories, those of the layout before rootfsDir had one
// of its own too.
func (b *OCI) removeRootfs(slot int) error {
	if err := unmountRootfs(b.rootfsDir(slot)); err != nil {
		return err
	}
	if err := detachBinds(b.bindsDir(slot)); err != nil {
		return err
	}
	return unmountRootfs(filepath.Dir(b.rootfsDir(slot)))
}
func (b *OCI) dir(id string) sandboxDir {
	return sandboxDir(filepath.Join(b.sandboxesDir(), id))
}

// sandboxDir is one Sandbox's directory (see record.go for the layout).
type sandboxDir string

func (d sandboxDir) path(p ...string) string {
	return filepath.Join(append([]string{string(d)}, p...)...)
}
func (d sandboxDir) record() string { return d.path("sandbox.json") }
func (d sandboxDir) run() string    { return d.path("run.json") }
func (d sandboxDir) lock() string   { return d.path("lock") }
func (d sandboxDir) upper() string  { return d.path("upper") }
func (d sandboxDir) work() string   { return d.path("work") }
func (d sandboxDir) layers() string { return d.path("layers") }
func (d sandboxDir) disk(name string) string {
	return d.path("disks", name)
}
func (d sandboxDir) etc(name string) string { return d.path("etc", name) }
func (d sandboxDir) bundle() string         { return d.path("bundle") }

func (b *OCI) lockHost() (func(), error) {
	if err := os.MkdirAll(b.opts.HostDir, 0o700); err != nil {
		return nil, err
	}
	return flock(filepath.Join(b.opts.HostDir, "lock"), unix.LOCK_EX)
}

// lockSandbox takes id's lock and reads its record; ErrNotFound if there
// is no finished Sandbox id.
func (b *OCI) lockSandbox(id string) (record, func(), error) {
	if err := validID(id); err != nil {
		return record{}, nil, err
	}
	d := b.dir(id)
	unlock, err := flock(d.lock(), unix.LOCK_EX)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return record{}, nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
		}
		return record{}, nil, err
	}
	var rec record
	if err := readJSON(d.record(), &rec); err != nil || !rec.Complete {
		unlock()
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return record{}, nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
		}
		return record{}, nil, err
	}
	return rec, unlock, nil
}

var (
	idPattern   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`) })
	diskPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`) })
	hostPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`) })
)

func validID(id string) error {
	if !idPattern().MatchString(id) {
		return fmt.Errorf("sandbox id %q: want [a-z0-9-], at most 40 characters: %w", id, errdefs.ErrInvalid)
	}
	return nil
}

// validate checks a Spec before anything is made.
func validate(spec sandbox.Spec) error {
	if err := validID(spec.ID); err != nil {
		return err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("sandbox %s: %s: %w", spec.ID, fmt.Sprintf(format, a...), errdefs.ErrInvalid)
	}
	if len(spec.Layers) == 0 {
		return bad("no layers")
	}
	if len(spec.Layers) > 128 {
		return bad("%d layers, at most 128", len(spec.Layers))
	}
	for _, l := range spec.Layers {
		if !filepath.IsAbs(l) {
			return bad("layer %q is not an absolute path", l)
		}
		if st, err := os.Stat(l); err != nil || !st.IsDir() {
			return bad("layer %s is not a directory", l)
		}
	}
	targets := map[string]bool{}
	target := func(t string) error {
		if !filepath.IsAbs(t) || filepath.Clean(t) != t || t == "/" {
			return bad("mount target %q must be a clean absolute path other than /", t)
		}
		for _, r := range []string{"/proc", "/sys", "/dev", "/etc/hosts", "/etc/resolv.conf", "/etc/hostname"} {
			if t == r || strings.HasPrefix(t, r+"/") {
				return bad("mount target %s is the backend's own", t)
			}
		}
		if targets[t] {
			return bad("two mounts at %s", t)
		}
		targets[t] = true
		return nil
	}
	names := map[string]bool{}
	for _, d := range spec.Disks {
		if !diskPattern().MatchString(d.Name) || names[d.Name] {
			return bad("disk name %q: want a unique [a-z0-9-] name", d.Name)
		}
		names[d.Name] = true
		if err := target(d.Target); err != nil {
			return err
		}
		if d.From != "" {
			if !filepath.IsAbs(d.From) {
				return bad("disk %s: From %q is not an absolute path", d.Name, d.From)
			}
			if st, err := os.Lstat(d.From); err != nil || !st.IsDir() {
				return bad("disk %s: %s is no kept disk (a directory RemoveKeepingDisks made)", d.Name, d.From)
			}
		}
	}
	for _, db := range spec.DiskBinds {
		if !names[db.Disk] {
			return bad("disk bind at %s: no disk %q", db.Target, db.Disk)
		}
		if db.Sub == "" || db.Sub == "." || db.Sub == ".." || strings.ContainsAny(db.Sub, "/\x00") || len(db.Sub) > 255 {
			return bad("disk bind at %s: sub %q is not one path element", db.Target, db.Sub)
		}
		if err := target(db.Target); err != nil {
			return err
		}
	}
	for _, bd := range spec.Binds {
		if !filepath.IsAbs(bd.Source) {
			return bad("bind source %q is not an absolute path", bd.Source)
		}
		if _, err := os.Stat(bd.Source); err != nil {
			return bad("bind source %s: %v", bd.Source, err)
		}
		if err := target(bd.Target); err != nil {
			return err
		}
	}
	for _, t := range spec.Tmpfs {
		if err := target(t.Target); err != nil {
			return err
		}
	}
	r := spec.Resources
	if r.CPUs < 0 || math.IsNaN(r.CPUs) || math.IsInf(r.CPUs, 0) || r.MemoryMiB < 0 {
		return bad("resources %+v must not be negative", r)
	}
	if r.MemoryMiB > 0 && r.MemoryMiB < 16 {
		return bad("memory %d MiB is below the 16 MiB a Sandbox needs", r.MemoryMiB)
	}
	if r.DiskMiB < 0 || (r.DiskMiB > 0 && r.DiskMiB < minDiskMiB) {
		return bad("disk %d MiB: want 0 (the Runner's default) or at least %d MiB", r.DiskMiB, minDiskMiB)
	}
	if spec.Hostname != "" && !hostPattern().MatchString(spec.Hostname) {
		return bad("hostname %q is not a valid host name", spec.Hostname)
	}
	return nil
}

// give caps what a Spec asks for and says where it gave less.
func (b *OCI) give(asked sandbox.Resources) (sandbox.Resources, []string) {
	got := asked
	var notes []string
	if got.CPUs == 0 {
		got.CPUs = b.opts.MaxCPUs
	} else if got.CPUs > b.opts.MaxCPUs {
		got.CPUs = b.opts.MaxCPUs
		notes = append(notes, fmt.Sprintf("Asked for %g CPUs; this Runner gives a Sandbox at most %g (RUNNER_SANDBOX_MAX_CPUS).", asked.CPUs, b.opts.MaxCPUs))
	}
	if got.MemoryMiB == 0 {
		got.MemoryMiB = b.opts.MaxMemoryMiB
	} else if got.MemoryMiB > b.opts.MaxMemoryMiB {
		got.MemoryMiB = b.opts.MaxMemoryMiB
		notes = append(notes, fmt.Sprintf("Asked for %d MiB of memory; this Runner gives a Sandbox at most %d MiB (RUNNER_SANDBOX_MAX_MEMORY_MIB).", asked.MemoryMiB, b.opts.MaxMemoryMiB))
	}
	if !b.cgroups.cpu {
		notes = append(notes, "This host cannot limit CPUs (no cpu cgroup controller).")
	}
	if !b.cgroups.memory {
		notes = append(notes, "This host cannot limit memory (no memory cgroup controller).")
	}
	return got, notes
}

// minDiskMiB is the smallest disk limit: an ext4 with its journal and a
// root filesystem's first writes.
const minDiskMiB = 32

// giveDisk caps the disk a Spec asks for, at Create: an image's size is
// fixed from then on.
func (b *OCI) giveDisk(asked int) (int, []string) {
	got := asked
	if got == 0 {
		got = b.opts.MaxDiskMiB
	}
	switch {
	case got == 0:
		return 0, nil
	case !b.canLimitDisk:
		return 0, []string{"This host cannot limit disk use (see the Runner's start log): the Sandbox's writes are bounded only by the host's disk."}
	case b.opts.MaxDiskMiB > 0 && got > b.opts.MaxDiskMiB:
		return b.opts.MaxDiskMiB, []string{fmt.Sprintf("Asked for %d MiB of disk; this Runner gives a Sandbox at most %d MiB (RUNNER_SANDBOX_MAX_DISK_MIB).", asked, b.opts.MaxDiskMiB)}
	}
	return got, nil
}

// Create makes a stopped Sandbox: its record, slot, upper layer and Disks.
func (b *OCI) Create(ctx context.Context, spec sandbox.Spec) (err error) {
	if err := validate(spec); err != nil {
		return err
	}
	if spec.Docker && b.host.NoDocker != "" {
		return fmt.Errorf("sandbox %s: %s: %w", spec.ID, b.host.NoDocker, sandbox.ErrNotSupported)
	}
	d := b.dir(spec.ID)
	unlockHost, err := b.lockHost()
	if err != nil {
		return err
	}
	if exists(string(d)) {
		unlockHost()
		return fmt.Errorf("sandbox %s: %w", spec.ID, sandbox.ErrExists)
	}
	slot, err := b.allocSlot(spec.ID)
	if err != nil {
		unlockHost()
		return err
	}
	given, notes := b.give(spec.Resources)
	disk, diskNotes := b.giveDisk(spec.Resources.DiskMiB)
	rec := record{Spec: spec, Slot: slot, Given: given, Notes: notes, DiskMiB: disk, DiskNotes: diskNotes}
	var unlock func()
	err = os.Mkdir(string(d), 0o700)
	if err == nil {
		unlock, err = flock(d.lock(), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err == nil {
		err = writeJSON(d.record(), rec)
	}
	unlockHost()
	images := d.images(rec)
	defer func() {
		switch {
		case err == nil:
			// A stopped Sandbox holds no mount; Start retries one left.
			if uerr := unmountImages(images); uerr != nil {
				b.log.Warn("unmount a new sandbox's disk images", "sandbox", spec.ID, "err", uerr)
			}
		case putBack(context.WithoutCancel(ctx), spec, func(name string) string { return d.diskDir(rec, name) }) != nil:
			// A kept disk is still in the directory: it stays, unfinished,
			// for reconcile to put back.
			err = fmt.Errorf("create sandbox %s: %w; a kept disk could not be put back, and is under %s", spec.ID, err, d)
		default:
			unmountImages(images)
			removeTree(string(d))
			if u, e := b.lockHost(); e == nil {
				b.freeSlot(slot, b.owner(spec.ID))
				u()
			}
			err = fmt.Errorf("create sandbox %s: %w", spec.ID, err)
		}
		if unlock != nil {
			unlock()
		}
	}()
	if err != nil {
		return err
	}
	// The Sandbox's own directories: made in place, or, with a disk limit,
	// in a tree per image that mkfs.ext4 copies into it, which is then
	// mounted only to take kept Disks in.
	tree := func(p string) string { return p }
	if disk > 0 {
		tree = func(p string) string {
			for _, im := range images {
				if rel, ok := strings.CutPrefix(p, im.mount+"/"); ok {
					return filepath.Join(im.tree(), rel)
				}
			}
			return p
		}
		for _, im := range images {
			if err := os.Mkdir(im.tree(), 0o755); err != nil {
				return err
			}
		}
	}
	own := d.own(rec)
	for _, p := range []string{tree(own.upper()), tree(own.work()), d.layers(), tree(own.path("disks")), d.path("etc"), d.bundle()} {
		if err := os.Mkdir(p, 0o700); err != nil {
			return err
		}
	}
	// The upper's root is the root filesystem's "/": owned by the Sandbox's
	// root and world-readable like any "/".
	base := int(slotUIDBase(slot))
	if err := os.Chown(tree(own.upper()), base, base); err != nil {
		return err
	}
	if err := os.Chmod(tree(own.upper()), 0o755); err != nil {
		return err
	}
	taking := false
	for _, dk := range spec.Disks {
		if dk.From != "" {
			taking = true
			continue
		}
		if err := os.Mkdir(tree(d.diskDir(rec, dk.Name)), 0o755); err != nil {
			return err
		}
	}
	if err := makeDiskImages(ctx, images, disk); err != nil {
		return err
	}
	if taking {
		if err := mountImages(images); err != nil {
			return err
		}
	}
	for _, dk := range spec.Disks {
		if dk.From == "" {
			continue
		}
		// Into a disk image, a copy (docs/performance.md).
		if err := moveTree(ctx, dk.From, d.diskDir(rec, dk.Name)); err != nil {
			return fmt.Errorf("take back disk %s from %s: %w", dk.Name, dk.From, err)
		}
	}
	// Taken: the finished record names no path outside the state
	// directory. The unfinished one kept them, for putBack.
	rec.Spec.Disks = slices.Clone(spec.Disks)
	for i := range rec.Spec.Disks {
		rec.Spec.Disks[i].From = ""
	}
	rec.Complete = true
	return writeJSON(d.record(), rec)
}

// putBack moves the Disks a Create took back (Disk.From) to where they
// were, for a Create that failed or never finished: nothing of a kept disk
// may go with the Sandbox's directory, so while it returns an error the
// directory stays. dir says where each Disk is (sandboxDir.diskDir).
func putBack(ctx context.Context, spec sandbox.Spec, dir func(name string) string) error {
	var errs []error
	for _, dk := range spec.Disks {
		if dk.From == "" || !exists(dir(dk.Name)) || exists(dk.From) {
			continue
		}
		if err := moveTree(ctx, dir(dk.Name), dk.From); err != nil {
			errs = append(errs, fmt.Errorf("put disk %s back to %s: %w", dk.Name, dk.From, err))
		}
	}
	return errors.Join(errs...)
}

// writeEtc writes the files bound at /etc/hosts, /etc/resolv.conf and
// /etc/hostname, at each Start, so they follow the backend's options: the
// relay's fixed name and the names gh calls GitHub by
// (sandbox.ForgeAPIHosts) live in hosts.
func (b *OCI) writeEtc(spec sandbox.Spec, slot int, d sandboxDir) error {
	hostname := spec.Hostname
	if hostname == "" {
		hostname = spec.ID
	}
	_, guest := slotAddrs(slot)
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n%s\t%s\n%s\t%s\n",
		guest, hostname, b.opts.RelayIP, sandbox.RelayHost, b.opts.RelayIP, strings.Join(sandbox.ForgeAPIHosts, " "))
	var resolv strings.Builder
	dns := b.opts.DNS
	if spec.RestrictEgress {
		// Any server would do (the firewall sends port 53 to the
		// Runner's), and the host may name none a Sandbox can use.
		dns = []netip.Addr{b.opts.RelayIP}
	}
	for _, ns := range dns {
		fmt.Fprintf(&resolv, "nameserver %s\n", ns)
	}
	for name, content := range map[string]string{"hosts": hosts, "resolv.conf": resolv.String(), "hostname": hostname + "\n"} {
		if err := os.WriteFile(d.etc(name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// allocSlot gives id the lowest slot free on the host: in the registry
// of this HostDir and in the host-wide claims. The caller holds the host
// lock.
func (b *OCI) allocSlot(id string) (int, error) {
	entries, err := os.ReadDir(b.slotsDir())
	if err != nil {
		return 0, err
	}
	used := map[int]bool{}
	for _, e := range entries {
		if n, ok := slotFile(e.Name()); ok {
			used[n] = true
		}
	}
	n, err := b.slots.claimFirst(b.owner(id), func(n int) bool { return used[n] })
	if err != nil {
		return 0, err
	}
	if err := writeJSON(b.slotPath(n), b.owner(id)); err != nil {
		b.slots.release(n, b.owner(id))
		return 0, err
	}
	return n, nil
}

// owner names this backend's Sandbox id as a slot's owner.
func (b *OCI) owner(id string) slotOwner { return slotOwner{StateDir: b.opts.StateDir, ID: id} }

func (b *OCI) slotPath(n int) string { return filepath.Join(b.slotsDir(), strconv.Itoa(n)+".json") }

// freeSlot takes n out of the registry and drops owner's host-wide claim.
func (b *OCI) freeSlot(n int, owner slotOwner) {
	os.Remove(b.slotPath(n))
	b.slots.release(n, owner)
}

func slotFile(name string) (int, bool) {
	s, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0 && n <= maxSlot
}

// Start boots a created or stopped Sandbox.
func (b *OCI) Start(ctx context.Context, id string) (err error) {
	rec, unlock, err := b.lockSandbox(id)
	if err != nil {
		return err
	}
	defer unlock()
	// Everything Start sets up is named by the slot: never while another
	// backend's Sandbox has it.
	if err := b.slots.retake(rec.Slot, b.owner(id)); err != nil {
		return fmt.Errorf("start sandbox %s: %w", id, err)
	}
	d := b.dir(id)
	var run runRecord
	if readJSON(d.run(), &run) == nil {
		if run.alive() {
			return fmt.Errorf("start sandbox %s: %w", id, sandbox.ErrRunning)
		}
		// PID 1 died on its own (or the host rebooted): clear what is left.
		if err := b.tearDown(ctx, id, rec); err != nil {
			return fmt.Errorf("start sandbox %s: %w", id, err)
		}
	}
	defer func() {
		if err != nil {
			b.tearDown(context.WithoutCancel(ctx), id, rec)
			err = fmt.Errorf("start sandbox %s: %w", id, err)
		}
	}()
	// Caps apply at each boot: a Runner restarted with lower ones lowers
	// its Sandboxes' at their next Start.
	rec.Given, rec.Notes = b.give(rec.Spec.Resources)
	if err := b.writeEtc(rec.Spec, rec.Slot, d); err != nil {
		return err
	}
	own := d.own(rec)
	// The root filesystem (on the disk images, if any) and the network
	// are independent: made at once.
	t0 := time.Now()
	var rootfsTime, netTime time.Duration
	netErr := make(chan error, 1)
	go func() {
		unlockHost, err := b.lockHost()
		if err == nil {
			// The table goes if the host's ruleset is flushed (a firewall
			// service reloading): put it back before relying on it.
			if !firewallExists() {
				err = b.fw.ensure()
			}
			if err == nil {
				err = setUpNetwork(rec.Slot, b.relay, rec.Spec.Docker, b.egressFor(rec.Spec.RestrictEgress))
			}
			unlockHost()
		}
		netTime = time.Since(t0)
		netErr <- err
	}()
	err = mountImages(d.images(rec))
	if err == nil {
		err = makeDiskSubs(rec.Spec.DiskBinds, func(name string) string { return d.diskDir(rec, name) })
	}
	var userns int
	if err == nil {
		userns, err = b.userns.get(slotUIDBase(rec.Slot))
	}
	if err == nil {
		err = b.makeRootfsDir(rec.Slot)
	}
	if err == nil {
		err = mountRootfs(rec.Spec.Layers, own.upper(), own.work(), b.rootfsDir(rec.Slot), d.layers(), userns)
	}
	rootfsTime = time.Since(t0)
	if err2 := <-netErr; err == nil {
		err = err2
	}
	if err != nil {
		return err
	}
	t2 := time.Now()
	spec := b.runtimeSpec(id, rec, d)
	if b.rt.gvisor {
		if err := attachIdmapped(spec, b.bindsDir(rec.Slot), userns); err != nil {
			return err
		}
	}
	if err := writeJSON(filepath.Join(d.bundle(), "config.json"), spec); err != nil {
		return err
	}
	pidFile := d.path("init.pid")
	logFile := d.path("runtime.log")
	os.Remove(logFile)
	// The runtime's stdio is inherited by PID 1, so it gets /dev/null and
	// reports its errors through --log.
	cmd := b.rt.command(ctx, true, b.rt.logFlag(logFile), "run", "--detach", "--bundle", d.bundle(), "--pid-file", pidFile, id)
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logFile)
		return fmt.Errorf("%s run: %w: %s", filepath.Base(b.rt.path), err, tail(out, 800))
	}
	pid, err := readPID(pidFile)
	if err != nil {
		return fmt.Errorf("sandbox init: %w", err)
	}
	st, err := processStartTime(pid)
	if err != nil {
		return fmt.Errorf("sandbox init: %w", err)
	}
	if err := writeJSON(d.run(), runRecord{PID: pid, StartTime: st}); err != nil {
		return err
	}
	if rec.Spec.Docker {
		if err := delegateCgroup(cgroupName(id, rec.Slot), int(slotUIDBase(rec.Slot))); err != nil {
			return fmt.Errorf("hand the cgroup to dockerd: %w", err)
		}
	}
	b.log.Debug("started sandbox", "sandbox", id, "rootfs", rootfsTime, "network", netTime, "runtime", time.Since(t2))
	rec.Started = true
	if err := writeJSON(d.record(), rec); err != nil {
		return err
	}
	b.weighParent()
	return nil
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("bad PID file %s", path)
	}
	return pid, nil
}

// tearDown removes everything a Sandbox set up to run: its processes and
// runtime state, its root filesystem mount, its network and cgroup. Its
// record, upper layer and Disks stay. Missing pieces are skipped, so it
// also clears what a crash left half made.
func (b *OCI) tearDown(ctx context.Context, id string, rec record) error {
	d := b.dir(id)
	var errs []error
	if err := b.rt.run(ctx, false, "delete", "--force", id); err != nil && b.rt.state(ctx, id) != "" {
		errs = append(errs, err)
	}
	removeCgroup(cgroupName(id, rec.Slot))
	if err := b.removeRootfs(rec.Slot); err != nil {
		errs = append(errs, err)
	}
	if err := unmountImages(d.images(rec)); err != nil {
		errs = append(errs, err)
	}
	if unlock, err := b.lockHost(); err != nil {
		errs = append(errs, err)
	} else {
		if err := tearDownNetwork(rec.Slot); err != nil {
			errs = append(errs, err)
		}
		b.setParentWeight()
		unlock()
	}
	for _, f := range []string{d.run(), d.path("init.pid")} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop kills the Sandbox's processes and keeps its disks.
func (b *OCI) Stop(ctx context.Context, id string) error {
	rec, unlock, err := b.lockSandbox(id)
	if err != nil {
		return err
	}
	defer unlock()
	if err := b.tearDown(ctx, id, rec); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	return nil
}

// Snapshot copies a stopped Sandbox's upper layer to dst, with its owners
// shifted from the Sandbox's uid range back to 0.. (see rootfs.go).
func (b *OCI) Snapshot(ctx context.Context, id, dst string) error {
	rec, unlock, err := b.lockSandbox(id)
	if err != nil {
		return err
	}
	defer unlock()
	if !filepath.IsAbs(dst) {
		return fmt.Errorf("snapshot %s to %q: not an absolute path: %w", id, dst, errdefs.ErrInvalid)
	}
	if exists(dst) {
		return fmt.Errorf("snapshot %s to %s: %w", id, dst, errdefs.ErrConflict)
	}
	var run runRecord
	if readJSON(b.dir(id).run(), &run) == nil && run.alive() {
		return fmt.Errorf("snapshot sandbox %s: %w", id, sandbox.ErrRunning)
	}
	tmp := dst + ".tmp-snapshot"
	os.RemoveAll(tmp)
	d := b.dir(id)
	err = withDisk(d, rec, func() error { return copyShifted(ctx, d.own(rec).upper(), tmp, slotUIDBase(rec.Slot)) })
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("snapshot sandbox %s: %w", id, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("snapshot sandbox %s: %w", id, err)
	}
	return nil
}

// makeDiskSubs makes each DiskBind's subdirectory. A Disk's contents are
// the Sandbox's to write, so whatever is at a subdirectory's name and is
// not a directory, such as a symlink out to the host, goes first: the
// runtime would follow it.
func makeDiskSubs(binds []sandbox.DiskBind, dir func(name string) string) error {
	for _, db := range binds {
		p := filepath.Join(dir(db.Disk), db.Sub)
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			continue
		} else if err == nil {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
		if err := os.Mkdir(p, 0o755); err != nil {
			return fmt.Errorf("disk %s: %w", db.Disk, err)
		}
	}
	return nil
}

// SetDiskBinds replaces a stopped Sandbox's DiskBinds in its record.
func (b *OCI) SetDiskBinds(ctx context.Context, id string, binds []sandbox.DiskBind) error {
	return b.setSpec(id, "disk binds", func(spec *sandbox.Spec) { spec.DiskBinds = slices.Clone(binds) })
}

// SetEgress sets a stopped Sandbox's RestrictEgress in its record.
func (b *OCI) SetEgress(ctx context.Context, id string, restrict bool) error {
	return b.setSpec(id, "egress", func(spec *sandbox.Spec) { spec.RestrictEgress = restrict })
}

// setSpec changes a stopped Sandbox's Spec in its record, for its next
// Start; what names the change in the error for a running one.
func (b *OCI) setSpec(id, what string, change func(*sandbox.Spec)) error {
	rec, unlock, err := b.lockSandbox(id)
	if err != nil {
		return err
	}
	defer unlock()
	var run runRecord
	if readJSON(b.dir(id).run(), &run) == nil && run.alive() {
		return fmt.Errorf("set the %s of sandbox %s: %w", what, id, sandbox.ErrRunning)
	}
	spec := rec.Spec
	change(&spec)
	if err := validate(spec); err != nil {
		return err
	}
	rec.Spec = spec
	return writeJSON(b.dir(id).record(), rec)
}

// egressFor returns the ports a restricted Sandbox's firewall sends it
// to, nil for an open one.
func (b *OCI) egressFor(restrict bool) *egressPorts {
	if !restrict {
		return nil
	}
	return &egressPorts{proxy: b.opts.EgressPort, dns: b.opts.EgressPort + 1}
}

// PruneDisk deletes the entries of a stopped Sandbox's Disk that keep
// refuses. Nothing is followed: a symlink the Sandbox put there goes
// itself.
func (b *OCI) PruneDisk(ctx context.Context, id, disk string, keep func(name string) bool) ([]sandbox.Pruned, error) {
	rec, unlock, err := b.lockSandbox(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	d := b.dir(id)
	var run runRecord
	if readJSON(d.run(), &run) == nil && run.alive() {
		return nil, fmt.Errorf("prune disk %s of sandbox %s: %w", disk, id, sandbox.ErrRunning)
	}
	if !slices.ContainsFunc(rec.Spec.Disks, func(dk sandbox.Disk) bool { return dk.Name == disk }) {
		return nil, fmt.Errorf("sandbox %s has no disk %q: %w", id, disk, sandbox.ErrNotFound)
	}
	var pruned []sandbox.Pruned
	err = withDisk(d, rec, func() error {
		dir := d.diskDir(rec, disk)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if keep(e.Name()) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			n := treeBytes(p)
			if err := removeTree(p); err != nil {
				return err
			}
			pruned = append(pruned, sandbox.Pruned{Name: e.Name(), Bytes: n})
		}
		return nil
	})
	if err != nil {
		return pruned, fmt.Errorf("prune disk %s of sandbox %s: %w", disk, id, err)
	}
	return pruned, nil
}

// WithDisks lends a stopped Sandbox's Disks, under its lock, their
// images mounted for the length of fn.
func (b *OCI) WithDisks(ctx context.Context, id string, fn func(disks map[string]string) error) error {
	rec, unlock, err := b.lockSandbox(id)
	if err != nil {
		return err
	}
	defer unlock()
	d := b.dir(id)
	var run runRecord
	if readJSON(d.run(), &run) == nil && run.alive() {
		return fmt.Errorf("lend the disks of sandbox %s: %w", id, sandbox.ErrRunning)
	}
	return withDisk(d, rec, func() error {
		disks := map[string]string{}
		for _, dk := range rec.Spec.Disks {
			disks[dk.Name] = d.diskDir(rec, dk.Name)
		}
		return fn(disks)
	})
}

// treeBytes is the disk a tree takes (its blocks, as du counts them),
// without following symlinks or crossing into another filesystem.
func treeBytes(root string) int64 {
	var n int64
	var dev uint64
	filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		var st unix.Stat_t
		if err != nil || unix.Lstat(p, &st) != nil {
			return nil
		}
		if p == root {
			dev = st.Dev
		} else if st.Dev != dev {
			return filepath.SkipDir
		}
		n += st.Blocks * 512
		return nil
	})
	return n
}

// Remove stops the Sandbox and deletes it with its disks and slot.
func (b *OCI) Remove(ctx context.Context, id string) error {
	rec, unlock, err := b.lockSandbox(id)
	if err != nil {
		return err
	}
	defer unlock()
	if err := b.tearDown(ctx, id, rec); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	return b.removeStopped(id, rec.Slot)
}

// RemoveKeepingDisks tears the Sandbox down, moves its Disks to dir, and
// deletes the rest as Remove does; the Sandbox's lock is held throughout,
// so no Start comes between. A Disk is a directory written through an
// idmapped mount, so its owners on the host are the Sandbox's own (0..)
// whatever its slot: it boots as it was in any other Sandbox.
func (b *OCI) RemoveKeepingDisks(ctx context.Context, id, dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("keep the disks of sandbox %s in %q: not an absolute path: %w", id, dir, errdefs.ErrInvalid)
	}
	rec, unlock, err := b.lockSandbox(id)
	if err != nil {
		return err
	}
	defer unlock()
	if err := b.tearDown(ctx, id, rec); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	d := b.dir(id)
	err = withDisk(d, rec, func() error {
		for _, dk := range rec.Spec.Disks {
			src, dst := d.diskDir(rec, dk.Name), filepath.Join(dir, dk.Name)
			switch {
			case !exists(src) && exists(dst):
				continue // moved by a call cut short
			case exists(dst):
				return fmt.Errorf("keep disk %s of sandbox %s: %s already exists: %w", dk.Name, id, dst, errdefs.ErrConflict)
			}
			// Out of a disk image, a copy (docs/performance.md).
			if err := moveTree(ctx, src, dst); err != nil {
				return fmt.Errorf("keep disk %s of sandbox %s: %w", dk.Name, id, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return b.removeStopped(id, rec.Slot)
}

// moveTree moves the tree src to dst, which must not exist: a rename, or,
// across filesystems, a copy keeping owners, modes, times, extended
// attributes and hard links (copyShifted, shifting nothing), then src
// removed.
func moveTree(ctx context.Context, src, dst string) error {
	err := os.Rename(src, dst)
	if !errors.Is(err, unix.EXDEV) {
		return err
	}
	tmp := dst + ".tmp-move"
	os.RemoveAll(tmp)
	if err := copyShifted(ctx, src, tmp, 0); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return removeTree(src)
}

// removeStopped deletes a torn-down Sandbox's directory and frees its slot.
func (b *OCI) removeStopped(id string, slot int) error {
	if err := removeTree(string(b.dir(id))); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	unlock, err := b.lockHost()
	if err != nil {
		return err
	}
	defer unlock()
	var owner slotOwner
	if readJSON(b.slotPath(slot), &owner) == nil && owner == b.owner(id) {
		b.freeSlot(slot, owner)
	} else {
		// A reconcile freed it once the directory went: the claim is
		// still this process's to drop.
		b.slots.release(slot, b.owner(id))
	}
	return nil
}

// Status reports one Sandbox.
func (b *OCI) Status(ctx context.Context, id string) (sandbox.Status, error) {
	if err := validID(id); err != nil {
		return sandbox.Status{}, err
	}
	var rec record
	if err := readJSON(b.dir(id).record(), &rec); err != nil || !rec.Complete {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return sandbox.Status{}, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
		}
		return sandbox.Status{}, err
	}
	return b.status(id, rec), nil
}

func (b *OCI) status(id string, rec record) sandbox.Status {
	st := sandbox.Status{ID: id, State: sandbox.StateCreated, Resources: rec.Given, Notes: append(slices.Clone(rec.Notes), rec.DiskNotes...)}
	st.Resources.DiskMiB = rec.DiskMiB
	_, st.Addr = slotAddrs(rec.Slot) // its end of the veth: the relay sees it as the source
	if rec.Started {
		st.State = sandbox.StateStopped
	}
	var run runRecord
	if readJSON(b.dir(id).run(), &run) == nil && run.alive() {
		st.State = sandbox.StateRunning
		st.OOMKills = b.cgroups.oomKills(cgroupName(id, rec.Slot))
		for i, im := range b.dir(id).images(rec) {
			used, full := diskUse(im.mount)
			if i == 0 {
				st.DiskUsedMiB = used
			}
			st.DiskFull = st.DiskFull || full
		}
	}
	return st
}

// List reports every finished Sandbox in the state directory.
func (b *OCI) List(ctx context.Context) ([]sandbox.Status, error) {
	entries, err := os.ReadDir(b.sandboxesDir())
	if err != nil {
		return nil, err
	}
	var out []sandbox.Status
	for _, e := range entries {
		var rec record
		if readJSON(b.dir(e.Name()).record(), &rec) != nil || !rec.Complete {
			continue
		}
		out = append(out, b.status(e.Name(), rec))
	}
	return out, nil
}

var (
	_ sandbox.Backend    = (*OCI)(nil)
	_ sandbox.DiskLender = (*OCI)(nil)
)

// DirName is the directory, under a Runner's sandboxes directory, of the
// backend on runtime: "oci" for crun (its name from before gVisor), "gvisor"
// for runsc. Each keeps its own Sandboxes: a Runner that changes backend
// does not see the other's.
func DirName(runtime string) string {
	if runtime == "runsc" {
		return "gvisor"
	}
	return "oci"
}
