package runners

import (
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/protocol"
)

// TestARunnerOlderThanTheHubIsWarnedOf: a Runner on an older protocol
// version than the Hub's, or on the same version from an older commit,
// gets a warning; one as new as the Hub, newer, or whose build has no
// date, gets none.
func TestARunnerOlderThanTheHubIsWarnedOf(t *testing.T) {
	day := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	hub := protocol.Build{Version: "v1.2.0", Commit: "1ec988fdf34170a2c1d388fb3b2d96e15d771b07", Date: day}
	older := protocol.Build{Version: "v1.1.0", Commit: "0123456789abcdef", Date: day.Add(-48 * time.Hour)}
	tests := []struct {
		name   string
		agreed int
		runner protocol.Build
		want   string // in the warning; "" for none
	}{
		{"older protocol", protocol.Version - 1, hub, "older than the Hub"},
		{"oldest protocol taken", protocol.MinVersion, hub, "upgrade the Runner"},
		{"same protocol, older build", protocol.Version, older, "Its build (v1.1.0, 0123456 of 2026-12-03) is older than the Hub's (v1.2.0, 1ec988f of 2026-12-05)"},
		{"same build", protocol.Version, hub, ""},
		{"newer build", protocol.Version, protocol.Build{Version: "v1.3.0", Date: day.Add(time.Hour)}, ""},
		{"a build with no date", protocol.Version, protocol.Build{Version: "(devel)"}, ""},
	}
	for _, tt := range tests {
		got := VersionWarning(tt.agreed, tt.runner, hub)
		if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := VersionWarning(protocol.Version, older, protocol.Build{}); got != "" {
		t.Errorf("a Hub whose build has no date: got %q, want no warning", got)
	}
}
