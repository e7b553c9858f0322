package oci

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
)

// slotHolder, set in a process's environment to "<slots dir> <state dir>
// <count>", makes the test binary a process of its own that waits for a
// line on its input, claims count slots for Sandboxes held-0.. of the
// state directory, prints each, and holds them until it is killed.
const slotHolder = "KNDL_TEST_HOLD_SLOTS"

// HoldSlotsIfAsked runs the slot holder when the environment asks for
// one (TestMain calls it).
func HoldSlotsIfAsked() (int, bool) {
	args := strings.Fields(os.Getenv(slotHolder))
	if len(args) != 3 {
		return 0, false
	}
	count, _ := strconv.Atoi(args[2])
	s := newHostSlots(args[0])
	bufio.NewReader(os.Stdin).ReadString('\n')
	for i := range count {
		n, err := s.claimFirst(slotOwner{args[1], fmt.Sprintf("held-%d", i)}, func(int) bool { return false })
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1, true
		}
		fmt.Println(n)
	}
	io.Copy(io.Discard, os.Stdin) // hold until killed
	// The claims are open files: unreachable, the collector would close
	// them and let the locks go.
	runtime.KeepAlive(s)
	return 0, true
}

// holder is a slot holder process: go starts its claims, and slots reads
// what it claimed.
type holder struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	count int
}

func startHolder(t *testing.T, dir, stateDir string, count int) *holder {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: exec.Command(exe), count: count}
	h.cmd.Env = []string{fmt.Sprintf("%s=%s %s %d", slotHolder, dir, stateDir, count)}
	h.cmd.Stderr = os.Stderr
	if h.in, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.out = bufio.NewScanner(out)
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.kill)
	return h
}

func (h *holder) start() { io.WriteString(h.in, "go\n") }

func (h *holder) slots(t *testing.T) []int {
	t.Helper()
	var got []int
	for len(got) < h.count && h.out.Scan() {
		n, err := strconv.Atoi(h.out.Text())
		if err != nil {
			t.Fatalf("the holder printed %q", h.out.Text())
		}
		got = append(got, n)
	}
	if len(got) < h.count {
		t.Fatalf("the holder claimed %v, want %d slots", got, h.count)
	}
	return got
}

// kill kills the holder as a crash would, and waits for it to be gone.
func (h *holder) kill() {
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// never skips no slot.
func never(int) bool { return false }

// sandboxRecord makes the record of Sandbox id in stateDir, so that a
// claim naming it stands.
func sandboxRecord(t *testing.T, stateDir, id string) slotOwner {
	t.Helper()
	dir := filepath.Join(stateDir, "sandboxes", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sandbox.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	return slotOwner{stateDir, id}
}

// TestTwoBackendsAndAnotherProcessClaimingAtOnceNeverShareASlot: two
// backends' claims in this process and a third process's, all at once,
// never give out one slot twice.
func TestTwoBackendsAndAnotherProcessClaimingAtOnceNeverShareASlot(t *testing.T) {
	dir := t.TempDir()
	const each = 25
	other := startHolder(t, dir, "/other/state", each)
	backends := []*hostSlots{newHostSlots(dir), newHostSlots(dir)}
	claimed := make([][]int, len(backends))
	var mu sync.Mutex
	var wg sync.WaitGroup
	other.start()
	for i, s := range backends {
		for j := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := s.claimFirst(slotOwner{fmt.Sprintf("/state/%d", i), fmt.Sprintf("s-%d", j)}, never)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				claimed[i] = append(claimed[i], n)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	claimed = append(claimed, other.slots(t))
	who := map[int]int{}
	for i, slots := range claimed {
		for _, n := range slots {
			if prev, ok := who[n]; ok {
				t.Errorf("slot %d went to claimant %d and to claimant %d", n, prev, i)
			}
			who[n] = i
		}
	}
	if len(who) != 3*each {
		t.Errorf("got %d slots claimed, want %d", len(who), 3*each)
	}
	// A backend holds its claims for its life, as the OCI backend does:
	// collected, its files would be closed and their locks let go while
	// the other claimants still claim.
	runtime.KeepAlive(backends)
}

// TestASlotWhoseClaimantDiedIsFreeAgain: the slots a process claimed for
// Sandboxes that never came to be are skipped while it lives and free
// once it is killed.
func TestASlotWhoseClaimantDiedIsFreeAgain(t *testing.T) {
	dir := t.TempDir()
	h := startHolder(t, dir, filepath.Join(t.TempDir(), "state"), 3)
	h.start()
	if got := h.slots(t); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("the holder claimed %v, want [1 2 3]", got)
	}
	s := newHostSlots(dir)
	me := slotOwner{"/state", "a"}
	if n, err := s.claimFirst(me, never); err != nil || n != 4 {
		t.Fatalf("while the holder lives: got slot %d, %v; want 4", n, err)
	}
	s.release(4, me)
	h.kill()
	if n, err := s.claimFirst(me, never); err != nil || n != 1 {
		t.Errorf("once the holder is dead: got slot %d, %v; want 1", n, err)
	}
}

// TestASlotStaysWithItsSandboxUntilItsBackendTakesItBack: a process that
// dies leaves its Sandbox's slot claimed; no other Sandbox gets it, the
// Sandbox's own backend, restarted, takes it again, and once the Sandbox
// is gone the slot is free.
func TestASlotStaysWithItsSandboxUntilItsBackendTakesItBack(t *testing.T) {
	dir, stateDir := t.TempDir(), t.TempDir()
	held := sandboxRecord(t, stateDir, "held-0")
	h := startHolder(t, dir, stateDir, 1)
	h.start()
	if got := h.slots(t); got[0] != 1 {
		t.Fatalf("the holder claimed %v, want slot 1", got)
	}
	h.kill()

	other := newHostSlots(dir)
	stranger := sandboxRecord(t, t.TempDir(), "stranger")
	if n, err := other.claimFirst(stranger, never); err != nil || n != 2 {
		t.Fatalf("another Sandbox's claim: got slot %d, %v; want 2, slot 1 still its Sandbox's", n, err)
	}
	if err := other.retake(1, stranger); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("another Sandbox taking slot 1 again: got %v, want a conflict", err)
	}

	restarted := newHostSlots(dir)
	if err := restarted.retake(1, held); err != nil {
		t.Fatalf("the restarted backend taking its Sandbox's slot again: %v", err)
	}
	if ok, err := other.claim(1, slotOwner{"/state", "x"}); ok || err != nil {
		t.Errorf("a claim on slot 1 while the restarted backend holds it: got %v, %v; want refused", ok, err)
	}
	// A second process over the same state directory sees the claim as
	// its own.
	if err := newHostSlots(dir).retake(1, held); err != nil {
		t.Errorf("a second backend over the held Sandbox's state directory: %v", err)
	}

	os.RemoveAll(filepath.Join(stateDir, "sandboxes", "held-0"))
	restarted.release(1, held)
	if ok, err := other.claim(1, slotOwner{"/state", "x"}); !ok || err != nil {
		t.Errorf("a claim on slot 1 once its Sandbox is gone: got %v, %v; want it taken", ok, err)
	}
}

// TestUnclaimedLeavesAnotherBackendsSlotAlone: reconcile clears an
// orphaned slot only when no other backend claims it.
func TestUnclaimedLeavesAnotherBackendsSlotAlone(t *testing.T) {
	dir := t.TempDir()
	live := newHostSlots(dir)
	if ok, err := live.claim(1, slotOwner{"/a", "live"}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	dead := newHostSlots(dir)
	stopped := sandboxRecord(t, t.TempDir(), "stopped")
	if ok, err := dead.claim(2, stopped); !ok || err != nil {
		t.Fatal(ok, err)
	}
	dead.held[2].f.Close() // its process died; its Sandbox did not
	tests := []struct {
		slot  int
		mine  slotOwner
		clear bool
	}{
		{1, slotOwner{}, false}, // held by a live process
		{2, slotOwner{}, false}, // named for another's Sandbox that exists
		{2, stopped, true},      // named for this registry's own Sandbox
		{3, slotOwner{}, true},  // nobody's
	}
	for _, tt := range tests {
		cleared := false
		newHostSlots(dir).unclaimed(tt.slot, tt.mine, func() { cleared = true })
		if cleared != tt.clear {
			t.Errorf("slot %d, this registry naming %v: cleared %v, want %v", tt.slot, tt.mine, cleared, tt.clear)
		}
	}
	runtime.KeepAlive(live) // its claim on slot 1 holds to the end
}
