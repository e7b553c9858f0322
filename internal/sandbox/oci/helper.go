package oci

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/idleheap"
	"kndl.dev/kndl/internal/inithost"
	"kndl.dev/kndl/internal/mod"
)

// initHookDoor is init's flag naming the relay the hook door forwards to.
const initHookDoor = "--hook-door"

// helperArg is the hidden first argument that turns the kndl binary (or a
// test binary) into one of the backend's helpers. cmd/kndl must call
// RunHelper before anything else.
const helperArg = "__kndl-oci"

// The helpers.
const (
	// helperInit is PID 1 in every Sandbox: it reaps orphans, serves the
	// mod's hook door on the Sandbox's loopback, runs the helpers handed to
	// it (inithost), and keeps the Sandbox up until it is told to stop.
	helperInit = "init"
	// helperUserns sits in a fresh user namespace until its stdin closes,
	// so its namespace can be used to idmap the root filesystem's layers.
	helperUserns = "userns"
	// helperRuntime runs the OCI runtime with the cgroup v2 mount of a
	// hybrid host hidden (see runtimeNeedsHiddenUnified).
	helperRuntime = "runtime"
)

// RunHelper runs the helper named by args if args (os.Args) asks for one,
// and reports its exit code. hosted are the jobs a Sandbox's init runs for
// the commands that hand it their stdio (the kndl binary's; a test
// binary's init, with nil, runs none and its commands run them
// themselves). The kndl binary and any test binary that makes an oci
// backend must start with:
//
//	if code, ok := oci.RunHelper(os.Args, nil); ok {
//		os.Exit(code)
//	}
func RunHelper(args []string, hosted inithost.Jobs) (code int, ok bool) {
	if len(args) < 3 || args[1] != helperArg {
		return 0, false
	}
	switch args[2] {
	case helperInit:
		return runInit(args[3:], hosted), true
	case helperUserns:
		// Block until the backend has opened our namespace and closes stdin.
		io.Copy(io.Discard, os.Stdin)
		return 0, true
	case helperRuntime:
		return runRuntime(args[3:]), true
	}
	fmt.Fprintf(os.Stderr, "kndl: unknown sandbox helper %q\n", args[2])
	return 2, true
}

// runInit is a Sandbox's PID 1. Orphans are re-parented to it, so it reaps
// them; SIGTERM ends it, and with it every process of the Sandbox. It
// ignores the signals a terminal sends. With args `--hook-door RELAY` it
// serves the mod's hook door (mod.ServeDoor) to the relay at RELAY
// (host:port), listening before anything else runs in the Sandbox: the
// process that is there from the Sandbox's boot to its stop, and through a
// Runner's restart, costs no process start per hook event and no process
// of its own. It runs the hosted jobs its commands hand it (inithost) for
// the same reason: one Go runtime's memory in an idle Sandbox, not one a
// helper (BenchmarkIdleHelpersMemory).
func runInit(args []string, hosted inithost.Jobs) int {
	if hosted != nil {
		// Not there, each command runs its job itself, as before.
		if l, err := inithost.Listen(inithost.Socket); err != nil {
			fmt.Fprintf(os.Stderr, "kndl init: the helpers' socket: %v\n", err)
		} else {
			go inithost.Serve(context.Background(), l, hosted) // until the Sandbox stops
		}
	}
	if len(args) == 2 && args[0] == initHookDoor {
		if ln, err := net.Listen("tcp", mod.DoorAddr); err != nil {
			fmt.Fprintf(os.Stderr, "kndl init: the hook door: %v\n", err)
		} else {
			go mod.ServeDoor(context.Background(), ln, args[1]) // until the Sandbox stops
		}
	}
	idleheap.Trim()
	// SIGPIPE too: a hosted job writing to a Runner gone gets EPIPE, and
	// Go would end a process whose fd 1 or 2 it was.
	signal.Ignore(unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGPIPE)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM)
	for s := range sigs {
		switch s {
		case unix.SIGCHLD:
			for {
				pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		case unix.SIGTERM:
			return 0
		}
	}
	return 0
}

// runRuntime execs the OCI runtime (args[0], then its arguments) in a
// private mount namespace where /sys/fs/cgroup/unified is unmounted. crun
// 1.8 refuses hybrid cgroups ("cgroups in hybrid mode not supported, drop all
// controllers from cgroupv2"), even with --cgroup-manager=disabled; hidden,
// it sees pure v1 and applies v1 limits (measured on this project's hosts,
// notes/sandbox.md). The mount namespace is per thread until execve, which
// keeps the calling thread's.
func runRuntime(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "kndl: runtime helper needs a command")
		return 2
	}
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		fmt.Fprintf(os.Stderr, "kndl: unshare mount namespace: %v\n", err)
		return 1
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		fmt.Fprintf(os.Stderr, "kndl: make mounts slave: %v\n", err)
		return 1
	}
	if err := unix.Unmount(unifiedMount, unix.MNT_DETACH); err != nil {
		fmt.Fprintf(os.Stderr, "kndl: hide %s: %v\n", unifiedMount, err)
		return 1
	}
	err := syscall.Exec(args[0], args, os.Environ())
	fmt.Fprintf(os.Stderr, "kndl: exec %s: %v\n", args[0], err)
	return 1
}
