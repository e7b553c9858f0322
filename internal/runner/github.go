package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// DefaultGitHubTokenRetry is how long a Runner waits to ask again for a
// Sandbox token the Hub could not give, when RUNNER_GITHUB_TOKEN_RETRY is
// not set.
const DefaultGitHubTokenRetry = 5 * time.Minute

// maxTokenRefresh bounds the wait before a Sandbox token is asked for again:
// 45 minutes, three quarters of a GitHub installation token's hour.
const maxTokenRefresh = 45 * time.Minute

// refreshSandboxToken asks the Hub for the Session's GitHub token and
// gives it to the git relay, which holds it in memory alone (the Sandbox
// never has it), and returns how long to wait before asking
// again: three quarters of the token's life, or RUNNER_GITHUB_TOKEN_RETRY
// when there is none. A Session runs on without one; the first failure of
// a run of them is logged, the rest are not.
func (r *Runner) refreshSandboxToken(ctx context.Context, s *session) time.Duration {
	var tok protocol.GitHubToken
	err := r.request(ctx, protocol.TypeSessionGitHubToken, protocol.SessionRef{SessionID: s.id}, &tok)
	expiry := tok.Expiry(time.Now())
	if err == nil {
		err = r.holdGitToken(s, tok)
	}
	if err != nil {
		if !s.tokenFailing.Swap(true) {
			// ErrNotFound is the Hub having no token to give: no GitHub
			// App, which the Hub says once at start, or none on this
			// Repo, which the Session's own log says below. A warning at
			// each Session's start would only repeat it.
			level := slog.LevelWarn
			if errors.Is(err, errdefs.ErrNotFound) {
				level = slog.LevelDebug
			}
			r.log.Log(ctx, level, "no GitHub token for a Session's Sandbox; asking again", "session", s.id, "every", r.cfg.GitHubTokenRetry, "err", err)
			r.sessionLog(s.id, fmt.Sprintf("git and gh in the Sandbox have no GitHub token: %v (asking again every %s)", err, r.cfg.GitHubTokenRetry))
		}
		return r.cfg.GitHubTokenRetry
	}
	if s.tokenFailing.Swap(false) {
		r.sessionLog(s.id, "git and gh in the Sandbox have a GitHub token now")
	}
	return min(maxTokenRefresh, max(time.Second, time.Until(expiry)*3/4))
}

// keepSandboxToken asks for a running Session's Sandbox token at once,
// closing first (if set) after that first try, and then again whenever
// refreshSandboxToken says, until the Session ends here. A Session has one
// such loop: its start's, or for one taken back after a restart, its
// watchers'.
func (r *Runner) keepSandboxToken(s *session, first chan struct{}) {
	if s.tokenKept.Swap(true) {
		return
	}
	r.spawn(func() {
		wait := r.refreshSandboxToken(s.ctx, s)
		if first != nil {
			close(first)
		}
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = r.refreshSandboxToken(s.ctx, s)
		}
	})
}

// holdGitToken gives tok to the git relay for the Session. A Session
// whose Repo the relay doesn't serve (not over HTTP(S)) needs none.
func (r *Runner) holdGitToken(s *session, tok protocol.GitHubToken) error {
	if tok.Token == "" || strings.ContainsAny(tok.Token, "\n\r") {
		return fmt.Errorf("the Hub's GitHub token answer is malformed: %w", errdefs.ErrInvalid)
	}
	if err := r.git.SetToken(s.id, tok.Token); err != nil {
		return fmt.Errorf("the git relay does not serve this Session's Repo: %w", errdefs.ErrNotFound)
	}
	return nil
}

// cloneTokens keeps the host clone's read-only tokens, by Repo, until
// five minutes before each expires: in memory alone.
type cloneTokens struct {
	mu sync.Mutex
	m  map[string]protocol.GitHubToken
}

// cloneTokenMargin is how long before its expiry a clone token is no
// longer used: a clone must not outlive its token.
const cloneTokenMargin = 5 * time.Minute

// cloneToken returns a read-only token for the Session's Repo, or "" when
// the Hub has no App on it (the clone then uses the host's git
// credentials). Any other refusal fails the clone: a Hub with the App
// never lets a clone fall back to the host's credentials.
func (r *Runner) cloneToken(ctx context.Context, sessionID, repo string) (string, error) {
	c := &r.clones
	c.mu.Lock()
	tok, ok := c.m[repo]
	c.mu.Unlock()
	if ok && time.Until(tok.ExpiresAt) > cloneTokenMargin {
		return tok.Token, nil
	}
	err := r.request(ctx, protocol.TypeSessionCloneToken, protocol.SessionRef{SessionID: sessionID}, &tok)
	tok.ExpiresAt = tok.Expiry(time.Now()) // kept on this Runner's clock
	if errors.Is(err, errdefs.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the Hub gave no token to clone the Repo with: %w", err)
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]protocol.GitHubToken{}
	}
	c.m[repo] = tok
	c.mu.Unlock()
	return tok.Token, nil
}
