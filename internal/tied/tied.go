// Package tied starts a child process that the kernel kills when this one
// dies (PR_SET_PDEATHSIG), and keeps that from happening any earlier.
package tied

import (
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start starts cmd as cmd.Start does, tied to this process: when this
// process dies, the kernel sends cmd SIGKILL (PR_SET_PDEATHSIG). A
// confined task or a namespace helper of the Runner's, or a kndl dev a test
// started, then goes with it rather than running on unowned.
//
// The signal comes when the thread that forked cmd ends, not the process
// (prctl(2)), and the Go runtime ends a thread when a goroutine locked to
// it exits, as the Runner's network namespace switches do: a Changes task
// forked from a thread a Sandbox's start then took and ended was killed
// mid-way. So cmd is forked from a goroutine locked to its thread until
// cmd has exited.
func Start(cmd *exec.Cmd) error {
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
