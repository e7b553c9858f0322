package runner

import (
	"strings"
	"testing"

	"kndl.dev/kndl/internal/sandbox"
)

// TestDiskLineSaysTheLimitAndWhenItIsReached: no line without a limit, the
// use against it at a boot, and a sentence naming ENOSPC and the setting
// once it is full.
func TestDiskLineSaysTheLimitAndWhenItIsReached(t *testing.T) {
	for _, c := range []struct {
		st   sandbox.Status
		want []string
	}{
		{sandbox.Status{}, nil},
		{sandbox.Status{Resources: sandbox.Resources{DiskMiB: 1024}, DiskUsedMiB: 10}, []string{"disk: 10 of 1024 MiB used", "RUNNER_SANDBOX_MAX_DISK_MIB"}},
		{sandbox.Status{Resources: sandbox.Resources{DiskMiB: 64}, DiskUsedMiB: 63, DiskFull: true},
			[]string{"disk is full: it has used 63 of its 64 MiB", `"No space left on device"`, "RUNNER_SANDBOX_MAX_DISK_MIB"}},
	} {
		got := diskLine(c.st)
		if (got == "") != (c.want == nil) {
			t.Errorf("diskLine(%+v) = %q, want %q", c.st, got, c.want)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("diskLine(%+v) = %q, want it to say %q", c.st, got, w)
			}
		}
	}
}
