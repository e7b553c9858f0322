package runner

import (
	"strings"
	"testing"

	"kndl.dev/kndl/internal/sandbox"
)

// TestSandboxBackendFromEnv: RUNNER_SANDBOX_BACKEND takes gvisor, crun or
// nothing, and refuses anything else before the Runner starts.
func TestSandboxBackendFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env     string
		wantErr bool
	}{{"", false}, {"gvisor", false}, {"crun", false}, {"vm", true}, {"runsc", true}} {
		env := map[string]string{"RUNNER_SANDBOX_BACKEND": tc.env, "RUNNER_RUNSC": "/opt/runsc"}
		c, err := FromEnv(func(k string) string { return env[k] }, t.TempDir())
		if (err != nil) != tc.wantErr {
			t.Errorf("RUNNER_SANDBOX_BACKEND=%q: err %v, want error %v", tc.env, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && (c.SandboxBackend != tc.env || c.Runsc != "/opt/runsc") {
			t.Errorf("RUNNER_SANDBOX_BACKEND=%q: got %q, runsc %q", tc.env, c.SandboxBackend, c.Runsc)
		}
	}
}

// TestBuildBackendFromEnv: RUNNER_BUILD_BACKEND takes crun or nothing,
// and refuses anything else, naming what it takes, before the Runner
// starts.
func TestBuildBackendFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env     string
		wantErr bool
	}{{"", false}, {"crun", false}, {"gvisor", true}, {"runc", true}} {
		env := map[string]string{"RUNNER_BUILD_BACKEND": tc.env}
		c, err := FromEnv(func(k string) string { return env[k] }, t.TempDir())
		if (err != nil) != tc.wantErr {
			t.Errorf("RUNNER_BUILD_BACKEND=%q: err %v, want error %v", tc.env, err, tc.wantErr)
			continue
		}
		if tc.wantErr && !strings.Contains(err.Error(), "want crun") {
			t.Errorf("RUNNER_BUILD_BACKEND=%q: %v does not say what it takes", tc.env, err)
		}
		if !tc.wantErr && c.BuildBackend != tc.env {
			t.Errorf("RUNNER_BUILD_BACKEND=%q: got %q", tc.env, c.BuildBackend)
		}
	}
}

// TestMaxSessionsFromEnv: RUNNER_MAX_SESSIONS is taken as given; unset,
// it is one Session per SessionMemoryMiB of the host's memory, at least
// one; anything but a count is refused before the Runner starts.
func TestMaxSessionsFromEnv(t *testing.T) {
	host := sandbox.HostInfo{MemoryMiB: 24 * 1024}
	for _, tc := range []struct {
		env  string
		host sandbox.HostInfo
		want int
	}{{"", host, 96}, {"0", host, 96}, {"3", host, 3}, {"", sandbox.HostInfo{MemoryMiB: 100}, 1}} {
		c, err := FromEnv(func(k string) string { return map[string]string{"RUNNER_MAX_SESSIONS": tc.env}[k] }, t.TempDir())
		if err != nil {
			t.Fatalf("RUNNER_MAX_SESSIONS=%q: %v", tc.env, err)
		}
		if got := c.maxSessions(tc.host); got != tc.want {
			t.Errorf("RUNNER_MAX_SESSIONS=%q on %d MiB: %d, want %d", tc.env, tc.host.MemoryMiB, got, tc.want)
		}
	}
	for _, bad := range []string{"-1", "many"} {
		if _, err := FromEnv(func(k string) string { return map[string]string{"RUNNER_MAX_SESSIONS": bad}[k] }, t.TempDir()); err == nil {
			t.Errorf("RUNNER_MAX_SESSIONS=%q was taken", bad)
		}
	}
}

// TestEnvironmentUserFromEnv: RUNNER_ENVIRONMENT_USER is on unless off,
// and anything else is refused, naming what it takes.
func TestEnvironmentUserFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env      string
		rootOnly bool
		wantErr  bool
	}{{"", false, false}, {"on", false, false}, {"off", true, false}, {"root", false, true}} {
		c, err := FromEnv(func(k string) string { return map[string]string{"RUNNER_ENVIRONMENT_USER": tc.env}[k] }, t.TempDir())
		if (err != nil) != tc.wantErr || err != nil && !strings.Contains(err.Error(), "want on") || c.RootOnly != tc.rootOnly {
			t.Errorf("RUNNER_ENVIRONMENT_USER=%q: root only %v, err %v; want %v, error %v", tc.env, c.RootOnly, err, tc.rootOnly, tc.wantErr)
		}
	}
}
