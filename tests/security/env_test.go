// Package security holds one test per guarantee in docs/security.md's
// guarantee -> test table, each against a real Hub over HTTP, with a real
// SQLite store and internal/testkit's fake GitHub.
package security

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testkit"
)

// env is a Hub signed in with a fake GitHub, served over HTTP on loopback.
type env struct {
	t     *testing.T
	gh    *testkit.GitHub
	hub   *hub.Hub
	store *store.Store
	url   string
	cfg   hub.Config
	db    string // the store's file
}

// newEnv starts a Hub whose HUB_PUBLIC_URL is where it is served, with the
// GitHub App set up against a fake GitHub. opts change its configuration.
func newEnv(t *testing.T, opts ...func(*hub.Config)) *env {
	t.Helper()
	gh := testkit.NewGitHub(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "hub.db")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := hub.Config{Listen: ln.Addr().String(), PublicURL: "http://" + ln.Addr().String(), SecretsKey: seal.NewKey(),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		GitHubURL: gh.URL, GitHubAPIURL: gh.URL, GitHubClientID: gh.ClientID, GitHubClientSecret: gh.ClientSecret,
		GitHubAppID: gh.AppID, GitHubAppKey: string(gh.KeyPEM)}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := hub.New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	srv := httptest.NewUnstartedServer(h.Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{t: t, gh: gh, hub: h, store: st, url: srv.URL, cfg: h.Config(), db: db}
}

// addrs hands out distinct client addresses, which a test sends in
// X-Forwarded-For (trusted from loopback) where the per-address limit on
// failures would otherwise cut in.
var addrs atomic.Uint32

func nextAddr() string {
	n := addrs.Add(1)
	return fmt.Sprintf("10.%d.%d.%d", byte(n>>16), byte(n>>8), byte(n))
}

// req is a request to the Hub.
type req struct {
	method, path string
	body         string
	bearer       string
	cookie       string // a sign-in cookie value, sent by hand
	origin       string // "" for none; "self" for the Hub's own
	from         string // client address, via X-Forwarded-For
	header       http.Header
}

// do sends r with client c (nil: a client with no cookies) and returns the
// status and body.
func (e *env) do(c *http.Client, r req) (int, string) {
	e.t.Helper()
	resp := e.send(c, r)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) send(c *http.Client, r req) *http.Response {
	e.t.Helper()
	if c == nil {
		c = noRedirect(nil)
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequest(r.method, e.url+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range r.header {
		hr.Header[k] = v
	}
	if r.bearer != "" {
		hr.Header.Set("Authorization", "Bearer "+r.bearer)
	}
	if r.cookie != "" {
		hr.AddCookie(&http.Cookie{Name: "kndl", Value: r.cookie})
	}
	switch r.origin {
	case "":
	case "self":
		hr.Header.Set("Origin", e.url)
	default:
		hr.Header.Set("Origin", r.origin)
	}
	if r.from != "" {
		hr.Header.Set("X-Forwarded-For", r.from)
	}
	if r.body != "" && hr.Header.Get("Content-Type") == "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// noRedirect returns a client sharing jar that stops at the first answer.
func noRedirect(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// browser is a person's browser: its own cookies, signed in at GitHub.
type browser struct {
	*http.Client
	login string
}

func (e *env) browser(login string) *browser {
	if login != "" {
		e.gh.AddUser(login)
	}
	return &browser{Client: e.gh.NewBrowser(login), login: login}
}

// claim does what the Setup and Invite pages' script does: hands the
// fragment's secret to the Hub.
func (e *env) claim(b *browser, secret string) {
	e.t.Helper()
	if code, body := e.do(b.Client, req{method: "POST", path: "/signin/claim", body: fmt.Sprintf(`{"secret":%q}`, secret), origin: "self"}); code != http.StatusNoContent {
		e.t.Fatalf("claim: %d %s", code, body)
	}
}

// signIn goes to GitHub and back, following redirects as a browser does,
// and returns where it ended: the status and body of the last answer.
func (e *env) signIn(b *browser) (int, string) {
	e.t.Helper()
	return e.do(b.Client, req{method: "GET", path: "/signin/github", from: nextAddr()})
}

// cookieOf returns the browser's sign-in cookie for the Hub.
func (e *env) cookieOf(b *browser) string {
	u, _ := url.Parse(e.url)
	for _, c := range b.Jar.Cookies(u) {
		if c.Name == "kndl" || c.Name == "__Host-kndl" {
			return c.Value
		}
	}
	return ""
}

// fragment returns the secret in a link's fragment.
func fragment(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || u.Fragment == "" {
		t.Fatalf("link %q has no fragment", link)
	}
	return u.Fragment
}

// owner makes the Hub's Owner with the Setup link and returns their browser.
func (e *env) owner() *browser {
	e.t.Helper()
	link, err := e.hub.SetupLink(context.Background())
	if err != nil || link == "" {
		e.t.Fatalf("setup link: %q %v", link, err)
	}
	b := e.browser("olivia")
	e.claim(b, fragment(e.t, link))
	if code, body := e.signIn(b); code != http.StatusOK || !strings.Contains(body, "the Owner") {
		e.t.Fatalf("owner sign-in: %d %s", code, body)
	}
	return b
}

// invite has the Owner invite login and returns the Invite's link.
func (e *env) invite(owner *browser, login string) string {
	e.t.Helper()
	code, body := e.do(owner.Client, req{method: "POST", path: "/api/invites", body: fmt.Sprintf(`{"github_login":%q}`, login), origin: "self"})
	var inv api.InviteCreated
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &inv) != nil {
		e.t.Fatalf("invite %s: %d %s", login, code, body)
	}
	return inv.URL
}

// member invites login and signs them in; returns their browser.
func (e *env) member(owner *browser, login string) *browser {
	e.t.Helper()
	link := e.invite(owner, login)
	b := e.browser(login)
	e.claim(b, fragment(e.t, link))
	if code, body := e.signIn(b); code != http.StatusOK {
		e.t.Fatalf("member %s sign-in: %d %s", login, code, body)
	}
	return b
}

// userOf returns the store's user for a GitHub login.
func (e *env) userOf(login string) store.User {
	e.t.Helper()
	ms, err := e.store.Members.List(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range ms {
		if strings.EqualFold(m.GitHubLogin, login) {
			return m
		}
	}
	e.t.Fatalf("no member %s", login)
	return store.User{}
}

// liveCredentials makes a live credential of each kind a route takes but
// the metrics token: the Owner's sign-in cookie, and a Member's CLI token,
// a Runner token, and the mod and Session tokens of an Active Session.
func (e *env) liveCredentials() map[auth.Kind]string {
	e.t.Helper()
	ctx := context.Background()
	owner := e.owner()
	u := e.userOf("olivia")
	cli, err := e.store.Signins.CreateCLIToken(ctx, u.ID, "laptop")
	if err != nil {
		e.t.Fatal(err)
	}
	_, runnerTok, err := e.store.Runners.CreateRunner(ctx, "r9", u.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	s := e.session(u, "acme/app")
	modTok, _ := e.store.Sessions.IssueModToken(ctx, s.ID)
	e.store.Sessions.MoveSession(ctx, s.ID, store.Starting, store.Active, "", false)
	sessionTok, _ := auth.NewToken(auth.Session)
	live := map[auth.Kind]string{auth.Cookie: e.cookieOf(owner), auth.CLI: cli, auth.Runner: runnerTok, auth.Mod: modTok, auth.Session: sessionTok}
	if live[auth.Cookie] == "" {
		e.t.Fatal("the owner has no sign-in cookie")
	}
	return live
}

// session records a Session of repo (owner/name on the fake GitHub) made by
// creator, straight in the store: what is tested is who may see it.
func (e *env) session(creator store.User, repo string) store.Session {
	e.t.Helper()
	ctx := context.Background()
	rns, _ := e.store.Runners.List(ctx)
	var rn store.Runner
	if len(rns) > 0 {
		rn = rns[0]
	} else {
		var err error
		if rn, _, err = e.store.Runners.CreateRunner(ctx, "r1", ""); err != nil {
			e.t.Fatal(err)
		}
	}
	r, err := e.store.Repos.EnsureRepo(ctx, e.gh.RepoURL(repo), repo)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := e.store.Sessions.CreateSession(ctx, store.Session{RepoID: r.ID, CreatorID: creator.ID, RunnerID: rn.ID, Title: "t"})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// wsURL is the WebSocket URL of a path on the Hub.
func (e *env) wsURL(path string) string { return "ws" + strings.TrimPrefix(e.url, "http") + path }

// stored reports whether any of the store's files (the database and its
// write-ahead log) hold s.
func (e *env) stored(s string) bool {
	e.t.Helper()
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(e.db + suffix)
		if err != nil && !os.IsNotExist(err) {
			e.t.Fatal(err)
		}
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// cliLogin runs kndl login's client against the Hub, approving in b, and
// returns the CLI token it saved.
func (e *env) cliLogin(b *browser) string {
	e.t.Helper()
	e.t.Setenv("KNDL_CONFIG", filepath.Join(e.t.TempDir(), "cli.json"))
	err := apiclient.Login(context.Background(), e.url, "laptop", func(code, approveURL string) {
		e.approve(b, code, approveURL, "approve")
	})
	if err != nil {
		e.t.Fatalf("kndl login: %v", err)
	}
	cfg, err := apiclient.LoadConfig()
	if err != nil {
		e.t.Fatal(err)
	}
	return cfg.Token
}

// approve does what a person does on the approval page: opens it, checks
// the code, and approves (or denies).
func (e *env) approve(b *browser, code, approveURL, action string) {
	e.t.Helper()
	path := strings.TrimPrefix(approveURL, e.url)
	if got, body := e.do(b.Client, req{method: "GET", path: path}); got != http.StatusOK || !strings.Contains(body, code) {
		e.t.Fatalf("approval page: %d %.300s", got, body)
	}
	form := url.Values{"code": {code}, "action": {action}}
	if got, body := e.do(b.Client, req{method: "POST", path: "/cli/login", body: form.Encode(), origin: "self",
		header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}); got != http.StatusOK {
		e.t.Fatalf("%s: %d %.300s", action, got, body)
	}
}
