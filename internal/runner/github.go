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
	"kndl.dev/kndl/internal/sandbox"
)

// The Sandbox token's files, on the Sandbox's /run/kndl tmpfs (mode 0700):
// the token itself, and gh's hosts file naming it, which
// ~/.config/gh/hosts.yml links to.
const (
	githubTokenFile = runDir + "/github-token"
	ghHostsFile     = runDir + "/gh-hosts.yml"
)

// DefaultGitHubTokenRetry is how long a Runner waits to ask again for a
// Sandbox token the Hub could not give, when RUNNER_GITHUB_TOKEN_RETRY is
// not set.
const DefaultGitHubTokenRetry = 5 * time.Minute

// maxTokenRefresh bounds the wait before a Sandbox token is asked for again:
// 45 minutes, three quarters of a GitHub installation token's hour.
const maxTokenRefresh = 45 * time.Minute

// credentialHelper is git's credential helper for GitHub in the Sandbox: it
// reads the token file at each use, so a refresh reaches every git at once,
// and it puts the token on no command line (printf and cat's output only).
const credentialHelper = `!f() { test "$1" = get || return 0; echo username=x-access-token; printf 'password=%s\n' "$(cat ` + githubTokenFile + `)"; }; f`

// installToken is run by sh in the Sandbox with the token on its stdin and
// GitHub's URL ($1) and host ($2) as arguments, so the token is on no
// command line and in no environment. Each file is replaced by a rename,
// so no reader sees half a token. The credential helper is set only where
// git is installed, at each refresh, so a git installed since is set up
// too.
const installToken = `set -e
umask 077
cat > ` + githubTokenFile + `.new
mv -f ` + githubTokenFile + `.new ` + githubTokenFile + `
{ printf '%s:\n' "$2"; printf '    oauth_token: %s\n' "$(cat ` + githubTokenFile + `)"; printf '    git_protocol: https\n'; } > ` + ghHostsFile + `.new
mv -f ` + ghHostsFile + `.new ` + ghHostsFile + `
mkdir -p "$HOME/.config/gh"
ln -sfn ` + ghHostsFile + ` "$HOME/.config/gh/hosts.yml"
if command -v git >/dev/null 2>&1; then
	git config --system --replace-all "credential.$1.helper" "$3"
fi
`

// refreshSandboxToken asks the Hub for the Session's Sandbox token and
// writes it into the Sandbox, and returns how long to wait before asking
// again: three quarters of the token's life, or RUNNER_GITHUB_TOKEN_RETRY
// when there is none. A Session runs on without one; the first failure of
// a run of them is logged, the rest are not.
func (r *Runner) refreshSandboxToken(ctx context.Context, s *session) time.Duration {
	var tok protocol.GitHubToken
	err := r.request(ctx, protocol.TypeSessionGitHubToken, protocol.SessionRef{SessionID: s.id}, &tok)
	expiry := tok.Expiry(time.Now())
	if err == nil {
		err = r.writeSandboxToken(ctx, s, tok)
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

// writeSandboxToken puts tok in the Sandbox's token files, through a
// process's stdin.
func (r *Runner) writeSandboxToken(ctx context.Context, s *session, tok protocol.GitHubToken) error {
	host := strings.TrimPrefix(strings.TrimPrefix(tok.URL, "https://"), "http://")
	if tok.Token == "" || host == "" || strings.ContainsAny(tok.Token, "\n\r") {
		return fmt.Errorf("the Hub's GitHub token answer is malformed: %w", errdefs.ErrInvalid)
	}
	var out strings.Builder
	p, err := r.backend.Exec(ctx, s.sandbox, sandbox.Cmd{
		Args:  []string{"sh", "-c", installToken, "install-token", tok.URL, host, credentialHelper},
		Env:   []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"},
		Stdin: strings.NewReader(tok.Token), Stdout: &out, Stderr: &out,
	})
	if err != nil {
		return fmt.Errorf("write the GitHub token into the Sandbox: %w", err)
	}
	if code, err := p.Wait(); err != nil || code != 0 {
		return fmt.Errorf("write the GitHub token into the Sandbox: exit %d %v: %s", code, err, strings.TrimSpace(out.String()))
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
