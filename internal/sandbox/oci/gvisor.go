package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/sandbox"
)

// The gvisor backend is this backend with runsc as its runtime: the same
// root filesystems, slots, networks, firewall, Disks and records, and a
// second kernel (gVisor's Sentry, on the systrap platform, which needs no
// virtualization) between a Sandbox's processes and the host's. What
// differs from crun is here, measured with runsc built from
// gvisor.dev/gvisor at gvisor.Version:
//
//   - runsc's own network stack runs on the Sandbox's veth namespace
//     (--network=sandbox, named in config.json): the relay, the firewall
//     and the addresses are those of crun's Sandboxes.
//   - --overlay2=none: runsc would otherwise put a memory-backed overlay over
//     the root filesystem, and a Sandbox's writes would never reach its
//     upper layer (Stop, Snapshot and Disks rely on them being there).
//   - Idmapped binds are made by the backend, on the host, and runsc is
//     given plain binds of them (idmapbinds.go): runsc knows no "idmap"
//     option, and its own way (a mount's uid and gid maps) costs a process
//     start a mount.
//   - No seccomp filter in config.json: runsc applies the OCI one only with
//     --oci-seccomp, and inside gVisor a system call reaches the Sentry,
//     not the host; the Sentry's own filter is what bounds the host calls.
//   - An Exec's terminal is made here and handed to `runsc exec` as its
//     stdio (runsc has no console socket without --detach, and --detach
//     would read the process description twice), and an Exec is killed
//     through `runsc kill --pid` with its pid inside the Sandbox: it has no
//     host process of its own.
//   - cgroup limits are set by runsc on the Sandbox's whole sandbox process
//     tree, on v1, v2 and hybrid hosts alike.

// gvisorNoDocker is why a gVisor Sandbox runs no Docker yet. Measured with
// runsc at gvisor.Version and Debian 12's docker.io (runsc run of a bundle
// of the Docker test rootfs, --overlay2=none, /var/lib/docker a bind
// mount): dockerd, runc and overlay2 work inside the Sentry once the
// process holds every capability, /sys/fs/cgroup is mounted and runsc has
// --net-raw, and a bridge container and a port published through
// docker-proxy work with dockerd --iptables=false. Docker's own iptables
// do not: Debian's iptables-nft finds no nf_tables ("Protocol not
// supported") and iptables-legacy no MASQUERADE target, so a bridge
// container has no NAT and reaches nothing outside the Sandbox. A Docker
// profile for gVisor would need a runsc flag per Sandbox (--net-raw), its
// own capability set and dockerd flags of its own: not made yet.
const gvisorNoDocker = "Docker in a Sandbox needs the crun backend, and this Runner runs gVisor (runsc): set RUNNER_SANDBOX_BACKEND=crun on the Runner, or turn Docker off in the Repo's Environment"

// runscFlags go before every runsc subcommand. sharedRoot holds what runsc
// shares across its Sandboxes: the empty network namespace its gofers join
// (pinNullNetns). runsc's other defaults are kept: --directfs and
// --file-access=exclusive are already on, and with
// --systrap-disable-syscall-patching a Start was no faster and short
// processes only maybe faster (docs/performance.md). What a Start spent
// building seccomp programs is cut in the build instead (scripts/build-runsc).
func runscFlags(sharedRoot string) []string {
	return []string{"--platform=systrap", "--network=sandbox", "--overlay2=none", "--shared-root=" + sharedRoot}
}

// pinNullNetns makes the empty network namespace every runsc gofer joins,
// bind-mounted at sharedRoot/null-netns, unless one is there. runsc would
// make it at the first Sandbox's start; made here, by the backend, it is
// there from New on, host-wide, like the relay address. Sharing it saves
// a new network namespace per Start (measured: about 40 ms of 186).
func pinNullNetns(sharedRoot string) error {
	path := filepath.Join(sharedRoot, "null-netns")
	var st unix.Statfs_t
	if unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC {
		return nil
	}
	if err := os.MkdirAll(sharedRoot, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		// The thread that made the namespace is in it: it is never
		// unlocked, so it ends with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("make runsc's empty network namespace: %w", err)
			return
		}
		err := unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "", unix.MS_BIND, "")
		if err != nil {
			err = fmt.Errorf("pin runsc's empty network namespace at %s: %w", path, err)
		}
		errc <- err
	}()
	return <-errc
}

// gvisorSpec turns crun's config.json into runsc's (see above); its
// idmapped binds are made at Start (attachIdmapped).
func gvisorSpec(spec *specs.Spec) {
	spec.Linux.Seccomp = nil
}

// openPTY makes a terminal of size ws: its master, for the backend, and its
// replica, for `runsc exec` to hand the process as its stdio.
func openPTY(ws sandbox.WinSize) (master, replica *os.File, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open a terminal: %w", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(m)
		return nil, nil, fmt.Errorf("unlock the terminal: %w", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		unix.Close(m)
		return nil, nil, fmt.Errorf("find the terminal's replica: %w", err)
	}
	r, err := unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(m)
		return nil, nil, fmt.Errorf("open the terminal's replica: %w", err)
	}
	if err := unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols}); err != nil {
		unix.Close(m)
		unix.Close(r)
		return nil, nil, err
	}
	// Non-blocking, so the os.File uses the poller and reads can end.
	unix.SetNonblock(m, true)
	return os.NewFile(uintptr(m), "pty"), os.NewFile(uintptr(r), "pty-replica"), nil
}

// runscKill sends SIGKILL to the process with pid inside Sandbox id and to
// the rest of its process group, as hostKill does on crun: runsc's exec
// starts each process as the leader of a session of its own (the Sentry's
// task_start.go: no parent, so a new session), whose group id is its pid
// and holds what it started unless that left. `kill --pid` alone left a
// timed-out check's children running.
func (r ociRuntime) runscKill(id string, pid int) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitDelay)
	defer cancel()
	err := r.run(ctx, false, "kill", "--pgid", strconv.Itoa(pid), id, "KILL")
	if err != nil && strings.Contains(err.Error(), "no such process") {
		return nil
	}
	return err
}

// GVisorNotSupported are the conformance suite's subtests (sandboxtest) the
// gvisor backend cannot pass, each with why: what a Sandbox on gVisor does
// differently from one on crun.
var GVisorNotSupported = map[string]error{
	// The memory limit is the cgroup of the whole sandbox (the Sentry and
	// its memory), and gVisor has no OOM killer of its own: past the
	// limit, the host kills the Sentry, and the Sandbox stops whole.
	"KilledPastMemoryLimit/SandboxRunsOn": fmt.Errorf("gvisor: a Sandbox past its memory limit stops whole (the host's OOM killer ends gVisor's Sentry), not just the process that went past it: %w", sandbox.ErrNotSupported),
	// An Exec's terminal is a host terminal handed into the Sandbox: its
	// processes see it as a terminal (isatty, its size, resizes; tmux
	// attaches to it), but it has no name under /dev/pts, so `tty` and
	// ttyname fail.
	"TerminalAndResize/NamedUnderDevPts": fmt.Errorf("gvisor: an Exec's terminal is a host terminal with no name under /dev/pts in the Sandbox (`tty` says \"not a tty\"; isatty, sizes and tmux work): %w", sandbox.ErrNotSupported),
}
