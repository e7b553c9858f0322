package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/runner"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
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

// TestBuildsRunOnCrunOnlyWhenAskedWhileSessionsRunOnGVisor:
// RUNNER_BUILD_BACKEND=crun gives a gVisor Runner's Builds a crun backend
// of their own, in a state directory apart from the Sessions'; unset, or
// on a crun Runner, Builds run on the Sessions' backend.
func TestBuildsRunOnCrunOnlyWhenAskedWhileSessionsRunOnGVisor(t *testing.T) {
	ctx := context.Background()
	runsc := testkit.Runsc(t)
	home := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	backend := func(name string) sandbox.Backend {
		cfg := runner.Config{Home: home, SandboxBackend: name, Runsc: runsc}
		c, err := chooseBackend(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := oci.New(ctx, ociOptions(cfg, c, log))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	gv, cr := backend("gvisor"), backend("crun")
	for _, tc := range []struct {
		build    string
		sessions sandbox.Backend
		want     string // the Builds' backend's name; "" for none of their own
	}{{"", gv, ""}, {"crun", cr, ""}, {"crun", gv, "crun"}} {
		cfg := runner.Config{Home: home, BuildBackend: tc.build}
		b, err := newBuildBackend(ctx, cfg, tc.sessions, log)
		if err != nil {
			t.Fatalf("RUNNER_BUILD_BACKEND=%q on %s: %v", tc.build, tc.sessions.Name(), err)
		}
		got := ""
		if b != nil {
			got = b.Name()
		}
		if got != tc.want {
			t.Errorf("RUNNER_BUILD_BACKEND=%q on %s: Builds on their own %q backend, want %q", tc.build, tc.sessions.Name(), got, tc.want)
		}
		if b != nil {
			// Each backend reconciles only its own state directory: the
			// crun one must not be the gVisor one's.
			if err := b.Create(ctx, sandbox.Spec{ID: "apart", Layers: []string{t.TempDir()}}); err != nil {
				t.Fatal(err)
			}
			if _, err := tc.sessions.Status(ctx, "apart"); err == nil {
				t.Error("a Sandbox of the Builds' backend is one of the Sessions' backend too")
			}
			b.Remove(ctx, "apart")
		}
	}
}
