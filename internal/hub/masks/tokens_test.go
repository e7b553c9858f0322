package masks

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// revoked records the tokens a Tokens revokes.
type revoked struct {
	mu   sync.Mutex
	toks []string
}

func (r *revoked) revoke(_ context.Context, tok string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.toks = append(r.toks, tok)
	return nil
}

func (r *revoked) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.toks)
}

// TestASandboxTokenIsRevokedOnceReplacedOrItsSessionStops: after a
// refresh the previous token is revoked once the grace is over, not
// before; the current one when its Session stops, at once, by a Hub
// restarted since it was minted too (the store keeps it, sealed); a revoke
// still in its grace at close is dropped, and a Session stopped after
// close keeps its token in the store, for the next Hub.
func TestASandboxTokenIsRevokedOnceReplacedOrItsSessionStops(t *testing.T) {
	const grace = 300 * time.Millisecond
	f := newFixture(t)
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	repo, _ := f.store.Repos.EnsureRepo(ctx, "https://github.com/acme/app", "acme/app")
	session := func() string {
		s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	var r revoked
	tokens := NewTokens(f.store.Sessions, f.secrets, r.revoke, grace, f.log)
	s1 := session()
	for _, tok := range []string{"first", "second"} {
		if err := tokens.Minted(ctx, s1, tok); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(grace / 3)
	if got := r.list(); len(got) != 0 {
		t.Fatalf("revoked %q within the grace, want none yet", got)
	}
	testenv.Eventually(t, testenv.WaitShort, "the previous token revoked", func() bool { return slices.Equal(r.list(), []string{"first"}) })

	// The Hub restarts: a new tracker over the same store.
	tokens.Close()
	tokens = NewTokens(f.store.Sessions, f.secrets, r.revoke, grace, f.log)
	tokens.Stopped(ctx, s1)
	testenv.Eventually(t, testenv.WaitShort, "the current token revoked as its Session stops", func() bool {
		return slices.Equal(r.list(), []string{"first", "second"})
	})
	tokens.Stopped(ctx, s1) // nothing left to revoke
	if sealed, _ := f.store.Sessions.SwapSandboxToken(ctx, s1, nil); sealed != nil {
		t.Fatal("a stopped Session still holds a Sandbox token")
	}

	s2 := session()
	tokens.Minted(ctx, s2, "third")
	tokens.Minted(ctx, s2, "fourth")
	tokens.Close()
	tokens.Stopped(ctx, s2)
	time.Sleep(2 * grace)
	if got := r.list(); len(got) != 2 {
		t.Fatalf("revoked %q, want nothing after close", got)
	}
	if sealed, _ := f.store.Sessions.SwapSandboxToken(ctx, s2, nil); sealed == nil {
		t.Fatal("a Session stopped after close no longer holds its token, which nobody revoked")
	}
}
