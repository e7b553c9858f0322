package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"kndl.dev/kndl/internal/gitrelay"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
)

// The Sandbox's git reaches the Session's Repo through the Runner's git
// relay (internal/gitrelay), on the relay's port: the Runner holds the
// Session's GitHub token in memory, and the Sandbox holds none.

// gitServedFile keeps, in the Session's directory on the Runner, what its
// git relay serves it: a restarted Runner and a wake serve the same, and
// the Session may go on updating the branches it made.
const gitServedFile = "git-relay.json"

// gitServed is gitServedFile's content.
type gitServed struct {
	Repo   string   `json:"repo"`
	Prefix string   `json:"prefix"`
	Made   []string `json:"made,omitempty"`
}

// gitCredentialHelper is git's credential helper for the relay in the
// Sandbox: the Session token from the environment of the process that
// runs git (Claude Code's, and so every tool's), never from a file. The
// token is on no disk and no command line: the Sandbox's gitconfig names
// the variable, not its value.
const gitCredentialHelper = `!f() { test "$1" = get || return 0; echo username=kndl; printf 'password=%s\n' "$KNDL_MOD_TOKEN"; }; f`

// gitConfigScript is run by sh in the Sandbox: the Repo's URL ($2, and any
// URL that starts with it) goes to the relay ($1) wherever git meets it,
// origin included, with the relay's credential helper ($4 for the relay at
// $3). What a Runner before the relay left is taken away: the GitHub
// token's helper for GitHub ($5) and the token's files. The remote
// "github", the Repo on gh's host ($6, see ghEnv), is there for gh alone:
// gh 2.23 finds its Repo by a remote whose host is GH_HOST, and git shows
// it origin's URL as rewritten to the relay. git fetch --all skips it. It
// does nothing where the image has no git.
const gitConfigScript = `command -v git >/dev/null 2>&1 || exit 0
set -e
git config --system --replace-all "url.$1.insteadOf" "$2"
git config --system --replace-all "credential.$3.helper" "$4"
git config --system --unset-all "credential.$5.helper" || true
git config --system --replace-all remote.github.url "$6"
git config --system --replace-all remote.github.skipFetchAll true
rm -f ` + runDir + `/github-token ` + runDir + `/gh-hosts.yml
`

// openGit has the git relay serve a starting Session's Repo, under the
// Environment's branch prefix, and points the Sandbox's git at it. A Repo
// not over HTTP(S) (a path on the Runner's host) is not served.
func (r *Runner) openGit(ctx context.Context, s *session, repo string, env *protocol.Environment) error {
	if err := r.serveGit(s, repo, env); err != nil {
		return err
	}
	return pointGit(ctx, r.backend, s.sandbox, repo)
}

// serveGit is openGit's part on the Runner: the git relay serves Session
// s's Repo.
func (r *Runner) serveGit(s *session, repo string, env *protocol.Environment) error {
	if _, ok := gitrelay.RepoPath(repo); !ok {
		return nil
	}
	var envPrefix string
	if env != nil {
		envPrefix = env.BranchPrefix
	}
	served := gitServed{Repo: repo, Prefix: gitrelay.BranchPrefix(envPrefix, s.id)}
	if kept, err := readGitServed(s.dir); err == nil && kept.Repo == repo && kept.Prefix == served.Prefix {
		served.Made = kept.Made
	}
	if err := r.git.Open(s.id, gitrelay.Session{Repo: repo, Prefix: served.Prefix, Made: served.Made}); err != nil {
		return err
	}
	return keepGitServed(s.dir, served)
}

// pointGit is openGit's part in Sandbox id: its git goes to the git relay
// for repo. It names no Session (git's credential helper reads the token
// from its environment), so a warm pool Sandbox's is made as it fills.
func pointGit(ctx context.Context, backend sandbox.Backend, id, repo string) error {
	p, ok := gitrelay.RepoPath(repo)
	if !ok {
		return nil
	}
	relayURL := "http://" + sandbox.RelayHost + ":" + relayPort(backend.Host())
	u, _ := url.Parse(repo)
	_, err := sandbox.Output(ctx, backend, id, sandbox.Cmd{
		Args: []string{"sh", "-c", gitConfigScript, "git-relay", relayURL + "/git/" + strings.TrimSuffix(p, ".git"), strings.TrimSuffix(repo, ".git"),
			relayURL, gitCredentialHelper, u.Scheme + "://" + u.Host, "http://" + gitrelay.GHHost + "/" + strings.TrimSuffix(p, ".git")},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"},
	})
	if err != nil {
		return fmt.Errorf("point the Sandbox's git at the Runner's git relay: %w", err)
	}
	return nil
}

// reopenGit has the git relay serve a Session taken back after the
// Runner's restart as it served it before; the Sandbox's git still points
// at the relay.
func (r *Runner) reopenGit(id string) {
	kept, err := readGitServed(r.sessionDir(id))
	if err != nil {
		return // none: its Repo is not served
	}
	if err := r.git.Open(id, gitrelay.Session{Repo: kept.Repo, Prefix: kept.Prefix, Made: kept.Made}); err != nil {
		r.log.Warn("the git relay can't serve a Session taken back", "session", id, "err", err)
	}
}

// gitPushed is told by the git relay of the refs of a push GitHub took:
// the branches are kept as the Session's own, and the Hub told.
func (r *Runner) gitPushed(_ context.Context, id string, took []gitrelay.Update) {
	refs := make([]protocol.PushedRef, 0, len(took))
	r.gitMu.Lock()
	kept, err := readGitServed(r.sessionDir(id))
	if err == nil {
		for _, u := range took {
			if b := u.Branch(); b != "" && !u.Delete() && !slices.Contains(kept.Made, b) {
				kept.Made = append(kept.Made, b)
			}
		}
		err = keepGitServed(r.sessionDir(id), kept)
	}
	r.gitMu.Unlock()
	if err != nil {
		r.log.Warn("keep the branches a Session pushed", "session", id, "err", err)
	}
	for _, u := range took {
		refs = append(refs, protocol.PushedRef{Ref: u.Ref, Old: u.Old, New: u.New})
	}
	r.notify(id, protocol.TypeSessionPushed, protocol.SessionPushed{SessionID: id, Refs: refs})
}

func readGitServed(dir string) (gitServed, error) {
	var g gitServed
	b, err := os.ReadFile(filepath.Join(dir, gitServedFile))
	if err != nil {
		return g, err
	}
	return g, json.Unmarshal(b, &g)
}

func keepGitServed(dir string, g gitServed) error {
	b, _ := json.Marshal(g)
	return writeAtomic(filepath.Join(dir, gitServedFile), b)
}

// ghEnv is what points gh in the Sandbox at the git relay, for Claude
// Code's environment: gh 2.23 speaks plain HTTP to GH_HOST github.localhost
// alone and calls its API at http://api.github.localhost/, which the
// Sandbox's hosts file and firewall send to the relay; the Session token
// is gh's token, which the relay swaps for the forge token it holds; and
// GH_REPO names the Repo where gh runs outside the Workspace. None for a
// Repo the relay does not serve.
func ghEnv(repo, sessionToken string) []string {
	p, ok := gitrelay.RepoPath(repo)
	if !ok {
		return nil
	}
	return []string{"GH_HOST=" + gitrelay.GHHost, "GH_TOKEN=" + sessionToken,
		"GH_REPO=" + gitrelay.GHHost + "/" + strings.TrimSuffix(p, ".git"), "GH_NO_UPDATE_NOTIFIER=1"}
}
