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
	"kndl.dev/kndl/internal/seal"
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
// store keeps it sealed so a restarted Hub goes on masking it. The token
// pushes and writes pull requests only if the Session's Creator may push
// to the Repo, asked of GitHub at each mint, so one who lost push gets a
// read-only token at the next refresh; the Session's view says which.
func (h *Hub) sandboxToken(ctx context.Context, s store.Session) (protocol.GitHubToken, error) {
	creator, err := h.store.UserByID(ctx, s.CreatorID)
	if err != nil {
		return protocol.GitHubToken{}, err
	}
	perms, git := github.SandboxReadPermissions, gitRead
	if h.askGitHub(ctx, creator, s.RepoURL, true, true) { // fresh: canPush without the cache
		perms, git = github.SandboxPermissions, gitWrite
	}
	tok, err := h.repoToken(ctx, s, perms)
	if err != nil {
		return tok, err
	}
	if changed, err := h.store.SetSandboxGit(ctx, s.ID, git); err != nil {
		return protocol.GitHubToken{}, err
	} else if changed {
		h.sessions.Changed(s.ID)
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
	if err := h.tokens.minted(ctx, s.ID, tok.Token); err != nil {
		return protocol.GitHubToken{}, err
	}
	return tok, nil
}

// What a Sandbox token lets git do (store.Session.SandboxGit).
const (
	gitWrite = "write"
	gitRead  = "read"
)

// sandboxTokens ends each Session's Sandbox tokens at GitHub once they are
// not its current one, so a copy taken from a Sandbox is good for minutes,
// not the rest of its hour: the previous one grace after a refresh (a git
// command that read it just before may finish), the last one when the
// Session stops running. The current one is in the store, sealed, so a
// restarted Hub revokes it too; a revoke still waiting for its grace when
// the Hub stops is dropped, and that token ends at its expiry.
type sandboxTokens struct {
	store   *store.Store
	secrets *seal.Box
	revoke  func(ctx context.Context, token string) error
	grace   time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	pending map[*time.Timer]struct{}
	closed  bool
	wg      sync.WaitGroup
}

func newSandboxTokens(st *store.Store, secrets *seal.Box, revoke func(context.Context, string) error, grace time.Duration, log *slog.Logger) *sandboxTokens {
	return &sandboxTokens{store: st, secrets: secrets, revoke: revoke, grace: grace, log: log, pending: map[*time.Timer]struct{}{}}
}

// revokeTimeout bounds one revoke at GitHub.
const revokeTimeout = 30 * time.Second

// tokenSeal binds a stored Sandbox token to its Session.
func tokenSeal(sessionID string) string { return "sandbox-token:" + sessionID }

// minted makes token the Session's current one; the one before it ends
// after grace.
func (t *sandboxTokens) minted(ctx context.Context, sessionID, token string) error {
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

// stopped ends the Session's current token at once: it no longer runs. A
// closed tracker leaves it in the store, for the next Hub to revoke.
func (t *sandboxTokens) stopped(ctx context.Context, sessionID string) {
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
func (t *sandboxTokens) swap(ctx context.Context, sessionID string, sealed []byte) (string, error) {
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

// goEnd revokes token at GitHub in a goroutine close waits for; call with
// t.mu held.
func (t *sandboxTokens) goEnd(sessionID, token string) {
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
