package runner

import "testing"

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
