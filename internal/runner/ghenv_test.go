package runner

import (
	"slices"
	"testing"

	"kndl.dev/kndl/internal/gitrelay"
	"kndl.dev/kndl/internal/sandbox"
)

// TestGhInTheSandboxIsPointedAtTheRelay: Claude Code's environment names
// gh's host, the Session token as gh's token and the Repo on that host, for
// a Repo the git relay serves; the names the Sandbox's hosts file gives the
// relay's address are those gh calls.
func TestGhInTheSandboxIsPointedAtTheRelay(t *testing.T) {
	tests := []struct {
		repo string
		want []string
	}{
		{"https://github.com/acme/app.git", []string{"GH_HOST=github.localhost", "GH_TOKEN=tok", "GH_REPO=github.localhost/acme/app", "GH_NO_UPDATE_NOTIFIER=1"}},
		{"http://github.com/acme/app", []string{"GH_HOST=github.localhost", "GH_TOKEN=tok", "GH_REPO=github.localhost/acme/app", "GH_NO_UPDATE_NOTIFIER=1"}},
		{"/srv/git/app", nil},
	}
	for _, tt := range tests {
		if got := ghEnv(tt.repo, "tok"); !slices.Equal(got, tt.want) {
			t.Errorf("ghEnv(%q): got %q, want %q", tt.repo, got, tt.want)
		}
	}
	if want := []string{gitrelay.GHHost, gitrelay.APIHost}; !slices.Equal(sandbox.ForgeAPIHosts, want) {
		t.Errorf("the Sandbox's hosts file names %v for the relay, want gh's %v", sandbox.ForgeAPIHosts, want)
	}
}
