package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/errdefs"
)

// DefaultSlotsDir is where every backend on the host claims its slots,
// whatever its HostDir: what a slot names (network namespace, veth,
// addresses, user namespace, uid range, cgroup) is the host's.
const DefaultSlotsDir = "/var/lib/kndl/slots"

// hostSlots is a backend's host-wide claim on slots. Slot n's claim is the
// file <dir>/<n>.lock: while a process holds it (flock, for as long as
// its Sandbox keeps the slot) no other process takes it, and it names the
// Sandbox it is for. A crashed process's locks go with it, but its
// Sandboxes are still there (running, or to be started again by its
// Runner): a claim naming a Sandbox that still exists stands, and only
// that Sandbox's own backend takes it again (retake). A claim naming no
// Sandbox, or one since removed, is free.
//
// The files live beside the HostDirs, not in one, so that backends over
// different HostDirs (two Runners, two test processes) never share a
// slot; on disk rather than under /run, so that a stopped Sandbox keeps
// its slot through a reboot until its Runner is back.
type hostSlots struct {
	dir  string
	mu   sync.Mutex
	held map[int]heldSlot
}

// heldSlot is a claim this backend holds: the locked file and its owner.
type heldSlot struct {
	f     *os.File
	owner slotOwner
}

func newHostSlots(dir string) *hostSlots {
	return &hostSlots{dir: dir, held: map[int]heldSlot{}}
}

func (s *hostSlots) path(n int) string { return filepath.Join(s.dir, strconv.Itoa(n)+".lock") }

// exists says whether the Sandbox o names still has a record.
func (o slotOwner) exists() bool {
	return exists(filepath.Join(o.StateDir, "sandboxes", o.ID, "sandbox.json"))
}

// lock takes n's lock without waiting (unix.EWOULDBLOCK if another holds
// it) and reads whom the file names; a file cut short by a crash names
// nobody.
func (s *hostSlots) lock(n int) (*os.File, slotOwner, error) {
	f, err := lockFile(s.path(n), unix.LOCK_EX|unix.LOCK_NB)
	if err != nil {
		return nil, slotOwner{}, err
	}
	var o slotOwner
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		json.NewDecoder(f).Decode(&o)
	}
	return f, o, nil
}

// claim takes slot n for owner: false if another process holds n, or n
// names another Sandbox that still exists.
func (s *hostSlots) claim(n int, owner slotOwner) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.held[n]; ok {
		return h.owner == owner, nil
	}
	f, cur, err := s.lock(n)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim sandbox slot %d: %w", n, err)
	}
	if cur != (slotOwner{}) && cur != owner && cur.exists() {
		f.Close()
		return false, nil
	}
	b, err := json.Marshal(owner)
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt(b, 0)
	}
	if err != nil {
		f.Close()
		return false, fmt.Errorf("claim sandbox slot %d: %w", n, err)
	}
	s.held[n] = heldSlot{f, owner}
	return true, nil
}

// claimFirst claims the lowest slot that skip passes over and no one else
// holds.
func (s *hostSlots) claimFirst(owner slotOwner, skip func(n int) bool) (int, error) {
	for n := 1; n <= maxSlot; n++ {
		if skip(n) {
			continue
		}
		ok, err := s.claim(n, owner)
		if err != nil {
			return 0, err
		}
		if ok {
			return n, nil
		}
	}
	return 0, fmt.Errorf("all %d sandbox slots on this host are taken: %w", maxSlot, errdefs.ErrUnavailable)
}

// retake makes sure owner's claim on n stands, for a Sandbox that holds n
// already: after a restart its lock went with the old process. Another
// process holding n for the same Sandbox (one over the same state
// directory) is no conflict.
func (s *hostSlots) retake(n int, owner slotOwner) error {
	ok, err := s.claim(n, owner)
	if ok || err != nil {
		return err
	}
	var cur slotOwner
	if b, err := os.ReadFile(s.path(n)); err == nil {
		json.Unmarshal(b, &cur)
	}
	if cur == owner {
		return nil
	}
	return fmt.Errorf("sandbox %s holds slot %d, but the host's claim %s names sandbox %s of %s: two backends gave out one slot; remove one of the two Sandboxes: %w",
		owner.ID, n, s.path(n), cur.ID, cur.StateDir, errdefs.ErrConflict)
}

// release drops owner's claim on n, if this backend holds it.
func (s *hostSlots) release(n int, owner slotOwner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[n]
	if !ok || h.owner != owner {
		return
	}
	h.f.Truncate(0)
	h.f.Close()
	delete(s.held, n)
}

// unclaimed runs clear for slot n if no one else has a claim on it: no
// other process holds it and it names no other Sandbox that still exists.
// n stays locked while clear runs, so no one claims it midway. A slot
// this backend holds is its own to judge: clear runs. mine is the owner
// this backend's registry names for n, if any.
func (s *hostSlots) unclaimed(n int, mine slotOwner, clear func()) {
	s.mu.Lock()
	_, ours := s.held[n]
	s.mu.Unlock()
	if ours {
		clear()
		return
	}
	f, cur, err := s.lock(n)
	if err != nil {
		return
	}
	defer f.Close()
	if cur != (slotOwner{}) && cur != mine && cur.exists() {
		return
	}
	clear()
}
