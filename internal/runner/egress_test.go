package runner

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/egress"
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
