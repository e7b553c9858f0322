package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/sandbox"
)

// initPath is where the kndl binary is bound, read-only, in every Sandbox,
// to run as its PID 1. It lives in the Sandbox's /dev (a tmpfs the runtime
// makes) so that it is never written into the Sandbox's upper layer.
const initPath = "/dev/.kndl-init"

// sandboxPath is PATH for a Sandbox's PID 1 and for finding an Exec's
// program when its Env has no PATH.
const sandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// initArgs run the binary at initPath as a Sandbox's PID 1 (runInit).
var initArgs = []string{initPath, helperArg, helperInit}

// runtimeHelper runs this binary as the runtime helper (runRuntime).
var runtimeHelper = []string{"/proc/self/exe", helperArg, helperRuntime}

// initEnv is a Sandbox's PID 1's whole environment. GOMAXPROCS=1: init's
// goroutines (the hook door, the hosted jobs) are light and mostly wait;
// with one P its runtime spins no idle thread looking for work each time
// one wakes. A Session's init had spent 67 CPU-ms by its first tool's
// result so, 78 with the host's two Ps (docs/performance.md). Nothing init
// starts inherits its environment.
var initEnv = []string{"PATH=" + sandboxPath, "GOMAXPROCS=1"}

// runtimeEnv is the whole environment of every runtime process: the
// Runner's own environment (its token among it) is never passed on.
var runtimeEnv = []string{"PATH=" + sandboxPath}

// capabilities are what a Sandbox's root holds, within its own user
// namespace: the container runtimes' usual default set (Docker's, less
// NET_RAW and MKNOD, which a user namespace cannot use on the host's
// network namespace and devices anyway). Everything else is dropped.
var capabilities = []string{
	"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP",
	"CAP_SETUID", "CAP_SYS_CHROOT",
}

// dockerCapabilities are a Docker Sandbox's, all over its own user
// namespace: dockerd, containerd and runc mount and make namespaces
// (SYS_ADMIN) and set up their containers' networks (NET_ADMIN), and runc
// gives each container Docker's default set, which has NET_RAW and MKNOD:
// without them in the Sandbox's bounding set no container starts
// (measured: "unable to apply caps"). No more is needed (measured:
// TestDockerInASandbox passes with these alone).
var dockerCapabilities = append(slices.Clone(capabilities),
	"CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_MKNOD")

// sandboxCapabilities are what spec's processes hold.
func sandboxCapabilities(spec sandbox.Spec) []string {
	if spec.Docker {
		return dockerCapabilities
	}
	return capabilities
}

// ociVersion is the runtime-spec version of config.json: crun 1.8 refuses
// newer ones ("unknown version specified").
const ociVersion = "1.0.2"

// nofile is every Sandbox process's open-file limit, as Docker gives, or
// the Runner's own hard limit if lower: inside its user namespace the
// runtime cannot raise it.
var nofile = func() uint64 {
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) == nil && l.Max < 1<<20 {
		return l.Max
	}
	return 1 << 20
}()

// ociRuntime runs the OCI runtime binary: crun, or gVisor's runsc.
type ociRuntime struct {
	path string
	root string
	// gvisor says the runtime is runsc (gvisor.go says what differs).
	gvisor bool
	// flags go before every subcommand (runscFlags).
	flags []string
	// hideUnified runs create through the runtime helper (runRuntime).
	hideUnified bool
}

// command returns the runtime with args; create-like commands go through
// the helper on hybrid hosts.
func (r ociRuntime) command(ctx context.Context, create bool, args ...string) *exec.Cmd {
	full := append(append([]string{"--root", r.root}, r.flags...), args...)
	var cmd *exec.Cmd
	if create && r.hideUnified {
		cmd = exec.CommandContext(ctx, runtimeHelper[0], append(append(slices.Clone(runtimeHelper[1:]), r.path), full...)...)
	} else {
		cmd = exec.CommandContext(ctx, r.path, full...)
	}
	cmd.Env = runtimeEnv
	// A session of its own: what the runtime starts (a Sandbox's PID 1, an
	// Exec) must not get the signals of the Runner's terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// run runs the runtime and returns its error with the end of its output.
func (r ociRuntime) run(ctx context.Context, create bool, args ...string) error {
	cmd := r.command(ctx, create, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", path.Base(r.path), args[0], err, tail(out, 800))
	}
	return nil
}

// state asks the runtime for a container's status ("created", "running",
// "stopped"); "" if it has none.
func (r ociRuntime) state(ctx context.Context, id string) string {
	out, err := r.command(ctx, false, "state", id).Output()
	if err != nil {
		return ""
	}
	var s specs.State
	if json.Unmarshal(out, &s) != nil {
		return ""
	}
	return string(s.Status)
}

// logFlag is the global flag that sends the runtime's own log to path.
func (r ociRuntime) logFlag(path string) string {
	if r.gvisor {
		return "--log=" + path
	}
	return "--log=file:" + path
}

// list returns the ids of the runtime's containers.
func (r ociRuntime) list(ctx context.Context) ([]string, error) {
	out, err := r.command(ctx, false, "list", "--quiet").Output()
	if err != nil {
		return nil, fmt.Errorf("%s list: %w", path.Base(r.path), err)
	}
	return strings.Fields(string(out)), nil
}

func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// sandboxProcess is the runtime's description of one process: PID 1 or an
// Exec. Every process gets the same capabilities, limits and
// no_new_privs; its environment is only ever given through a pipe.
func sandboxProcess(args, env []string, cwd string, uid, gid uint32, groups []uint32, caps []string) *specs.Process {
	return &specs.Process{
		User: specs.User{UID: uid, GID: gid, AdditionalGids: groups},
		Args: args,
		Env:  env,
		Cwd:  cwd,
		Capabilities: &specs.LinuxCapabilities{
			Bounding: caps, Effective: caps, Permitted: caps,
		},
		Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: nofile, Soft: nofile}},
		NoNewPrivileges: true,
	}
}

// runtimeSpec is a Sandbox's config.json. Nothing in it is secret.
func (b *OCI) runtimeSpec(id string, rec record, dir sandboxDir) *specs.Spec {
	base := slotUIDBase(rec.Slot)
	idmap := []specs.LinuxIDMapping{{ContainerID: 0, HostID: base, Size: uidRange}}
	hostname := rec.Spec.Hostname
	if hostname == "" {
		hostname = id
	}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: cgroupMountOptions(rec.Spec)},
		{Destination: initPath, Type: "bind", Source: b.opts.InitPath, Options: []string{"bind", "ro", "nosuid", "nodev"}},
	}
	// Files the backend writes for the Sandbox are owned by host root and
	// idmapped, so the Sandbox's root owns them; so are Disks and Binds.
	for _, f := range []string{"hosts", "resolv.conf", "hostname"} {
		mounts = append(mounts, specs.Mount{Destination: "/etc/" + f, Type: "bind", Source: dir.etc(f),
			Options: []string{"rbind", "idmap", "nosuid", "nodev"}})
	}
	for _, d := range rec.Spec.Disks {
		mounts = append(mounts, specs.Mount{Destination: d.Target, Type: "bind", Source: dir.diskDir(rec, d.Name),
			Options: []string{"rbind", "idmap", "nosuid", "nodev"}})
	}
	for _, bd := range rec.Spec.Binds {
		opts := []string{"rbind", "idmap", "nosuid", "nodev"}
		if bd.ReadOnly {
			opts = append(opts, "ro")
		}
		mounts = append(mounts, specs.Mount{Destination: bd.Target, Type: "bind", Source: bd.Source, Options: opts})
	}
	// After the Binds, parents before children, as a DiskBind may sit in
	// a Bind or in another DiskBind.
	diskBinds := slices.Clone(rec.Spec.DiskBinds)
	slices.SortFunc(diskBinds, func(a, b sandbox.DiskBind) int { return strings.Compare(a.Target, b.Target) })
	for _, db := range diskBinds {
		mounts = append(mounts, specs.Mount{Destination: db.Target, Type: "bind", Source: filepath.Join(dir.diskDir(rec, db.Disk), db.Sub),
			Options: []string{"rbind", "idmap", "nosuid", "nodev"}})
	}
	for _, t := range rec.Spec.Tmpfs {
		mode := t.Mode.Perm()
		if mode == 0 {
			mode = 0o755
		}
		mounts = append(mounts, specs.Mount{Destination: t.Target, Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "nodev", "mode=" + strconv.FormatUint(uint64(mode), 8)}})
	}

	res := &specs.LinuxResources{
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
	}
	if b.cgroups.memory && rec.Given.MemoryMiB > 0 {
		limit := int64(rec.Given.MemoryMiB) << 20
		res.Memory = &specs.LinuxMemory{Limit: &limit}
		if b.cgroups.swap {
			res.Memory.Swap = &limit // memory+swap: no swap on top
		}
	}
	if b.cgroups.cpu && rec.Given.CPUs > 0 {
		period := uint64(100000)
		quota := int64(math.Round(rec.Given.CPUs * float64(period)))
		res.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}
	if b.cgroups.pids {
		limit := int64(pidsLimit)
		res.Pids = &specs.LinuxPids{Limit: &limit}
	}

	userns := specs.LinuxNamespace{Type: specs.UserNamespace}
	if rec.Spec.Docker {
		// The user namespace that owns the network namespace, joined.
		userns.Path = usernsPath(rec.Slot)
	}
	namespaces := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
		{Type: specs.MountNamespace}, userns, {Type: specs.CgroupNamespace},
		{Type: specs.NetworkNamespace, Path: netnsPath(rec.Slot)},
	}

	spec := &specs.Spec{
		Version:  ociVersion,
		Process:  sandboxProcess(append(slices.Clone(initArgs), initHookDoor, b.relay.String()), initEnv, "/", 0, 0, nil, sandboxCapabilities(rec.Spec)),
		Root:     &specs.Root{Path: b.rootfsDir(rec.Slot)},
		Hostname: hostname,
		Mounts:   mounts,
		Linux: &specs.Linux{
			UIDMappings: idmap,
			GIDMappings: idmap,
			CgroupsPath: "/" + cgroupParent + "/" + cgroupName(id, rec.Slot),
			Resources:   res,
			Namespaces:  namespaces,
			Seccomp:     seccompProfile(rec.Spec.Docker),
			// The runtime's usual masks, and the network part of /sys: a
			// user namespace cannot mount a sysfs for a network namespace
			// the host owns, so the runtime binds the host's, whose
			// interfaces (other Sandboxes' veths among them) are none of
			// the Sandbox's business.
			MaskedPaths: []string{
				"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
				"/sys/class/net", "/sys/devices/virtual/net",
			},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	if b.rt.gvisor {
		gvisorSpec(spec)
	}
	return spec
}

// cgroupMountOptions: a Docker Sandbox's cgroups are writable, for dockerd
// to make its containers' below the Sandbox's own.
func cgroupMountOptions(spec sandbox.Spec) []string {
	opts := []string{"nosuid", "noexec", "nodev", "relatime"}
	if !spec.Docker {
		opts = append(opts, "ro")
	}
	return opts
}

// cgroupName is a Sandbox's cgroup under cgroupParent: unique on the host
// through the slot, readable through the id.
func cgroupName(id string, slot int) string { return id + "-" + strconv.Itoa(slot) }

func slotUIDBase(slot int) uint32 { return uint32(uidBase + slot*uidRange) }
