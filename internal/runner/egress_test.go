package runner

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/errdefs"
)

func TestBlockNotesAreOnePerDestinationAndAtMostABurstAMinute(t *testing.T) {
	var g egressGate
	addr := netip.MustParseAddr("10.174.0.6")
	if err := g.set(t.TempDir(), "s1", addr, egress.Policy{Mode: egress.ModeAllowlist}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var notes []string
	for i := range 3 * blockBurst {
		dest := fmt.Sprintf("h%d.example.com:443", i%(blockBurst+5))
		if id, text := g.note(addr, dest, "off the list", now); text != "" {
			if id != "s1" {
				t.Fatalf("a note for session %q, want s1", id)
			}
			notes = append(notes, text)
		}
	}
	if len(notes) != blockBurst || notes[0] != "blocked: h0.example.com:443 (off the list)" {
		t.Fatalf("%d notes in a minute (first %q), want %d, each destination once", len(notes), notes[0], blockBurst)
	}
	_, text := g.note(addr, "h0.example.com:443", "off the list", now.Add(blockWindow))
	if want := fmt.Sprintf("; %d more blocks since were not noted", 3*blockBurst-blockBurst); !strings.HasSuffix(text, want) {
		t.Fatalf("the next minute's first note is %q, want it to end %q", text, want)
	}
	if _, text := g.note(netip.MustParseAddr("10.174.0.10"), "x.example.com:443", "off the list", now); text != "" {
		t.Fatalf("a note for an address that is no restricted Sandbox's: %q", text)
	}
}

func TestARestartedRunnerJudgesARunningSandboxByItsKeptPolicy(t *testing.T) {
	dir := t.TempDir()
	addr := netip.MustParseAddr("10.174.0.6")
	var before egressGate
	if err := before.set(dir, "s1", addr, egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"npm"}}); err != nil {
		t.Fatal(err)
	}
	var after egressGate
	if err := after.adopt(dir, "s1", addr); err != nil {
		t.Fatal(err)
	}
	m, ok := after.policy(addr)
	if !ok || !m.Allows("registry.npmjs.org") || m.Allows("pypi.org") {
		t.Fatalf("after a restart the Sandbox's allowlist is %v (%v), want npm's", m, ok)
	}
	// Opened again, the Session's Sandbox is no longer judged, and a
	// restart does not restrict it.
	if err := after.set(dir, "s1", addr, egress.Policy{}); err != nil {
		t.Fatal(err)
	}
	var again egressGate
	if err := again.adopt(dir, "s1", addr); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.policy(addr); ok {
		t.Fatalf("an open Sandbox is judged by an allowlist after a restart")
	}
}

func TestAnAllowlistSwappedForAnAwakeSandboxJudgesItsNextConnectionAndOutlastsARestart(t *testing.T) {
	dir := t.TempDir()
	addr := netip.MustParseAddr("10.174.0.6")
	var g egressGate
	if err := g.set(dir, "s1", addr, egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"npm"}}); err != nil {
		t.Fatal(err)
	}
	g.note(addr, "pypi.org:443", "off the list", time.Now())
	if err := g.swap(dir, "s1", egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"pypi"}}); err != nil {
		t.Fatal(err)
	}
	m, ok := g.policy(addr)
	if !ok || !m.Allows("pypi.org") || m.Allows("registry.npmjs.org") {
		t.Fatalf("after the swap the Sandbox's allowlist is %v (%v), want pypi's and not npm's", m, ok)
	}
	// The swap keeps the block notes' window: the same block is not
	// noted twice in it.
	if _, text := g.note(addr, "pypi.org:443", "off the list", time.Now()); text != "" {
		t.Fatalf("a block noted again in its window after the swap: %q", text)
	}
	var after egressGate
	if err := after.adopt(dir, "s1", addr); err != nil {
		t.Fatal(err)
	}
	if m, ok := after.policy(addr); !ok || !m.Allows("pypi.org") || m.Allows("registry.npmjs.org") {
		t.Fatalf("after a restart the Sandbox's allowlist is %v (%v), want the swapped one", m, ok)
	}

	// Open is no swap, and a Session with no restricted Sandbox here has
	// none to swap: each applies at the next wake.
	if err := g.swap(dir, "s1", egress.Policy{}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("a swap to open: %v, want a conflict", err)
	}
	if m, _ := g.policy(addr); !m.Allows("pypi.org") {
		t.Fatalf("a refused swap changed the allowlist")
	}
	if err := g.swap(t.TempDir(), "s2", egress.Policy{Mode: egress.ModeAllowlist}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("a swap for a Session with no restricted Sandbox: %v, want a conflict", err)
	}
}
