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
		got := h.guard.canAccess(ctx, bob, repo, false)
		if got != tt.want || gh.Calls("collaborator") != tt.asks {
			t.Errorf("%s: access %v after %d asks, want %v after %d", tt.name, got, gh.Calls("collaborator"), tt.want, tt.asks)
		}
	}
}

// TestAFailedCheckKeepsTheLastAnswerOnlyUntilItExpires: while GitHub
// fails, a yes holds, for the periodic re-check too, only until its TTL
// from when GitHub gave it, since a failure never renews it; past that it
// is a no.
func TestAFailedCheckKeepsTheLastAnswerOnlyUntilItExpires(t *testing.T) {
	gh := testkit.NewGitHub(t)
	h := newFixture(t, withGitHub(gh, time.Hour)).hub
	gh.InstallApp("acme/app")
	gh.SetCollaborator("acme/app", "bob", true)
	bob := store.User{ID: "bob-id", GitHubLogin: "bob"}
	repo := gh.RepoURL("acme/app")
	key := accessKey{user: bob.ID, repo: "acme/app"}
	ctx := context.Background()
	if !h.guard.canAccess(ctx, bob, repo, false) {
		t.Fatal("bob has no access with GitHub up")
	}
	given := time.Now().Add(-59 * time.Minute)
	h.guard.access.mu.Lock()
	h.guard.access.m[key] = accessEntry{ok: true, at: given}
	h.guard.access.mu.Unlock()

	gh.SetDown(true)
	asked := gh.Calls("any")
	for _, fresh := range []bool{true, false, true} {
		if !h.guard.canAccess(ctx, bob, repo, fresh) {
			t.Fatalf("a yes 59 minutes old (TTL an hour) with GitHub down, fresh %v: refused, want kept", fresh)
		}
	}
	if gh.Calls("any") == asked {
		t.Fatal("the re-check did not ask GitHub: the test proves nothing")
	}
	h.guard.access.mu.Lock()
	at := h.guard.access.m[key].at
	h.guard.access.mu.Unlock()
	if !at.Equal(given) {
		t.Fatalf("a failed check moved the answer's time from %v to %v, want it kept", given, at)
	}

	h.guard.access.mu.Lock()
	h.guard.access.m[key] = accessEntry{ok: true, at: time.Now().Add(-61 * time.Minute)}
	h.guard.access.mu.Unlock()
	for _, fresh := range []bool{true, false} {
		if h.guard.canAccess(ctx, bob, repo, fresh) {
			t.Errorf("a yes 61 minutes old (TTL an hour) with GitHub down, fresh %v: kept, want refused", fresh)
		}
	}
}
