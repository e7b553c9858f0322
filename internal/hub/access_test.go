package hub

import (
	"context"
	"testing"
	"time"

	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testkit"
)

// TestRefusalsAreTrustedAtMost30Seconds: with the TTL long, GitHub's yes is
// trusted for the TTL and its no for 30 s, then asked again.
func TestRefusalsAreTrustedAtMost30Seconds(t *testing.T) {
	gh := testkit.NewGitHub(t)
	h := newFixture(t, withGitHub(gh, time.Hour)).hub
	gh.InstallApp("acme/app")
	bob := store.User{ID: "bob-id", GitHubLogin: "bob"}
	repo := gh.RepoURL("acme/app")
	key := accessKey{user: bob.ID, repo: "acme/app"}
	age := func(d time.Duration) {
		h.guard.access.mu.Lock()
		e := h.guard.access.m[key]
		e.at = time.Now().Add(-d)
		h.guard.access.m[key] = e
		h.guard.access.mu.Unlock()
	}
	ctx := context.Background()
	tests := []struct {
		name        string
		collaborate bool
		age         time.Duration
		want        bool
		asks        int
	}{
		{"first ask", false, 0, false, 1},
		{"a fresh no is trusted", true, 0, false, 1},
		{"a no 29 s old is trusted", true, 29 * time.Second, false, 1},
		{"a no 31 s old is asked again", true, 31 * time.Second, true, 2},
		{"a yes is trusted for the TTL", false, 59 * time.Minute, true, 2},
		{"a yes past the TTL is asked again", false, 61 * time.Minute, false, 3},
	}
	for _, tt := range tests {
		gh.SetCollaborator("acme/app", "bob", tt.collaborate)
		if tt.age > 0 {
			age(tt.age)
		}
		got := h.canAccess(ctx, bob, repo, false)
		if got != tt.want || gh.Calls("collaborator") != tt.asks {
			t.Errorf("%s: access %v after %d asks, want %v after %d", tt.name, got, gh.Calls("collaborator"), tt.want, tt.asks)
		}
	}
}
