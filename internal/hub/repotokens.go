package hub

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// repoToken mints a token of the Hub's GitHub App for a Session's Repo
// alone, with perms: fresh for each request, never cached or shared. It
// returns ErrNotFound without the App or with the App not on the Repo.
func (h *Hub) repoToken(ctx context.Context, s store.Session, perms map[string]string) (protocol.GitHubToken, error) {
	gh := h.guard.gh
	if gh == nil || !gh.HasApp() {
		return protocol.GitHubToken{}, fmt.Errorf("this Hub has no GitHub App (GITHUB_APP_ID): %w", errdefs.ErrNotFound)
	}
	owner, name, ok := gh.ParseRepo(s.RepoURL)
	if !ok {
		return protocol.GitHubToken{}, fmt.Errorf("the Session's Repo is not on %s: %w", h.cfg.GitHubURL, errdefs.ErrNotFound)
	}
	tok, err := gh.RepoToken(ctx, owner, name, perms)
	if err != nil {
		return protocol.GitHubToken{}, err
	}
	return protocol.GitHubToken{Token: tok.Value, ExpiresAt: tok.Expires, ExpiresIn: int64(time.Until(tok.Expires) / time.Second), URL: h.cfg.GitHubURL}, nil
}

// sandboxToken mints a Session's Sandbox token and masks it in the
// Session's text from then on, as long as the Session runs: the set keeps
// every token it was given, the previous one with the current, and the
// store keeps it sealed so a restarted Hub goes on masking it.
func (h *Hub) sandboxToken(ctx context.Context, s store.Session) (protocol.GitHubToken, error) {
	tok, err := h.repoToken(ctx, s, github.SandboxPermissions)
	if err != nil {
		return tok, err
	}
	set, err := h.sessionSet(ctx, s.ID)
	if err != nil {
		return protocol.GitHubToken{}, err
	}
	if err := h.store.AddSessionMask(ctx, s.ID, h.secrets.Seal([]byte(tok.Token), maskSeal(s.ID))); err != nil {
		return protocol.GitHubToken{}, err
	}
	if err := set.Add(tok.Token); err != nil {
		return protocol.GitHubToken{}, err
	}
	h.tokens.minted(s.ID, tok.Token)
	return tok, nil
}

// sandboxTokens ends each Session's Sandbox tokens at GitHub once they are
// not its current one, so a copy taken from a Sandbox is good for minutes,
// not the rest of its hour: the previous one grace after a refresh (a git
// command that read it just before may finish), the last one when the
// Session stops running. One minted before a Hub restart, or with a
// revoke pending at a Hub's close, ends at its expiry.
type sandboxTokens struct {
	revoke func(ctx context.Context, token string) error
	grace  time.Duration
	log    *slog.Logger

	mu      sync.Mutex
	current map[string]string // by Session id
	pending map[*time.Timer]struct{}
	closed  bool
	wg      sync.WaitGroup
}

func newSandboxTokens(revoke func(context.Context, string) error, grace time.Duration, log *slog.Logger) *sandboxTokens {
	return &sandboxTokens{revoke: revoke, grace: grace, log: log, current: map[string]string{}, pending: map[*time.Timer]struct{}{}}
}

// revokeTimeout bounds one revoke at GitHub.
const revokeTimeout = 30 * time.Second

// minted makes token the Session's current one; the one before it ends
// after grace.
func (t *sandboxTokens) minted(sessionID, token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.current[sessionID]
	t.current[sessionID] = token
	if prev == "" || t.closed {
		return
	}
	var timer *time.Timer
	timer = time.AfterFunc(t.grace, func() {
		t.mu.Lock()
		_, armed := t.pending[timer]
		delete(t.pending, timer)
		if armed {
			t.wg.Add(1)
		}
		t.mu.Unlock()
		if armed {
			defer t.wg.Done()
			t.end(sessionID, prev)
		}
	})
	t.pending[timer] = struct{}{}
}

// stopped ends the Session's current token at once: it no longer runs.
func (t *sandboxTokens) stopped(sessionID string) {
	t.mu.Lock()
	tok := t.current[sessionID]
	delete(t.current, sessionID)
	if tok == "" || t.closed {
		t.mu.Unlock()
		return
	}
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		t.end(sessionID, tok)
	}()
}

func (t *sandboxTokens) end(sessionID, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	if err := t.revoke(ctx, token); err != nil {
		t.log.Warn("a Session's Sandbox token was not revoked at GitHub; it ends at its expiry", "session", sessionID, "err", err)
	}
}

// close drops the revokes still waiting for their grace and waits for the
// ones under way.
func (t *sandboxTokens) close() {
	t.mu.Lock()
	t.closed = true
	for timer := range t.pending {
		timer.Stop()
	}
	clear(t.pending)
	t.mu.Unlock()
	t.wg.Wait()
}
