package daemon

import (
	"context"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/runner"
	"kndl.dev/kndl/internal/testkit"
)

// TestChooseBackend: RUNNER_SANDBOX_BACKEND picks the backend; unset, the
// Runner takes gVisor where runsc runs here and crun, saying why, where it
// does not; gvisor asked for and not working is an error, never crun.
func TestChooseBackend(t *testing.T) {
	ctx := context.Background()
	missing := "/nonexistent/runsc"
	tests := []struct {
		name, backend, runsc string
		wantRuntime, wantWhy string
		wantErr              bool
	}{
		{"crun asked for", "crun", "", "crun", "RUNNER_SANDBOX_BACKEND=crun", false},
		{"gvisor asked for, runsc missing", "gvisor", missing, "", "", true},
		{"gvisor asked for, a relative RUNNER_RUNSC", "gvisor", "runsc", "", "", true},
		{"unset, runsc missing", "", missing, "crun", "no gVisor here", false},
	}
	for _, tc := range tests {
		c, err := chooseBackend(ctx, runner.Config{SandboxBackend: tc.backend, Runsc: tc.runsc})
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: got error %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if c.runtime != tc.wantRuntime || !strings.Contains(c.why, tc.wantWhy) {
			t.Errorf("%s: got %+v, want runtime %q, why with %q", tc.name, c, tc.wantRuntime, tc.wantWhy)
		}
		if err == nil && c.other == "" {
			t.Errorf("%s: the choice does not say what the other backend would add", tc.name)
		}
	}

	runsc := testkit.Runsc(t)
	for _, backend := range []string{"", "gvisor"} {
		c, err := chooseBackend(ctx, runner.Config{SandboxBackend: backend, Runsc: runsc})
		if err != nil || c.runtime != "runsc" || c.path != runsc {
			t.Errorf("RUNNER_SANDBOX_BACKEND=%q with a working runsc: got %+v, %v, want runsc", backend, c, err)
		}
	}
}
