package daemon

import (
	"net/netip"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/runner"
)

// TestKndlDevAllowsLoopbackAndAHubNothingUntilTold: kndl hub's and kndl
// runner's own requests reach no loopback or private address unless
// HUB_OUTBOUND_ALLOW or RUNNER_OUTBOUND_ALLOW opens it; kndl dev's, one
// machine's, reach loopback unless its operator sets their own; a
// malformed list and an unknown RUNNER_REGISTRY_AUTH stop the start.
func TestKndlDevAllowsLoopbackAndAHubNothingUntilTold(t *testing.T) {
	type vars map[string]string
	env := func(v vars) func(string) string { return func(k string) string { return v[k] } }
	told := vars{"HUB_OUTBOUND_ALLOW": "10.0.0.0/8", "RUNNER_OUTBOUND_ALLOW": "10.0.0.0/8"}
	dialers := func(getenv func(string) string) (hubs, runners outbound.Dialer) {
		r, err := runner.FromEnv(getenv, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return hub.FromEnv(getenv, t.TempDir()).Outbound, r.Outbound
	}
	dir := t.TempDir()
	tests := []struct {
		name             string
		getenv           func(string) string
		loopback, tenNet bool
	}{
		{"kndl hub and kndl runner", env(nil), false, false},
		{"kndl hub and kndl runner told", env(told), false, true},
		{"kndl dev", devEnv(env(nil), dir), true, false},
		{"kndl dev told", devEnv(env(told), dir), false, true},
	}
	for _, tt := range tests {
		h, r := dialers(tt.getenv)
		for _, d := range []outbound.Dialer{h, r} {
			for addr, want := range map[string]bool{"127.0.0.1": tt.loopback, "10.1.2.3": tt.tenNet, "169.254.169.254": false} {
				if err := d.Check(addr, netip.MustParseAddr(addr), 443); (err == nil) != want {
					t.Errorf("%s, %s: %s got %v, want open %v", tt.name, d.Setting, addr, err, want)
				}
			}
		}
	}
	cfg := hub.FromEnv(env(vars{"HUB_OUTBOUND_ALLOW": "10.0.0.0/8,intranet"}), dir)
	if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), "HUB_OUTBOUND_ALLOW") {
		t.Errorf("a malformed HUB_OUTBOUND_ALLOW: %v", err)
	}
	if _, err := runner.FromEnv(env(vars{"RUNNER_OUTBOUND_ALLOW": "intranet"}), dir); err == nil || !strings.Contains(err.Error(), "RUNNER_OUTBOUND_ALLOW") {
		t.Errorf("a malformed RUNNER_OUTBOUND_ALLOW: %v", err)
	}
	if _, err := runner.FromEnv(env(vars{"RUNNER_REGISTRY_AUTH": "yes"}), dir); err == nil || !strings.Contains(err.Error(), "RUNNER_REGISTRY_AUTH") {
		t.Errorf("RUNNER_REGISTRY_AUTH=yes: %v", err)
	}
}
