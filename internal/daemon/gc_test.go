package daemon

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/sandbox/oci"
)

// TestRunnerGCSaysWhatEachSandboxWasAndAsksFirst: kndl runner gc names
// each orphaned Sandbox's Session, its state and since when, and its
// owner, and removes one only once asked and answered yes; --yes removes
// each without asking. oci's TestTheSandboxesOfAProcessKilledMidTestAreReaped
// checks the listing and the removal on real Sandboxes.
func TestRunnerGCSaysWhatEachSandboxWasAndAsksFirst(t *testing.T) {
	since := time.Date(2026, 12, 5, 9, 30, 0, 0, time.UTC)
	orphans := []oci.Orphan{
		{StateDir: "/var/lib/kndl/runner/sandboxes/oci", Owner: oci.Owner{PID: 4242, Command: "kndl", Since: since}, Sandboxes: []oci.Orphaned{
			{ID: "s-0b5c2d1e", Slot: 3, Running: true, Since: since},
			{ID: "build-0123456789ab", Slot: 5, Since: since},
		}},
		{StateDir: "/tmp/TestX/001/state", Owner: oci.Owner{PID: 77, Command: "e2e.test", Test: true, Since: since}, Sandboxes: []oci.Orphaned{
			{ID: "s-9f8e7d6c", Slot: 7, Running: true, Since: since},
		}},
	}
	tests := []struct {
		name    string
		yes     bool
		answers string
		removed []string
		says    []string
	}{
		{"answers yes, no, y", false, "yes\nno\ny\n", []string{"s-0b5c2d1e", "s-9f8e7d6c"}, []string{
			"Left by process 4242 (kndl), its Runner since 2026-12-05 09:30 UTC, now gone. If that Runner is only stopped",
			"Sandbox s-0b5c2d1e (Session 0b5c2d1e), running since 2026-12-05 09:30 UTC\n  Stop and remove it with its disks, freeing slot 3? [y/N]   Removed; slot 3 is free.",
			"Sandbox build-0123456789ab (an Environment's Build), stopped since 2026-12-05 09:30 UTC",
			"Left by test process 77 (e2e.test), there since 2026-12-05 09:30 UTC, now gone.",
			"Removed 2 Sandboxes, kept 1.",
		}},
		{"no answer keeps them all", false, "", nil, []string{"Removed 0 Sandboxes, kept 3."}},
		{"--yes", true, "", []string{"s-0b5c2d1e", "build-0123456789ab", "s-9f8e7d6c"}, []string{"Removed 3 Sandboxes, kept 0."}},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		var removed []string
		err := collect(cli.IO{Stdin: strings.NewReader(tt.answers), Stdout: &out}, orphans, tt.yes, func(o oci.Orphan, id string) error {
			removed = append(removed, id)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if fmt.Sprint(removed) != fmt.Sprint(tt.removed) {
			t.Errorf("%s: removed %v, want %v", tt.name, removed, tt.removed)
		}
		for _, s := range tt.says {
			if !strings.Contains(out.String(), s) {
				t.Errorf("%s: got %q, want it to say %q", tt.name, out.String(), s)
			}
		}
		if tt.yes && strings.Contains(out.String(), "[y/N]") {
			t.Errorf("%s: asked %q", tt.name, out.String())
		}
	}
	var out bytes.Buffer
	collect(cli.IO{Stdout: &out}, nil, false, nil)
	if want := "No Sandbox on this host was left"; !strings.Contains(out.String(), want) {
		t.Errorf("no orphans: got %q, want %q", out.String(), want)
	}
}
