package gitrelay_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/gitrelay"
	"kndl.dev/kndl/internal/testenv"
)

// gate holds a push's body on its way from git to the relay: it lets
// after bytes through, then waits until opened (or cut, which fails the
// read as a closed connection does).
type gate struct {
	body    io.ReadCloser
	after   int64
	n       int64
	reached chan struct{} // closed once the body waits
	open    chan struct{} // closed to let the rest through
	once    sync.Once
	pushes  int // GitHub's pushes let through before the relay took this one
}

func newGate(after int64) *gate {
	return &gate{after: after, reached: make(chan struct{}), open: make(chan struct{})}
}

func (g *gate) Read(p []byte) (int, error) {
	if g.n >= g.after {
		g.once.Do(func() { close(g.reached) })
		<-g.open
	} else if left := g.after - g.n; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := g.body.Read(p)
	g.n += int64(n)
	return n, err
}

func (g *gate) Close() error { return g.body.Close() }

// waitFor waits for c, failing the test at the deadline.
func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(testenv.WaitLong):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// gatedFront is the rig's front, serving the relay it holds (none: it
// drops each connection, as a relay that is down), with the next push's
// body held by the gate it is given.
type gatedFront struct {
	srv   *httptest.Server
	url   string
	relay atomic.Pointer[gitrelay.Relay]
	gates chan *gate
	deaf  atomic.Bool // a push's answer is lost on its way to git
}

// lostWriter loses what is written, as a connection git closed does.
type lostWriter struct{ http.ResponseWriter }

func (lostWriter) Write([]byte) (int, error) { return 0, errors.New("git is gone") }

func (r *rig) gatedFront(t *testing.T) *gatedFront {
	f := &gatedFront{gates: make(chan *gate, 1)}
	f.relay.Store(r.relay)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rest, ok := strings.CutPrefix(req.URL.Path, "/git/")
		if _, pw, _ := req.BasicAuth(); !ok || pw != sessionToken {
			w.Header().Set("WWW-Authenticate", `Basic realm="kndl"`)
			http.Error(w, "no live Session token", http.StatusUnauthorized)
			return
		}
		if strings.HasSuffix(rest, "/git-receive-pack") && req.ContentLength != 4 { // not git's probe
			select {
			case g := <-f.gates:
				g.pushes = r.gh.Calls("git_push") // git's info/refs and probe are answered: the pack's request comes next
				g.body = req.Body
				req.Body = g
			default:
			}
		}
		if strings.HasSuffix(rest, "/git-receive-pack") && req.ContentLength != 4 && f.deaf.Load() {
			w = lostWriter{w}
		}
		relay := f.relay.Load()
		if relay == nil {
			panic(http.ErrAbortHandler) // the relay is down: the connection drops
		}
		relay.ServeGit(w, req, sessionID, rest)
	}))
	t.Cleanup(f.srv.Close)
	f.url = f.srv.URL + "/git/"
	return f
}

// push runs git push in the background, its output and error on the
// channel.
func push(t *testing.T, ws string, args ...string) <-chan [2]any {
	done := make(chan [2]any, 1)
	go func() {
		out, err := git(t, ws, append([]string{"push"}, args...)...)
		done <- [2]any{out, err}
	}()
	return done
}

// bigCommit commits a file of n random bytes, so a push's pack is n bytes
// and more: git can't compress it.
func bigCommit(t *testing.T, ws, name string, n int) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(filepath.Join(ws, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	gitOK(t, ws, "add", name)
	gitOK(t, ws, "commit", "-q", "-m", name)
}

// refresh mints a new token for acme/app, gives it to the relay, and
// once SetToken returned (the Runner's acknowledgement) revokes the old
// one at GitHub, as the Hub does after its grace.
func (r *rig) refresh(t *testing.T, relay *gitrelay.Relay) {
	t.Helper()
	c, err := github.New(github.Config{URL: r.gh.URL, APIURL: r.gh.URL, AppID: r.gh.AppID, PrivateKey: r.key})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.MintToken(context.Background(), "acme", "app", forge.Push) // as the Hub mints it
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.SetToken(sessionID, tok.Value); err != nil {
		t.Fatal(err)
	}
	if err := c.RevokeToken(context.Background(), r.token); err != nil {
		t.Fatal(err)
	}
	r.token = tok.Value
}

// TestAPushRacingATokenRefreshUsesTheTokenHeldWhenItReachesTheForge: a
// push whose body is held before the relay read its commands, while the
// token is replaced and the old one revoked, reaches GitHub with the new
// token and lands; one held mid-pack, after GitHub took its request with
// the old token, lands too; and the push after uses the new token alone
// (the old one is revoked, and GitHub would refuse it). A token revoked
// with none after it fails the push with a line git prints for its ref.
func TestAPushRacingATokenRefreshUsesTheTokenHeldWhenItReachesTheForge(t *testing.T) {
	r := newRig(t)
	f := r.gatedFront(t)
	ws := filepath.Join(t.TempDir(), "app")
	gitOK(t, "", "clone", "-q", f.url+"acme/app.git", ws)

	tests := []struct {
		name  string
		after int64 // the bytes of the push's body the relay reads before it waits
	}{
		{"held before its commands", 0},
		{"held mid-pack", 256 << 10},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			branch := prefix + "race" + string(rune('a'+i))
			bigCommit(t, ws, branch[len(prefix):], 2<<20)
			g := newGate(tt.after)
			f.gates <- g
			done := push(t, ws, "origin", "HEAD:"+branch)
			waitFor(t, g.reached, "the push's body to wait")
			if tt.after > 0 {
				// The relay sent the pack's request, but GitHub checks its
				// token when it reads the request, not when it was sent.
				testenv.Eventually(t, testenv.WaitLong, "GitHub to let the pack's request through with the token before the refresh", func() bool {
					return r.gh.Calls("git_push") > g.pushes
				})
			}
			r.refresh(t, r.relay)
			close(g.open)
			res := <-done
			if out, err := res[0].(string), res[1]; err != nil || !strings.Contains(out, "[new branch]      HEAD -> "+branch) {
				t.Fatalf("git push racing a refresh: %v\n%s\nwant the new branch %s", err, out, branch)
			}
			if got := r.gh.Branches(t, "acme/app"); !slices.Contains(got, branch) {
				t.Errorf("GitHub's branches: %v, want %s", got, branch)
			}
		})
	}
	// The next push: the revoked token would be refused (401).
	gitOK(t, ws, "commit", "-q", "--allow-empty", "-m", "after")
	if out, err := git(t, ws, "push", "origin", "HEAD:"+prefix+"raceb"); err != nil {
		t.Fatalf("the push after the refreshes: %v\n%s", err, out)
	}

	// The token revoked while a push waits, and none given after (the
	// Session went to sleep): GitHub refuses it, and git prints why for
	// each ref rather than "RPC failed; HTTP 403".
	bigCommit(t, ws, "revoked", 2<<20)
	g := newGate(0)
	f.gates <- g
	done := push(t, ws, "origin", "HEAD:"+prefix+"revoked")
	waitFor(t, g.reached, "the push's body to wait")
	c, _ := github.New(github.Config{URL: r.gh.URL, APIURL: r.gh.URL})
	if err := c.RevokeToken(context.Background(), r.token); err != nil {
		t.Fatal(err)
	}
	close(g.open)
	res := <-done
	host := strings.TrimPrefix(r.gh.URL, "http://")
	out, err := res[0].(string), res[1]
	for _, want := range []string{
		"! [remote rejected] HEAD -> " + prefix + "revoked (" + host + " refused it (403))",
		"remote: kndl: " + host + " refused acme/app (403): the Session's GitHub token does not reach it",
	} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("git push with its token revoked on the way: %v\n%s\nwant a line with %q", err, out, want)
		}
	}
}

// TestARelayRestartedMidPushFailsItClearlyAndTheNextPushWorks: the relay
// dies while a push's pack streams through it (its connections cut, as
// with its process) and a new one takes over what the Runner kept: git
// prints the cut, GitHub took nothing, the new relay without its token
// yet says so, and with it the push lands, as does an update of a branch
// the Session made before the restart.
func TestARelayRestartedMidPushFailsItClearlyAndTheNextPushWorks(t *testing.T) {
	r := newRig(t)
	f := r.gatedFront(t)
	ws := filepath.Join(t.TempDir(), "app")
	gitOK(t, "", "clone", "-q", f.url+"acme/app.git", ws)
	gitOK(t, ws, "commit", "-q", "--allow-empty", "-m", "first")
	gitOK(t, ws, "push", "-q", "origin", "HEAD:"+prefix+"before")
	before := r.gh.Branches(t, "acme/app")

	bigCommit(t, ws, "big", 2<<20)
	g := newGate(256 << 10)
	f.gates <- g
	done := push(t, ws, "origin", "HEAD:"+prefix+"big")
	waitFor(t, g.reached, "the push's pack to be on its way")
	// The relay's process is gone: its connections drop, and so does
	// curl's retry of the request on a new one.
	f.relay.Store(nil)
	f.srv.CloseClientConnections()
	close(g.open)
	res := <-done
	out, err := res[0].(string), res[1]
	if err == nil || !strings.Contains(out, "error: RPC failed;") {
		t.Fatalf("git push cut by the relay's restart: %v\n%s\nwant git's \"error: RPC failed;\"", err, out)
	}
	t.Logf("git printed:\n%s", out)
	if got := r.gh.Branches(t, "acme/app"); !slices.Equal(got, before) {
		t.Errorf("GitHub's branches after the cut push: %v, want %v as before", got, before)
	}

	// The Runner starts again: a new relay serves what it kept (its
	// Session's Repo, prefix and the branches the relay reported), with no
	// token until the Hub gives it one.
	next := gitrelay.New(gitrelay.Options{Forge: github.Git{}})
	if err := next.Open(sessionID, gitrelay.Session{Repo: r.gh.RepoURL("acme/app"), Prefix: prefix, Made: branchesOf(r.took())}); err != nil {
		t.Fatal(err)
	}
	f.relay.Store(next)
	out, err = git(t, ws, "push", "origin", "HEAD:"+prefix+"big")
	host := strings.TrimPrefix(r.gh.URL, "http://")
	if want := "remote: kndl: " + host + " refused acme/app (401): the Runner holds no GitHub token for this Session"; err == nil || !strings.Contains(out, want) {
		t.Errorf("git push before the restarted relay has its token: %v\n%s\nwant %q", err, out, want)
	}
	r.refresh(t, next)
	if out := gitOK(t, ws, "push", "origin", "HEAD:"+prefix+"big"); !strings.Contains(out, "[new branch]      HEAD -> "+prefix+"big") {
		t.Errorf("git push after the restart printed:\n%s\nwant the new branch %sbig", out, prefix)
	}
	if out := gitOK(t, ws, "push", "origin", "HEAD:"+prefix+"before"); !strings.Contains(out, "HEAD -> "+prefix+"before") {
		t.Errorf("git push of a branch made before the restart printed:\n%s\nwant it updated", out)
	}
}

// branchesOf is the branch names of refs.
func branchesOf(refs []string) []string {
	var out []string
	for _, ref := range refs {
		out = append(out, strings.TrimPrefix(ref, "refs/heads/"))
	}
	return out
}

// TestAPushTheForgeTookIsTheSessionsThoughGitMissedTheAnswer: git leaves
// before the forge's answer reaches it (its connection closed, a tool
// killed); the relay reads the answer to its end all the same, reports
// the branch the forge took, and lets the Session update it.
func TestAPushTheForgeTookIsTheSessionsThoughGitMissedTheAnswer(t *testing.T) {
	r := newRig(t)
	f := r.gatedFront(t)
	ws := filepath.Join(t.TempDir(), "app")
	gitOK(t, "", "clone", "-q", f.url+"acme/app.git", ws)
	gitOK(t, ws, "commit", "-q", "--allow-empty", "-m", "work")
	f.deaf.Store(true)
	if out, err := git(t, ws, "push", "origin", "HEAD:"+prefix+"unheard"); err == nil {
		t.Fatalf("git push whose answer was lost: succeeded\n%s", out)
	}
	f.deaf.Store(false)
	if got := r.gh.Branches(t, "acme/app"); !slices.Contains(got, prefix+"unheard") {
		t.Fatalf("GitHub's branches: %v, want %sunheard", got, prefix)
	}
	if got := r.took(); !slices.Equal(got, []string{"refs/heads/" + prefix + "unheard"}) {
		t.Errorf("the pushes the relay reported: %v, want the one GitHub took", got)
	}
	gitOK(t, ws, "commit", "-q", "--allow-empty", "-m", "more")
	if out, err := git(t, ws, "push", "origin", "HEAD:"+prefix+"unheard"); err != nil {
		t.Errorf("an update of the branch GitHub took: %v\n%s\nwant it taken, the Session's own", err, out)
	}
}
