package masks

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"kndl.dev/kndl/internal/seal"
)

// Tokens ends each Session's Sandbox tokens at GitHub once they are
// not its current one, so a copy taken from a Sandbox is good for minutes,
// not the rest of its hour: the previous one grace after a refresh (a git
// command that read it just before may finish), the last one when the
// Session stops running. The current one is in the store, sealed, so a
// restarted Hub revokes it too; a revoke still waiting for its grace when
// the Hub stops is dropped, and that token ends at its expiry.
type Tokens struct {
	store   TokenSwapper
	secrets *seal.Box
	revoke  func(ctx context.Context, token string) error
	grace   time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	pending map[*time.Timer]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// TokenSwapper keeps a Session's current Sandbox token, sealed, and gives
// back the one it replaces (store.Sessions).
type TokenSwapper interface {
	SwapSandboxToken(ctx context.Context, id string, sealed []byte) ([]byte, error)
}

// NewTokens makes the tracker; revoke ends a token at GitHub. Close stops it.
func NewTokens(st TokenSwapper, secrets *seal.Box, revoke func(context.Context, string) error, grace time.Duration, log *slog.Logger) *Tokens {
	return &Tokens{store: st, secrets: secrets, revoke: revoke, grace: grace, log: log, pending: map[*time.Timer]struct{}{}}
}

// revokeTimeout bounds one revoke at GitHub.
const revokeTimeout = 30 * time.Second

// tokenSeal binds a stored Sandbox token to its Session.
func tokenSeal(sessionID string) string { return "sandbox-token:" + sessionID }

// Minted makes token the Session's current one; the one before it ends
// after grace.
func (t *Tokens) Minted(ctx context.Context, sessionID, token string) error {
	prev, err := t.swap(ctx, sessionID, t.secrets.Seal([]byte(token), tokenSeal(sessionID)))
	if err != nil || prev == "" {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	var timer *time.Timer
	timer = time.AfterFunc(t.grace, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if _, armed := t.pending[timer]; armed {
			delete(t.pending, timer)
			t.goEnd(sessionID, prev)
		}
	})
	t.pending[timer] = struct{}{}
	return nil
}

// Stopped ends the Session's current token at once: it no longer runs. A
// closed tracker leaves it in the store, for the next Hub to revoke.
func (t *Tokens) Stopped(ctx context.Context, sessionID string) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return
	}
	prev, err := t.swap(ctx, sessionID, nil)
	if err != nil {
		t.log.Error("forget a Session's Sandbox token", "session", sessionID, "err", err)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev != "" && !t.closed {
		t.goEnd(sessionID, prev)
	}
}

// swap keeps sealed as the Session's current token and returns the one
// it replaces, opened.
func (t *Tokens) swap(ctx context.Context, sessionID string, sealed []byte) (string, error) {
	prev, err := t.store.SwapSandboxToken(ctx, sessionID, sealed)
	if err != nil || prev == nil {
		return "", err
	}
	plain, err := t.secrets.Open(prev, tokenSeal(sessionID))
	if err != nil {
		return "", fmt.Errorf("the kept Sandbox token of session %s: %w", sessionID, err)
	}
	return string(plain), nil
}

// goEnd revokes token at GitHub in a goroutine Close waits for; call with
// t.mu held.
func (t *Tokens) goEnd(sessionID, token string) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
		defer cancel()
		if err := t.revoke(ctx, token); err != nil {
			t.log.Warn("a Session's Sandbox token was not revoked at GitHub; it ends at its expiry", "session", sessionID, "err", err)
		}
	}()
}

// Close drops the revokes still waiting for their grace and waits for the
// ones under way.
func (t *Tokens) Close() {
	t.mu.Lock()
	t.closed = true
	for timer := range t.pending {
		timer.Stop()
	}
	clear(t.pending)
	t.mu.Unlock()
	t.wg.Wait()
}
