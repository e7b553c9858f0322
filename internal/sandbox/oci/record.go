package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/sandbox"
)

// What the backend keeps on disk. Nothing here is secret: a Sandbox's
// processes get their environment through a pipe, never from a file.
//
//	<StateDir>/crun/                 the runtime's state (crun --root)
//	<StateDir>/sandboxes/<id>/
//	    sandbox.json                 record: the Spec, the slot, what was given
//	    run.json                     while running: PID 1 and its start time
//	    lock                         flock held by whoever changes the Sandbox
//	    upper/ work/                 the root filesystem's own writes (overlayfs)
//	    layers/                      idmapped layers, attached only while mounting
//	                                 on kernels before 6.13 (rootfs.go)
//	    disks/<name>/                the Spec's Disks, made empty or moved in
//	                                 (Disk.From), moved out by RemoveKeepingDisks
//	    disk.img                     with a disk limit (disk.go): an ext4 image
//	                                 holding upper/, work/ and disks/ in place
//	                                 of the three above, mounted at own/
//	    etc/                         hosts, resolv.conf, hostname bound in
//	    bundle/config.json           the runtime's config
//	<HostDir>/lock                   flock for host-wide changes
//	<HostDir>/slots/<n>.json         who owns slot n (see network.go)
//	<SlotsDir>/<n>.lock              the host-wide claim on slot n, held
//	                                 with flock by its owner (slots.go)
//	<HostDir>/rootfs/<n>/            where slot n's root filesystem is mounted
//	                                 while it runs

// record is a Sandbox as Create made it.
type record struct {
	Spec sandbox.Spec
	// Slot is host-wide: it picks the uid range, the network and the names
	// of everything the Sandbox sets up on the host.
	Slot int
	// Given is what the backend gave after capping, Notes say where it gave
	// less than asked.
	Given sandbox.Resources
	Notes []string
	// DiskMiB is the size of the Sandbox's disk image, 0 for none
	// (disk.go); made by Create, it stays what it was (DiskNotes say
	// where that is less than asked) while the caps of Given follow each
	// Start.
	DiskMiB   int
	DiskNotes []string
	// Complete is set when Create has finished; a record without it is a
	// Create that crashed, removed by reconciliation.
	Complete bool
	// Started is set by the first Start, so Status tells created from
	// stopped.
	Started bool
}

// runRecord is a running Sandbox: its PID 1 on the host, with the start
// time that tells it from a later process with the same PID.
type runRecord struct {
	PID       int
	StartTime uint64
}

// slotOwner names the Sandbox holding a host-wide slot.
type slotOwner struct {
	StateDir string
	ID       string
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return nil
}

// flock takes a lock on path (made if missing): LOCK_EX or LOCK_SH, with
// LOCK_NB to fail instead of waiting. Locks on separate opens conflict even
// within one process, so the same lock guards goroutines and processes.
func flock(path string, how int) (unlock func(), err error) {
	f, err := lockFile(path, how)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// lockFile is flock for a holder that keeps the file: closing it unlocks.
func lockFile(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// processStartTime is field 22 of /proc/PID/stat, in clock ticks since boot.
func processStartTime(pid int) (uint64, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// procStat is /proc/pid/stat's fields after the command name: its state
// first, its start time the 20th.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name (field 2) may hold spaces; fields after it follow
	// the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return nil, errors.New("malformed stat")
	}
	return f, nil
}

// pfExiting is the kernel's flag of a process that has begun to exit.
const pfExiting = 0x4

// alive reports whether the process a runRecord names still runs: there,
// with the same start time, and not on its way out. A PID 1 killed stays
// there, exiting, until every other process of its Sandbox is gone, and
// then a zombie until it is reaped; what watched the others ends first.
func (r runRecord) alive() bool {
	if r.PID <= 0 {
		return false
	}
	f, err := procStat(r.PID)
	if err != nil {
		return false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	flags, ferr := strconv.ParseUint(f[6], 10, 64)
	return err == nil && ferr == nil && st == r.StartTime && f[0] != "Z" && f[0] != "X" && flags&pfExiting == 0
}

// removeTree deletes dir and everything under it without crossing into
// another filesystem: a root filesystem still mounted below it makes it
// fail rather than delete through the mount.
func removeTree(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	return removeOnDev(dir, st.Dev)
}

func removeOnDev(path string, dev uint64) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Dev != dev {
		return fmt.Errorf("refusing to remove %s: it is a mount point", path)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := removeOnDev(filepath.Join(path, e.Name()), dev); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
