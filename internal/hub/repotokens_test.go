package hub

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// revoked records the tokens a sandboxTokens revokes.
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
// before; the current one when its Session stops, at once; a revoke still
// in its grace at close is dropped.
func TestASandboxTokenIsRevokedOnceReplacedOrItsSessionStops(t *testing.T) {
	const grace = 300 * time.Millisecond
	var r revoked
	tokens := newSandboxTokens(r.revoke, grace, slog.New(slog.DiscardHandler))
	tokens.minted("s1", "first")
	tokens.minted("s1", "second")
	time.Sleep(grace / 3)
	if got := r.list(); len(got) != 0 {
		t.Fatalf("revoked %q within the grace, want none yet", got)
	}
	testenv.Eventually(t, testenv.WaitShort, "the previous token revoked", func() bool { return slices.Equal(r.list(), []string{"first"}) })
	tokens.stopped("s1")
	testenv.Eventually(t, testenv.WaitShort, "the current token revoked as its Session stops", func() bool {
		return slices.Equal(r.list(), []string{"first", "second"})
	})

	tokens.minted("s2", "third")
	tokens.minted("s2", "fourth")
	tokens.close()
	tokens.stopped("s2")
	time.Sleep(2 * grace)
	if got := r.list(); len(got) != 2 {
		t.Fatalf("revoked %q, want nothing after close", got)
	}
}
