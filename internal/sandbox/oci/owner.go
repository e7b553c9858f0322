package oci

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Owner is the process a state directory's Sandboxes are registered
// under: the last to make a backend over it (New). While it lives it
// holds a shared flock on <StateDir>/owner.lock, so a process that takes
// the lock exclusively knows no process has a backend over the
// directory any more (Orphans); owner.json says who it was.
type Owner struct {
	PID int
	// Start is its start time (processStartTime), which tells it from a
	// later process with the same PID.
	Start uint64
	// Since is when it registered.
	Since time.Time
	// Command is its executable's name: "kndl", or a test binary's, such
	// as "oci.test".
	Command string
	// Test is set for a go test binary (testing.Testing): the next test
	// run reaps its Sandboxes once it is gone (ReapTests).
	Test bool
	// The options a later process makes a backend over the directory
	// with, to remove what it left (Orphan.Open).
	Runtime     string
	RuntimePath string
	HostDir     string
	SlotsDir    string
	RelayIP     netip.Addr
	RelayPort   uint16
	EgressPort  uint16
}

// registered holds this process's lock on each state directory it
// registered under or took over, for the process's life: closed (the
// collector closes an unreachable file), the lock would go while its
// Sandboxes run.
var registered struct {
	sync.Mutex
	m map[string]heldDir
}

// heldDir is this process's lock on a state directory, and whether it
// took the directory over (takeOver) rather than registered under it.
type heldDir struct {
	f        *os.File
	tookOver bool
}

func ownerLock(stateDir string) string { return filepath.Join(stateDir, "owner.lock") }
func ownerFile(stateDir string) string { return filepath.Join(stateDir, "owner.json") }

// register makes this process the owner of o.StateDir. A process taking
// the directory over (kndl runner gc, Orphan.Open) holds its lock
// exclusively while it removes what the last owner left: register waits
// for it, and says so. The process that took it over registers nothing:
// what it leaves stays the dead owner's, for the next gc or ReapTests.
func register(o Options, log *slog.Logger) error {
	registered.Lock()
	defer registered.Unlock()
	if registered.m == nil {
		registered.m = map[string]heldDir{}
	}
	if h, ok := registered.m[o.StateDir]; ok && h.tookOver {
		return nil
	} else if !ok {
		f, err := lockFile(ownerLock(o.StateDir), unix.LOCK_SH|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			log.Warn("waiting for the process that removes what an earlier owner of the sandbox state directory left (kndl runner gc)", "dir", o.StateDir)
			f, err = lockFile(ownerLock(o.StateDir), unix.LOCK_SH)
		}
		if err != nil {
			return fmt.Errorf("register as the owner of %s: %w", o.StateDir, err)
		}
		registered.m[o.StateDir] = heldDir{f: f}
	}
	pid := os.Getpid()
	start, err := processStartTime(pid)
	if err != nil {
		return fmt.Errorf("register as the owner of %s: %w", o.StateDir, err)
	}
	return writeJSON(ownerFile(o.StateDir), Owner{PID: pid, Start: start, Since: time.Now().UTC(), Command: filepath.Base(os.Args[0]),
		Test: testing.Testing(), Runtime: o.Runtime, RuntimePath: o.RuntimePath, HostDir: o.HostDir, SlotsDir: o.SlotsDir,
		RelayIP: o.RelayIP, RelayPort: o.RelayPort, EgressPort: o.EgressPort})
}

// takeOver takes stateDir's lock exclusively if no process holds it:
// false if one does (this one among them). The lock stays with this
// process, whose New over stateDir then registers without waiting.
func takeOver(stateDir string) (bool, error) {
	registered.Lock()
	defer registered.Unlock()
	if _, ok := registered.m[stateDir]; ok {
		return false, nil
	}
	f, err := lockFile(ownerLock(stateDir), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if registered.m == nil {
		registered.m = map[string]heldDir{}
	}
	registered.m[stateDir] = heldDir{f: f, tookOver: true}
	return true, nil
}

// letGo drops this process's lock on stateDir, taken by takeOver for a
// directory it then found still in use.
func letGo(stateDir string) {
	registered.Lock()
	defer registered.Unlock()
	if h, ok := registered.m[stateDir]; ok {
		h.f.Close()
		delete(registered.m, stateDir)
	}
}
