package hub

import (
	"context"
	"fmt"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// maxRefusalTTL bounds how long GitHub's no is trusted, so someone just
// added as a collaborator gets in soon: a tenth of the TTL, at most 30 s
// (which the default 5-minute TTL gives).
const maxRefusalTTL = 30 * time.Second

func (g *guard) refusalTTL() time.Duration { return min(maxRefusalTTL, g.accessTTL/10) }

// repoAccess caches GitHub's answers on who may access which Repo.
type repoAccess struct {
	mu sync.Mutex
	m  map[accessKey]accessEntry
}

// accessKey is one question asked of GitHub: whether user (an id) has
// access to repo ("owner/name"), or with push set, write permission.
type accessKey struct {
	user, repo string
	push       bool
}

type accessEntry struct {
	ok bool
	at time.Time
}

// canAccess reports whether u has access to the Repo at repoURL: the dev
// user to every Repo; anyone else when the GitHub App is installed on it
// and GitHub says they are a collaborator. Answers are cached for
// HUB_REPO_ACCESS_TTL_MS, a no for at most 30 s (refusalTTL). When GitHub
// can't answer, people keep the access they had until GitHub's last answer
// expires, and nobody gains any. fresh skips the cache, for the periodic
// re-check.
func (g *guard) canAccess(ctx context.Context, u store.User, repoURL string, fresh bool) bool {
	return g.askGitHub(ctx, u, repoURL, fresh, false)
}

// canPush reports whether u may change the Repo at repoURL's Variables:
// the dev user always; anyone else when GitHub gives them write (push)
// permission on it, cached as canAccess caches access.
func (g *guard) canPush(ctx context.Context, u store.User, repoURL string) bool {
	return g.askGitHub(ctx, u, repoURL, false, true)
}

// askGitHub answers canAccess's and canPush's question, cached.
func (g *guard) askGitHub(ctx context.Context, u store.User, repoURL string, fresh, push bool) bool {
	if u.IsDev {
		return true
	}
	gh := g.gh
	if gh == nil || !gh.HasApp() || u.GitHubLogin == "" {
		return false
	}
	owner, name, ok := gh.ParseRepo(repoURL)
	if !ok {
		return false
	}
	key := accessKey{u.ID, owner + "/" + name, push}
	a := &g.access
	a.mu.Lock()
	e, cached := a.m[key]
	a.mu.Unlock()
	live := cached && time.Since(e.at) < g.answerTTL(e.ok)
	if live && !fresh {
		return e.ok
	}
	ask := gh.IsCollaborator
	if push {
		ask = gh.CanPush
	}
	yes, err := ask(ctx, owner, name, u.GitHubLogin)
	if err != nil {
		// GitHub's last answer holds until it expires, and a failure never
		// renews it: someone removed on GitHub during an outage is out
		// within twice the TTL, as if GitHub had answered. Past it, a
		// failure is a no, asked again after refusalTTL.
		g.log.Warn("GitHub can't answer on Repo access; keeping each person's last answer until it expires", "repo", key.repo, "err", err)
		if live {
			return e.ok
		}
		yes = false
	}
	a.mu.Lock()
	a.m[key] = accessEntry{ok: yes, at: time.Now()}
	a.mu.Unlock()
	return yes
}

// answerTTL is how long GitHub's answer is trusted: a yes for
// HUB_REPO_ACCESS_TTL_MS, a no for refusalTTL.
func (g *guard) answerTTL(ok bool) time.Duration {
	if ok {
		return g.accessTTL
	}
	return g.refusalTTL()
}

// forget drops a person's cached answers.
func (a *repoAccess) forget(userID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.m {
		if k.user == userID {
			delete(a.m, k)
		}
	}
}

// notFoundSession is the answer for a Session that doesn't exist, and for
// one the person has no access to: the two must read the same.
func notFoundSession(id string) error {
	return fmt.Errorf("session %s: %w", id, errdefs.ErrNotFound)
}

// checkRepoAccess refuses someone without access to the Repo at repoURL,
// alike whether it exists or not, as starting a Session on it needs.
func (g *guard) checkRepoAccess(ctx context.Context, p Principal, repoURL string) error {
	if g.canAccess(ctx, p.User, repoURL, false) {
		return nil
	}
	return fmt.Errorf("no Repo %s that you have access to: the GitHub App must be installed on it, and GitHub must say you are a collaborator: %w", repoURL, errdefs.ErrNotFound)
}

// visibleSessions keeps the Sessions of Repos the person has access to.
func (g *guard) visibleSessions(ctx context.Context, p Principal, ss []store.Session) []store.Session {
	seen := map[string]bool{}
	out := ss[:0:0]
	for _, s := range ss {
		ok, known := seen[s.RepoURL]
		if !known {
			ok = g.canAccess(ctx, p.User, s.RepoURL, false)
			seen[s.RepoURL] = ok
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// recheckRepoAccess asks GitHub again, for everyone connected, about each
// Repo whose Sessions they read, and ends what they read of a Repo they
// lost. It runs every HUB_REPO_ACCESS_TTL_MS.
func (g *guard) recheckRepoAccess(ctx context.Context) {
	type pair struct{ user, repo string }
	asked := map[pair]bool{}
	for _, c := range g.conns.snapshot() {
		for _, repo := range c.repoURLs() {
			k := pair{c.user.ID, repo}
			ok, done := asked[k]
			if !done {
				ok = g.canAccess(ctx, c.user, repo, true)
				asked[k] = ok
			}
			if !ok {
				c.cancel(errAccessLost)
			}
		}
	}
}

// repoToChange returns a Repo whose Variables or Environment (what) the
// person may change: one they have access to (else a refusal as for one
// that doesn't exist), and write permission on at GitHub, since either
// reaches every Creator's Sessions there.
func (g *guard) repoToChange(ctx context.Context, p Principal, id, what string) (store.Repo, error) {
	r, err := g.repoFor(ctx, p, id)
	if err == nil && !g.canPush(ctx, p.User, r.URL) {
		err = fmt.Errorf("changing the %s of %s takes write (push) permission on it at GitHub; you may read it only: %w", what, r.URL, errdefs.ErrForbidden)
	}
	return r, err
}

// repoFor returns a Repo the person has access to; a refusal reads the
// same whether the Repo exists or not.
func (g *guard) repoFor(ctx context.Context, p Principal, id string) (store.Repo, error) {
	r, err := g.store.Repos.RepoByID(ctx, id)
	if err == nil {
		err = g.checkRepoAccess(ctx, p, r.URL)
	}
	if err != nil {
		return store.Repo{}, fmt.Errorf("no Repo %s that you have access to: %w", id, errdefs.ErrNotFound)
	}
	return r, nil
}
