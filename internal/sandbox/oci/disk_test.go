package oci

import (
	"strings"
	"testing"
)

// TestGiveDiskCapsWhatIsAskedAndSaysWhy: a Sandbox asking for no disk gets
// the Runner's cap, one asking for more gets the cap with a note naming
// the setting, and on a host that cannot limit disk use none gets a limit,
// with a note saying so.
func TestGiveDiskCapsWhatIsAskedAndSaysWhy(t *testing.T) {
	tests := []struct {
		can        bool
		max, asked int
		want       int
		note       string
	}{
		{true, 0, 0, 0, ""},
		{true, 0, 64, 64, ""},
		{true, 1024, 0, 1024, ""},
		{true, 1024, 512, 512, ""},
		{true, 1024, 4096, 1024, "RUNNER_SANDBOX_MAX_DISK_MIB"},
		{false, 1024, 0, 0, "cannot limit disk use"},
		{false, 0, 64, 0, "cannot limit disk use"},
		{false, 0, 0, 0, ""},
	}
	for _, tc := range tests {
		b := &OCI{opts: Options{MaxDiskMiB: tc.max}, canLimitDisk: tc.can}
		got, notes := b.giveDisk(tc.asked)
		joined := strings.Join(notes, " ")
		if got != tc.want || (tc.note == "") != (len(notes) == 0) || !strings.Contains(joined, tc.note) {
			t.Errorf("can %v, cap %d, asked %d: got %d MiB, notes %q; want %d MiB and a note with %q", tc.can, tc.max, tc.asked, got, notes, tc.want, tc.note)
		}
	}
}
