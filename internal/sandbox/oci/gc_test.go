package oci

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// sandboxOwner, set in a process's environment to "<slots dir> <state
// dir> <relay port> <base layer>", makes the test binary a process of its
// own that makes a backend over the state directory, creates and starts
// the Sandbox "orphan" from the base layer, prints its slot, and waits
// to be killed. With no base layer (no root or crun here) it registers
// as the directory's owner and claims a slot for a Sandbox record
// instead, as a backend does.
const sandboxOwner = "KNDL_TEST_OWN_SANDBOX"

// OwnSandboxIfAsked runs the Sandbox owner when the environment asks for
// one (TestMain calls it).
func OwnSandboxIfAsked() (int, bool) {
	args := strings.Fields(os.Getenv(sandboxOwner))
	if len(args) < 3 {
		return 0, false
	}
	slotsDir, stateDir := args[0], args[1]
	port, _ := strconv.Atoi(args[2])
	ctx := context.Background()
	opts := Options{StateDir: stateDir, SlotsDir: slotsDir, RelayPort: uint16(port), Logger: slog.New(slog.DiscardHandler)}
	var slot int
	var err error
	if len(args) == 4 {
		var b *OCI
		if b, err = New(ctx, opts); err == nil {
			err = b.Create(ctx, sandbox.Spec{ID: "orphan", Layers: []string{args[3]}})
		}
		if err == nil {
			err = b.Start(ctx, "orphan")
		}
		if err == nil {
			slot = b.slotOf("orphan")
		}
	} else {
		os.MkdirAll(filepath.Join(stateDir, "sandboxes", "orphan"), 0o700)
		os.WriteFile(filepath.Join(stateDir, "sandboxes", "orphan", "sandbox.json"), []byte(`{"Complete":true}`), 0o600)
		if err = register(opts, opts.Logger); err == nil {
			slot, err = newHostSlots(slotsDir).claimFirst(slotOwner{stateDir, "orphan"}, never)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	fmt.Println(slot)
	io.Copy(io.Discard, os.Stdin) // hold until killed
	return 0, true
}

// TestTheSandboxesOfAProcessKilledMidTestAreReaped: a test process that
// starts a Sandbox and is killed with SIGKILL leaves it running, its slot
// claimed; while it lived, Orphans left it alone, and once it is gone
// they name the Sandbox, its slot and its owner, and ReapTests' reap
// stops and removes it and frees its slot. Without root and crun (but
// under CI, where their lack fails), a registered claim of a real
// process stands for the Sandbox, and only the listing is checked.
func TestTheSandboxesOfAProcessKilledMidTestAreReaped(t *testing.T) {
	if testenv.Strict() {
		testenv.RequireRoot(t)
		testenv.RequireCommand(t, "crun")
	}
	_, crunErr := exec.LookPath("crun")
	real := os.Geteuid() == 0 && crunErr == nil
	stateDir := filepath.Join(t.TempDir(), "state")
	env := fmt.Sprintf("%s=%s %s %d", sandboxOwner, DefaultSlotsDir, stateDir, 7397)
	slotsDir := DefaultSlotsDir
	if real {
		env += " " + testkit.Rootfs(t)
	} else {
		t.Log("no root or no crun: a registered claim of a real process stands for a Sandbox, and nothing is reaped")
		slotsDir = t.TempDir()
		env = fmt.Sprintf("%s=%s %s %d", sandboxOwner, slotsDir, stateDir, 7397)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe)
	child.Env, child.Stderr = append(os.Environ(), env), os.Stderr
	in, _ := child.StdinPipe()
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	slot, convErr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || convErr != nil {
		t.Fatalf("the child printed %q, %v; want its Sandbox's slot", line, err)
	}
	if real {
		t.Cleanup(func() { // if the reap failed
			if b, err := New(context.Background(), Options{StateDir: stateDir, RelayPort: 7397, Logger: slog.New(slog.DiscardHandler)}); err == nil {
				b.Remove(context.Background(), "orphan")
			}
		})
	}

	if o := orphanOf(t, slotsDir, stateDir); o != nil {
		t.Fatalf("while its owner runs: got the orphan %+v, want none", *o)
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()

	o := orphanOf(t, slotsDir, stateDir)
	if o == nil {
		t.Fatal("once its owner is killed: got no orphan, want its state directory")
	}
	if o.Owner.PID != child.Process.Pid || !o.Owner.Test || o.Owner.Since.IsZero() {
		t.Errorf("its owner: got %+v, want the killed test process %d", o.Owner, child.Process.Pid)
	}
	if len(o.Sandboxes) != 1 || o.Sandboxes[0].ID != "orphan" || o.Sandboxes[0].Slot != slot || o.Sandboxes[0].Running != real || o.Sandboxes[0].Since.IsZero() {
		t.Fatalf("its Sandboxes: got %+v, want the Sandbox orphan on slot %d, running %v", o.Sandboxes, slot, real)
	}
	if !real {
		letGo(stateDir)
		return
	}
	var run runRecord
	readJSON(filepath.Join(stateDir, "sandboxes", "orphan", "run.json"), &run)
	if err := o.reap(context.Background(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("reap: %v", err)
	}
	// Killed, it is gone once its parent (the host's init, since its
	// owner died) has reaped it; a zombie runs nothing.
	testenv.Eventually(t, testenv.WaitShort, fmt.Sprintf("the Sandbox's PID 1 (%d) still runs after the reap", run.PID), func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", run.PID))
		_, after, _ := strings.Cut(string(stat), ") ")
		return !run.alive() || err != nil || strings.HasPrefix(after, "Z")
	})
	if exists(filepath.Join(stateDir, "sandboxes", "orphan")) {
		t.Error("the Sandbox's directory is still there after the reap")
	}
	// What a reap leaves stays the dead owner's, for the next one.
	var after Owner
	if readJSON(ownerFile(stateDir), &after); after.PID != child.Process.Pid || !after.Test {
		t.Errorf("the owner after the reap: got %+v, want still the killed test process %d", after, child.Process.Pid)
	}
	if o := orphanOf(t, slotsDir, stateDir); o != nil {
		t.Errorf("after the reap: got the orphan %+v, want none", *o)
	}
	var claim slotOwner
	if readJSON(newHostSlots(slotsDir).path(slot), &claim); claim.StateDir == stateDir {
		t.Errorf("slot %d's claim still names the reaped Sandbox: %+v", slot, claim)
	}
}

// orphanOf lists the Orphans in slotsDir and returns stateDir's, taken
// over as ReapTests takes it, letting the others go.
func orphanOf(t *testing.T, slotsDir, stateDir string) *Orphan {
	t.Helper()
	orphans, err := Orphans(slotsDir)
	if err != nil {
		t.Fatal(err)
	}
	var mine *Orphan
	for _, o := range orphans {
		if o.StateDir == stateDir {
			mine = &o
			continue
		}
		letGo(o.StateDir)
	}
	return mine
}
