package testkit

import (
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// StartTied starts cmd as cmd.Start does, tied to this process: when this
// process dies (a test binary killed at its timeout, or by hand), the
// kernel sends cmd SIGKILL (PR_SET_PDEATHSIG). A kndl dev or kndl runner a
// test started then goes with it rather than running on unowned; what it
// leaves on purpose (its Sandboxes) is oci.ReapTests's and kndl runner
// gc's.
//
// The signal comes when the thread that forked cmd ends, not the process
// (prctl(2)), and the Go runtime ends a thread when a goroutine locked to
// it exits, as the Runner's network namespace switches do. So cmd is
// forked from a goroutine locked to its thread until cmd has exited.
func StartTied(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			WaitExited(cmd.Process.Pid)
		}
	}()
	return <-started
}

// WaitExited returns once the process pid has exited, all its threads
// (and so its files closed), whether or not its parent has waited for it
// yet, or at once if it is gone.
func WaitExited(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	for {
		// A pidfd is readable once its process has exited.
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if n > 0 || (err != nil && err != unix.EINTR) {
			return
		}
	}
}
