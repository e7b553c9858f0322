package oci

import (
	"os/exec"
	"syscall"
	"testing"

	"kndl.dev/kndl/internal/testenv"
)

// TestAKilledProcessIsNotAliveBeforeItIsReaped: a Sandbox's PID 1 killed
// stays in /proc, a zombie until its parent reaps it; Status and Exec
// must see it stopped from its kill on, not from its reaping.
func TestAKilledProcessIsNotAliveBeforeItIsReaped(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	st, err := processStartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	r := runRecord{PID: pid, StartTime: st}
	if !r.alive() {
		t.Fatal("a running process is not alive")
	}
	if (runRecord{PID: pid, StartTime: st + 1}).alive() {
		t.Error("another start time's process is alive")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitShort, "the killed process a zombie", func() bool {
		f, err := procStat(pid)
		return err == nil && f[0] == "Z"
	})
	if r.alive() {
		t.Error("a killed process not yet reaped is alive")
	}
}
