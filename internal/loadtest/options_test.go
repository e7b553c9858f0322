package loadtest

import (
	"strings"
	"testing"
	"time"
)

// TestARemoteHubIsRefusedUnlessAllowed: the load goes to loopback alone
// unless --allow-remote says otherwise, and the refusal names the way.
func TestARemoteHubIsRefusedUnlessAllowed(t *testing.T) {
	o := Options{Runners: 1, Sessions: 1, PromptsPerMinute: 1, Duration: time.Second, AwakeFraction: 0.1}
	tests := []struct {
		url    string
		remote bool
		want   string // in the error; "" for none
	}{
		{"http://127.0.0.1:8080", false, ""},
		{"http://localhost:8080", false, ""},
		{"http://[::1]:8080", false, ""},
		{"https://hub.example.com", false, "--allow-remote"},
		{"http://10.0.0.5:8080", false, "not on this machine's loopback"},
		{"https://hub.example.com", true, ""},
		{"hub.example.com", true, "not an http(s) URL"},
	}
	for _, tt := range tests {
		o.HubURL, o.AllowRemote = tt.url, tt.remote
		err := o.Check()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s (allow remote %v): got %v, want %q", tt.url, tt.remote, err, tt.want)
		}
	}
	o.HubURL = "https://hub.example.com"
	if _, err := Run(t.Context(), o); err == nil {
		t.Error("Run loaded a remote Hub without AllowRemote")
	}
}
