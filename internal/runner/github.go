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

// refreshToken asks the Hub for the Session's GitHub token and
// gives it to the git relay, which holds it in memory alone (the Sandbox
// never has it), and returns how long to wait before asking
// again: three quarters of the token's life, or RUNNER_GITHUB_TOKEN_RETRY
// when there is none. A Session runs on without one; the first failure of
// a run of them is logged, the rest are not.
func (s *session) refreshToken(ctx context.Context, retry time.Duration) time.Duration {
	var tok protocol.GitHubToken
	err := s.link.request(ctx, protocol.TypeSessionGitHubToken, protocol.SessionRef{SessionID: s.id}, &tok)
	expiry := tok.Expiry(time.Now())
	if err == nil {
		err = holdGitToken(s.git, s.id, tok)
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
			s.log.Log(ctx, level, "no GitHub token for a Session's Sandbox; asking again", "session", s.id, "every", retry, "err", err)
			s.logLine(fmt.Sprintf("git and gh in the Sandbox have no GitHub token: %v (asking again every %s)", err, retry))
		}
		return retry
	}
	if s.tokenFailing.Swap(false) {
		s.logLine("git and gh in the Sandbox have a GitHub token now")
	}
	return min(maxTokenRefresh, max(time.Second, time.Until(expiry)*3/4))
}

// keepToken asks for a running Session's Sandbox token at once, closing
// first (if set) after that first try, and then again whenever
// refreshToken says, until the Session ends here. A Session has one such
// loop: its start's, or for one taken back after a restart, its
// watchers'.
func (s *session) keepToken(first chan struct{}) {
	if s.tokenKept.Swap(true) {
		return
	}
	s.spawn(func() {
		wait := s.refreshToken(s.ctx, s.tokenRetry)
		if first != nil {
			close(first)
		}
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = s.refreshToken(s.ctx, s.tokenRetry)
		}
	})
}

// holdGitToken gives tok to the git relay for the Session. A Session
// whose Repo the relay doesn't serve (not over HTTP(S)) needs none.
func holdGitToken(git gitTokens, id string, tok protocol.GitHubToken) error {
	if tok.Token == "" || strings.ContainsAny(tok.Token, "\n\r") {
		return fmt.Errorf("the Hub's GitHub token answer is malformed: %w", errdefs.ErrInvalid)
	}
	if err := git.SetToken(id, tok.Token); err != nil {
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

// get returns a read-only token for the Session's Repo, or "" when
// the Hub has no App on it (the clone then uses the host's git
// credentials). Any other refusal fails the clone: a Hub with the App
// never lets a clone fall back to the host's credentials.
func (c *cloneTokens) get(ctx context.Context, hub *link, sessionID, repo string) (string, error) {
	c.mu.Lock()
	tok, ok := c.m[repo]
	c.mu.Unlock()
	if ok && time.Until(tok.ExpiresAt) > cloneTokenMargin {
		return tok.Token, nil
	}
	err := hub.request(ctx, protocol.TypeSessionCloneToken, protocol.SessionRef{SessionID: sessionID}, &tok)
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
