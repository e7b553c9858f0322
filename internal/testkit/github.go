package testkit

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// GitHub is a fake GitHub serving, on one address, what the Hub calls: the
// GitHub App's OAuth user flow (authorize, access_token), GET /user, and as
// the App GET /repos/{owner}/{repo}/installation, POST
// /app/installations/{id}/access_tokens and GET
// /repos/{owner}/{repo}/collaborators/{user}, in GitHub's wire format; its
// Repos over git's smart HTTP (ServeRepo); and issues, their comments and
// the App's signed webhook deliveries (github_issues.go), and check runs and
// reviews on pull requests, delivered the same way (github_checks.go). It checks what GitHub
// checks: client credentials, single-use codes bound to their redirect URI
// and PKCE challenge, the App's RS256 JWT, and that an installation token
// is live, for the Repo, and carries the permission the request needs.
//
// A browser is signed in at this GitHub by a cookie (SignInBrowser); the
// authorize endpoint sends it straight back, as GitHub does once someone has
// authorized the App.
type GitHub struct {
	URL          string // web and API
	ClientID     string
	ClientSecret string
	AppID        int64
	KeyPEM       []byte // the App's private key, as GitHub hands it out

	key *rsa.PublicKey

	mu         sync.Mutex
	users      map[string]*GitHubUser // by lower-case login
	nextID     int64
	codes      map[string]grant
	userTokens map[string]string // user token -> lower-case login
	installs   map[string]int64  // "owner/repo" -> installation id
	instTokens map[string]instToken
	private    map[string]bool // Repos whose fetch needs a token too
	tokenLife  time.Duration
	minted     []string
	pulls      map[string][]fakePull // by lower-case owner/repo, numbered with its issues (newNumber)
	collabs    map[string]map[string]bool
	readOnly   map[string]map[string]bool // collaborators with read permission alone
	down       bool
	calls      map[string]int
	mux        *http.ServeMux
	gitRoot    string               // bare repositories served over git's smart HTTP
	iss        fakeIssues           // issues, comments and the webhook: github_issues.go
	checks     fakeChecks           // check runs and reviews: github_checks.go
	runs       map[string][]fakeRun // Actions runs by lower-case owner/repo: github_actions.go
	logSigs    map[string]bool      // the runs whose logs' download was signed
	granted    map[string]string    // the App's permissions: appPermissions unless Grant changed them
	gqlOps     []string             // GraphQL operations asked, by name: github_graphql.go
}

// GitHubUser is a GitHub account.
type GitHubUser struct {
	ID    int64  `json:"id"`
	Login string `json:"login"`
	Name  string `json:"name"`
}

// instToken is what an installation token may do, as GitHub records it
// when it mints one.
type instToken struct {
	inst    int64
	repos   []string          // lower-case names under the installation's owner; nil for all of them
	perms   map[string]string // permission -> read or write
	expires time.Time
	revoked time.Time // zero until DELETE /installation/token
}

// liveToken returns the installation token tok if GitHub still takes it:
// minted, not expired, nor revoked. Call with g.mu held.
func (g *GitHub) liveToken(tok string) (instToken, bool) {
	t, ok := g.instTokens[tok]
	return t, ok && t.revoked.IsZero() && time.Now().Before(t.expires)
}

// appPermissions are the permissions the App's installations are granted:
// what the Hub asks for and nothing more (checks write, say, is not
// granted). Issues write is for the Hub's replies in a thread, checks read
// for a pull request's checks, and with actions read for gh in a Sandbox.
var appPermissions = map[string]string{"metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write", "checks": "read",
	"actions": "read"}

// fakePull is a pull request on the fake.
type fakePull struct {
	Number   int        `json:"number"`
	Title    string     `json:"title"`
	Body     string     `json:"body"`
	State    string     `json:"state"`
	HTMLURL  string     `json:"html_url"`
	Draft    bool       `json:"draft"`
	MergedAt *time.Time `json:"merged_at"`
	Head     pullRef    `json:"head"`
	Base     pullRef    `json:"base"`
	User     pullUser   `json:"user"` // who opened it: an installation token's is the App's bot
}

type pullUser struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

type pullRef struct {
	Ref   string `json:"ref"`
	Label string `json:"label"` // OWNER:BRANCH
	SHA   string `json:"sha"`   // the commit it was at when opened; headSHA says where it is now
	repo  string // a fork's owner/name, for a head from one; "" for the pull request's own
}

type grant struct {
	login, redirect, challenge string
	expires                    time.Time
}

// githubCookie is the fake GitHub's own sign-in cookie.
const githubCookie = "fake_github_login"

var (
	appKeyOnce sync.Once
	appKey     *rsa.PrivateKey
)

// NewGitHub starts a fake GitHub for the test, on loopback.
func NewGitHub(t testing.TB) *GitHub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return NewGitHubOn(t, ln)
}

// NewGitHubOn starts a fake GitHub on ln, such as ListenForSandboxes' for a
// GitHub that Sandboxes push to.
func NewGitHubOn(t testing.TB, ln net.Listener) *GitHub {
	t.Helper()
	appKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		appKey = k
	})
	g := &GitHub{ClientID: "Iv1.fakeclient", ClientSecret: "fake-client-secret", AppID: 4242,
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(appKey)}),
		key:    &appKey.PublicKey, users: map[string]*GitHubUser{}, nextID: 1000, codes: map[string]grant{},
		userTokens: map[string]string{}, installs: map[string]int64{}, instTokens: map[string]instToken{},
		private: map[string]bool{}, tokenLife: time.Hour, pulls: map[string][]fakePull{}, runs: map[string][]fakeRun{}, logSigs: map[string]bool{},
		collabs: map[string]map[string]bool{}, readOnly: map[string]map[string]bool{}, calls: map[string]int{},
		granted: maps.Clone(appPermissions)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", g.authorize)
	mux.HandleFunc("POST /login/oauth/access_token", g.accessToken)
	mux.HandleFunc("GET /user", g.user)
	mux.HandleFunc("GET /repos/{owner}/{repo}/installation", g.installation)
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", g.installationToken)
	mux.HandleFunc("DELETE /installation/token", g.revokeToken)
	mux.HandleFunc("GET /repos/{owner}/{repo}/collaborators/{user}", g.collaborator)
	mux.HandleFunc("GET /repos/{owner}/{repo}/collaborators/{user}/permission", g.permission)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls", g.listPulls)
	mux.HandleFunc("POST /repos/{owner}/{repo}/pulls", g.createPull)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{n}", g.showPull)
	mux.HandleFunc("GET /repos/{owner}/{repo}", g.repo)
	g.serveIssues(mux)
	g.serveChecks(mux)
	g.serveContents(mux)
	g.serveGraphQL(mux)
	g.serveActions(mux)
	srv := httptest.NewUnstartedServer(g.gate(mux))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	g.URL, g.mux, g.gitRoot = srv.URL, mux, t.TempDir()
	return g
}

// ServeRepo serves a bare copy of the git repository at dir as owner/repo
// over git's smart HTTP (git http-backend), as GitHub serves a public
// repository: anyone may fetch (RepoURL clones it), and a push needs, as
// Basic auth's password, a live installation token for this Repo with
// contents write (SetPrivate makes fetching need one with contents read).
func (g *GitHub) ServeRepo(t testing.TB, ownerRepo, dir string) {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git http-backend: %v", err)
	}
	bare := filepath.Join(g.gitRoot, ownerRepo+".git")
	for _, args := range [][]string{{"clone", "--quiet", "--bare", dir, bare}, {"-C", bare, "config", "http.receivepack", "true"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	cgiGit := &cgi.Handler{Path: backend, Root: "/", Env: []string{"GIT_PROJECT_ROOT=" + g.gitRoot, "GIT_HTTP_EXPORT_ALL=1"}}
	g.mux.Handle("/"+ownerRepo+".git/", g.gitAuth(ownerRepo, unchunked(cgiGit)))
}

// BarePath is where a served Repo's bare repository is, for a test to
// push to as a push to GitHub would.
func (g *GitHub) BarePath(ownerRepo string) string {
	return filepath.Join(g.gitRoot, ownerRepo+".git")
}

// unchunked gives next a chunked request's body with its length: CGI
// (and so git http-backend under Go's cgi.Handler) takes no chunked body,
// and GitHub takes one, which git sends for a pack over http.postBuffer.
func unchunked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength < 0 && r.Body != nil {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "read the body: "+err.Error(), http.StatusBadRequest)
				return
			}
			r.Body, r.ContentLength, r.TransferEncoding = io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
		}
		next.ServeHTTP(w, r)
	})
}

// SetPrivate makes owner/repo private: fetching it needs a token too.
func (g *GitHub) SetPrivate(ownerRepo string, private bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.private[strings.ToLower(ownerRepo)] = private
}

// SetTokenLifetime sets how long installation tokens minted from now on
// live; GitHub's is an hour.
func (g *GitHub) SetTokenLifetime(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tokenLife = d
}

// TokenInfo is what the fake knows of an installation token: ok is false
// for one it never minted.
type TokenInfo struct {
	Repos       []string
	Permissions map[string]string
	Expires     time.Time
	// Revoked is when DELETE /installation/token ended it; zero if never.
	Revoked time.Time
}

// Token describes an installation token the fake minted.
func (g *GitHub) Token(tok string) (TokenInfo, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.instTokens[tok]
	return TokenInfo{Repos: t.repos, Permissions: t.perms, Expires: t.expires, Revoked: t.revoked}, ok
}

// Tokens lists every installation token minted so far, oldest first.
func (g *GitHub) Tokens() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.minted...)
}

// Branches lists owner/repo's branches as they are now.
func (g *GitHub) Branches(t testing.TB, ownerRepo string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", filepath.Join(g.gitRoot, ownerRepo+".git"), "for-each-ref", "--format=%(refname:short)", "refs/heads/").Output()
	if err != nil {
		t.Fatalf("list the branches of %s: %v", ownerRepo, err)
	}
	return strings.Fields(string(out))
}

// allows reports whether tok is a live installation token for owner/repo
// with perm at level (read is met by write too).
func (g *GitHub) allows(tok, ownerRepo, perm, level string) bool {
	owner, name, _ := strings.Cut(strings.ToLower(ownerRepo), "/")
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.liveToken(tok)
	inst, installed := g.installs[owner+"/"+name]
	if !ok || !installed || t.inst != inst {
		return false
	}
	if t.repos != nil && !slices.Contains(t.repos, name) {
		return false
	}
	got := t.perms[perm]
	return got == level || (level == "read" && got == "write")
}

// gitAuth lets a git request through to next as GitHub would: a push
// (git-receive-pack) needs contents write, a fetch of a private Repo
// contents read; otherwise 401 asks git for credentials, and a token that
// lacks the right is refused with 403.
func (g *GitHub) gitAuth(ownerRepo string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		push := r.URL.Query().Get("service") == "git-receive-pack" || strings.HasSuffix(r.URL.Path, "/git-receive-pack")
		g.mu.Lock()
		private := g.private[strings.ToLower(ownerRepo)]
		g.mu.Unlock()
		if !push && !private {
			g.count("git_fetch")
			next.ServeHTTP(w, r)
			return
		}
		level := "read"
		if push {
			level = "write"
		}
		_, tok, hasAuth := r.BasicAuth()
		switch {
		case !hasAuth:
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Authentication required", http.StatusUnauthorized)
		case !g.allows(tok, ownerRepo, "contents", level):
			g.count("git_refused")
			http.Error(w, "Permission to "+ownerRepo+".git denied.", http.StatusForbidden)
		default:
			if push {
				g.count("git_push")
			} else {
				g.count("git_fetch")
			}
			next.ServeHTTP(w, r)
		}
	})
}

// AddUser makes a GitHub account, or returns the one with that login.
func (g *GitHub) AddUser(login string) GitHubUser {
	g.mu.Lock()
	defer g.mu.Unlock()
	if u := g.users[strings.ToLower(login)]; u != nil {
		return *u
	}
	g.nextID++
	u := &GitHubUser{ID: g.nextID, Login: login, Name: login + " (GitHub)"}
	g.users[strings.ToLower(login)] = u
	return *u
}

// RenameUser changes an account's login, keeping its id, as GitHub allows.
func (g *GitHub) RenameUser(from, to string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.users[strings.ToLower(from)]
	delete(g.users, strings.ToLower(from))
	u.Login = to
	g.users[strings.ToLower(to)] = u
}

// SignInBrowser signs the browser holding jar in at GitHub as login, so its
// next trip through the authorize endpoint comes back as that account.
func (g *GitHub) SignInBrowser(jar http.CookieJar, login string) {
	u, _ := url.Parse(g.URL)
	jar.SetCookies(u, []*http.Cookie{{Name: githubCookie, Value: login, Path: "/"}})
}

// NewBrowser returns an HTTP client with its own cookie jar, signed in at
// GitHub as login ("" for nobody), that follows redirects as a browser does.
func (g *GitHub) NewBrowser(login string) *http.Client {
	jar, _ := cookiejar.New(nil)
	if login != "" {
		g.SignInBrowser(jar, login)
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

// InstallApp installs the App on owner/repo (a new installation per owner).
func (g *GitHub) InstallApp(ownerRepo string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	owner, _, _ := strings.Cut(strings.ToLower(ownerRepo), "/")
	id := int64(len(g.installs) + 1)
	for r, existing := range g.installs {
		if strings.HasPrefix(r, owner+"/") {
			id = existing
		}
	}
	g.installs[strings.ToLower(ownerRepo)] = id
}

// UninstallApp takes the App off owner/repo.
func (g *GitHub) UninstallApp(ownerRepo string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.installs, strings.ToLower(ownerRepo))
}

// SetCollaborator makes login a collaborator on owner/repo, or not.
func (g *GitHub) SetCollaborator(ownerRepo, login string, is bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := strings.ToLower(ownerRepo)
	if g.collabs[r] == nil {
		g.collabs[r] = map[string]bool{}
	}
	g.collabs[r][strings.ToLower(login)] = is
}

// SetReadOnly makes a collaborator's permission read (true) or write (the
// default for a collaborator).
func (g *GitHub) SetReadOnly(ownerRepo, login string, ro bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := strings.ToLower(ownerRepo)
	if g.readOnly[r] == nil {
		g.readOnly[r] = map[string]bool{}
	}
	g.readOnly[r][strings.ToLower(login)] = ro
}

// Grant sets the App's permission perm to level (read or write; "" takes
// it away), as its owner would in the App's settings: tokens minted from
// then on may have it, or not.
func (g *GitHub) Grant(perm, level string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if level == "" {
		delete(g.granted, perm)
		return
	}
	g.granted[perm] = level
}

// SetDown makes every endpoint answer 503, as GitHub does in an outage.
func (g *GitHub) SetDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
}

// Calls counts the requests an endpoint answered: "authorize",
// "access_token", "user", "installation", "installation_token" or
// "collaborator"; "any" counts every request, those refused while down too.
func (g *GitHub) Calls(endpoint string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[endpoint]
}

// RepoURL is the clone URL of owner/repo on this GitHub.
func (g *GitHub) RepoURL(ownerRepo string) string { return g.URL + "/" + ownerRepo + ".git" }

func (g *GitHub) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		down := g.down
		g.calls["any"]++
		g.mu.Unlock()
		if down {
			ghError(w, http.StatusServiceUnavailable, "Service Unavailable")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *GitHub) count(endpoint string) {
	g.mu.Lock()
	g.calls[endpoint]++
	g.mu.Unlock()
}

func ghError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}

func ghJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// randomToken is a token in GitHub's own shape: the prefix, then 36
// letters and digits. Characters outside it (_ and -) would let Claude
// Code's Markdown turn a token into something else on its screen, which no
// real token does.
func randomToken(prefix string) string {
	const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 36)
	rand.Read(b)
	for i := range b {
		b[i] = base62[int(b[i])%len(base62)]
	}
	return prefix + string(b)
}

func (g *GitHub) authorize(w http.ResponseWriter, r *http.Request) {
	g.count("authorize")
	q := r.URL.Query()
	if q.Get("client_id") != g.ClientID {
		http.Error(w, "The client_id passed is not valid.", http.StatusNotFound)
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme == "" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "The redirect_uri or PKCE challenge is missing or malformed.", http.StatusBadRequest)
		return
	}
	c, err := r.Cookie(githubCookie)
	g.mu.Lock()
	u := (*GitHubUser)(nil)
	if err == nil {
		u = g.users[strings.ToLower(c.Value)]
	}
	if u == nil {
		g.mu.Unlock()
		http.Error(w, "Sign in to GitHub to continue.", http.StatusUnauthorized)
		return
	}
	code := randomToken("")
	g.codes[code] = grant{login: strings.ToLower(u.Login), redirect: redirect.String(), challenge: q.Get("code_challenge"), expires: time.Now().Add(10 * time.Minute)}
	g.mu.Unlock()
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (g *GitHub) accessToken(w http.ResponseWriter, r *http.Request) {
	g.count("access_token")
	if r.ParseForm() != nil || r.Header.Get("Accept") != "application/json" {
		http.Error(w, "want a form body and Accept: application/json", http.StatusBadRequest)
		return
	}
	fail := func(code, desc string) {
		ghJSON(w, http.StatusOK, map[string]string{"error": code, "error_description": desc})
	}
	if r.PostForm.Get("client_id") != g.ClientID || r.PostForm.Get("client_secret") != g.ClientSecret {
		fail("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
		return
	}
	g.mu.Lock()
	gr, ok := g.codes[r.PostForm.Get("code")]
	delete(g.codes, r.PostForm.Get("code"))
	g.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case !ok || time.Now().After(gr.expires):
		fail("bad_verification_code", "The code passed is incorrect or expired.")
	case r.PostForm.Get("redirect_uri") != gr.redirect:
		fail("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.")
	case base64.RawURLEncoding.EncodeToString(sum[:]) != gr.challenge:
		fail("invalid_grant", "The code_verifier does not match the code_challenge.")
	default:
		tok := randomToken("ghu_")
		g.mu.Lock()
		g.userTokens[tok] = gr.login
		g.mu.Unlock()
		ghJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "bearer", "scope": "",
			"expires_in": 28800, "refresh_token": randomToken("ghr_"), "refresh_token_expires_in": 15897600})
	}
}

func (g *GitHub) user(w http.ResponseWriter, r *http.Request) {
	g.count("user")
	tok := apiToken(r)
	g.mu.Lock()
	u := g.users[g.userTokens[tok]]
	g.mu.Unlock()
	if tok == "" || u == nil {
		ghError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	ghJSON(w, http.StatusOK, map[string]any{"login": u.Login, "id": u.ID, "name": u.Name, "type": "User"})
}

// appAuthorized checks the App's JWT as GitHub does: RS256 by the App's key,
// issued by the App, unexpired, and living at most ten minutes.
func (g *GitHub) appAuthorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	parts := strings.Split(tok, ".")
	if !ok || len(parts) != 3 {
		return false
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iat, Exp int64
		Iss      string
	}
	h, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	c, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(h, &hdr) != nil || json.Unmarshal(c, &claims) != nil || hdr.Alg != "RS256" {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(g.key, crypto.SHA256, sum[:], sig) != nil {
		return false
	}
	now := time.Now().Unix()
	return claims.Iss == strconv.FormatInt(g.AppID, 10) && claims.Exp > now && claims.Iat <= now+60 && claims.Exp-claims.Iat <= 600
}

func (g *GitHub) installation(w http.ResponseWriter, r *http.Request) {
	g.count("installation")
	if !g.appAuthorized(r) {
		ghError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return
	}
	repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	g.mu.Lock()
	id, ok := g.installs[repo]
	g.mu.Unlock()
	if !ok {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	ghJSON(w, http.StatusOK, map[string]any{"id": id, "app_id": g.AppID, "account": map[string]any{"login": r.PathValue("owner")},
		"permissions": map[string]string{"metadata": "read"}})
}

// revokeToken is DELETE /installation/token: the installation token the
// request authenticates with stops working at once (204); one GitHub no
// longer takes is refused, as GitHub does (401).
func (g *GitHub) revokeToken(w http.ResponseWriter, r *http.Request) {
	g.count("revoke_token")
	tok := apiToken(r)
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.liveToken(tok)
	if !ok {
		ghError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	t.revoked = time.Now()
	g.instTokens[tok] = t
	w.WriteHeader(http.StatusNoContent)
}

func (g *GitHub) installationToken(w http.ResponseWriter, r *http.Request) {
	g.count("installation_token")
	if !g.appAuthorized(r) {
		ghError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var req struct {
		Repositories []string          `json:"repositories"`
		Permissions  map[string]string `json:"permissions"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			ghError(w, http.StatusBadRequest, "Problems parsing JSON")
			return
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var owner string
	for repo, existing := range g.installs {
		if existing == id {
			owner, _, _ = strings.Cut(repo, "/")
		}
	}
	if owner == "" {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	var repos []string
	for _, name := range req.Repositories {
		name = strings.ToLower(name)
		if g.installs[owner+"/"+name] != id {
			ghError(w, http.StatusUnprocessableEntity, "There is at least one repository that does not exist or is not accessible to the parent installation.")
			return
		}
		repos = append(repos, name)
	}
	perms := req.Permissions
	if perms == nil {
		perms = g.granted
	}
	for k, v := range perms {
		granted := g.granted[k]
		if (v != "read" && v != "write") || granted == "" || (v == "write" && granted != "write") {
			ghError(w, http.StatusUnprocessableEntity, "The permissions requested are not granted to this installation.")
			return
		}
	}
	perms = maps.Clone(perms)
	perms["metadata"] = "read"
	tok := randomToken("ghs_")
	expires := time.Now().Add(g.tokenLife).UTC()
	g.instTokens[tok] = instToken{inst: id, repos: repos, perms: perms, expires: expires}
	g.minted = append(g.minted, tok)
	selection := "all"
	if repos != nil {
		selection = "selected"
	}
	ghJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": expires.Format(time.RFC3339),
		"permissions": perms, "repository_selection": selection})
}

// permission answers GitHub's collaborator permission: admin, write, read
// or none, checked like collaborator.
func (g *GitHub) permission(w http.ResponseWriter, r *http.Request) {
	g.count("permission")
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "token ")
	repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	user := strings.ToLower(r.PathValue("user"))
	live := g.allows(tok, repo, "metadata", "read")
	g.mu.Lock()
	_, okTok := g.liveToken(tok)
	is, ro := g.collabs[repo][user], g.readOnly[repo][user]
	g.mu.Unlock()
	perm := "none"
	switch {
	case is && ro:
		perm = "read"
	case is:
		perm = "write"
	}
	switch {
	case !okTok:
		ghError(w, http.StatusUnauthorized, "Bad credentials")
	case !live:
		ghError(w, http.StatusNotFound, "Not Found")
	default:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"permission": perm, "role_name": perm, "user": map[string]string{"login": r.PathValue("user")}})
	}
}

func (g *GitHub) collaborator(w http.ResponseWriter, r *http.Request) {
	g.count("collaborator")
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "token ")
	repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	live := g.allows(tok, repo, "metadata", "read")
	g.mu.Lock()
	_, okTok := g.liveToken(tok)
	is := g.collabs[repo][strings.ToLower(r.PathValue("user"))]
	g.mu.Unlock()
	switch {
	case !okTok:
		ghError(w, http.StatusUnauthorized, "Bad credentials")
	case !live:
		ghError(w, http.StatusNotFound, "Not Found")
	case is:
		w.WriteHeader(http.StatusNoContent)
	default:
		ghError(w, http.StatusNotFound, fmt.Sprintf("%s is not a user", r.PathValue("user")))
	}
}

// apiToken is the token a REST request carries, as "token X" (what gh and
// the Hub send) or "Bearer X".
func apiToken(r *http.Request) string {
	authz := r.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(authz, "token "); ok {
		return tok
	}
	tok, _ := strings.CutPrefix(authz, "Bearer ")
	return tok
}

// readable counts a REST request as endpoint's and returns the Repo it
// names, lower-case, if its token may read perm there; otherwise it
// refuses it with refused, as GitHub does that endpoint: 404 where it
// hides the Repo, 403 "Resource not accessible by integration" where it
// says the App lacks the permission.
func (g *GitHub) readable(w http.ResponseWriter, r *http.Request, endpoint, perm string, refused int) (string, bool) {
	g.count(endpoint)
	repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	if !g.allows(apiToken(r), repo, perm, "read") {
		msg := "Not Found"
		if refused == http.StatusForbidden {
			msg = "Resource not accessible by integration"
		}
		ghError(w, refused, msg)
		return "", false
	}
	return repo, true
}

// listPulls answers GET /repos/{owner}/{repo}/pulls with head and state
// (open, closed or all) filters, newest first, for a token with pull
// requests read.
func (g *GitHub) listPulls(w http.ResponseWriter, r *http.Request) {
	repo, ok := g.readable(w, r, "pulls", "pull_requests", http.StatusNotFound)
	if !ok {
		return
	}
	head, state := r.URL.Query().Get("head"), r.URL.Query().Get("state")
	if state == "" {
		state = "open"
	}
	g.mu.Lock()
	all := slices.Clone(g.pulls[repo])
	g.mu.Unlock()
	out := []fakePull{}
	for i := len(all) - 1; i >= 0; i-- {
		p := all[i]
		if (head == "" || strings.EqualFold(p.Head.Label, head)) && (state == "all" || p.State == state) {
			p.Head.SHA = g.headSHA(repo, p)
			out = append(out, p)
		}
	}
	ghJSON(w, http.StatusOK, out)
}

// createPull answers POST /repos/{owner}/{repo}/pulls for a token with pull
// requests write, refusing as GitHub does, with 422 "Validation Failed"
// and its errors: a title, head or base missing (missing_field); a head
// (BRANCH, or OWNER:BRANCH of this Repo's owner) or base that is not a
// branch of the Repo (invalid); a pull request from head into base open
// already (custom, "A pull request already exists for OWNER:BRANCH.").
func (g *GitHub) createPull(w http.ResponseWriter, r *http.Request) {
	g.count("create_pull")
	owner, repo := r.PathValue("owner"), strings.ToLower(r.PathValue("owner")+"/"+r.PathValue("repo"))
	if !g.allows(apiToken(r), repo, "pull_requests", "write") {
		ghError(w, http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	var req struct{ Title, Head, Base, Body string }
	if json.NewDecoder(r.Body).Decode(&req) != nil {
		ghError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	for _, f := range [][2]string{{"title", req.Title}, {"head", req.Head}, {"base", req.Base}} {
		if f[1] == "" {
			ghInvalid(w, map[string]string{"resource": "PullRequest", "field": f[0], "code": "missing_field"})
			return
		}
	}
	head := req.Head
	if o, branch, ok := strings.Cut(head, ":"); ok {
		if !strings.EqualFold(o, owner) {
			ghInvalid(w, map[string]string{"resource": "PullRequest", "field": "head", "code": "invalid"})
			return
		}
		head = branch
	}
	bare := filepath.Join(g.gitRoot, repo+".git")
	var sha string
	for _, f := range [][2]string{{"head", head}, {"base", req.Base}} {
		out, err := exec.Command("git", "-C", bare, "rev-parse", "--verify", "-q", "refs/heads/"+f[1]).Output()
		if err != nil {
			ghInvalid(w, map[string]string{"resource": "PullRequest", "field": f[0], "code": "invalid"})
			return
		}
		if f[0] == "head" {
			sha = strings.TrimSpace(string(out))
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.pulls[repo] {
		if p.State == "open" && p.Head.Ref == head && p.Base.Ref == req.Base {
			ghInvalid(w, map[string]string{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + owner + ":" + head + "."})
			return
		}
	}
	n := g.newNumber(repo, &Issue{Title: req.Title, Body: req.Body, Author: AppSlug + "[bot]", pull: true})
	p := fakePull{Number: n, Title: req.Title, Body: req.Body, State: "open", HTMLURL: fmt.Sprintf("%s/%s/pull/%d", g.URL, repo, n),
		Head: pullRef{Ref: head, Label: owner + ":" + head, SHA: sha}, Base: pullRef{Ref: req.Base, Label: owner + ":" + req.Base},
		User: pullUser{Login: AppSlug + "[bot]", Type: "Bot"}}
	g.pulls[repo] = append(g.pulls[repo], p)
	ghJSON(w, http.StatusCreated, p)
}

// ghInvalid answers 422 as GitHub's REST API refuses a request whose
// fields it cannot take.
func ghInvalid(w http.ResponseWriter, errs ...map[string]string) {
	ghJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": errs,
		"documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request", "status": "422"})
}

// repo answers GET /repos/{owner}/{repo} for a token on it: its name and
// default branch (the bare repository's HEAD).
func (g *GitHub) repo(w http.ResponseWriter, r *http.Request) {
	g.count("repo")
	repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	if !g.allows(apiToken(r), repo, "metadata", "read") {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	out, err := exec.Command("git", "-C", filepath.Join(g.gitRoot, repo+".git"), "symbolic-ref", "--short", "HEAD").Output()
	if err != nil {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	ghJSON(w, http.StatusOK, map[string]any{"name": r.PathValue("repo"), "full_name": repo, "default_branch": strings.TrimSpace(string(out))})
}

// OpenedPull is a pull request as the fake received it.
type OpenedPull struct {
	Number                  int
	Title, Body, Head, Base string
	State                   string
	By                      string // the login that opened it: the App's bot for an installation token
}

// Pulls lists the pull requests opened on ownerRepo, oldest first.
func (g *GitHub) Pulls(ownerRepo string) []OpenedPull {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []OpenedPull
	for _, p := range g.pulls[strings.ToLower(ownerRepo)] {
		out = append(out, OpenedPull{p.Number, p.Title, p.Body, p.Head.Ref, p.Base.Ref, p.State, p.User.Login})
	}
	return out
}

// OpenPull opens a pull request of ownerRepo from head into main with
// token tok, as gh would, and returns GitHub's status.
func (g *GitHub) OpenPull(t testing.TB, ownerRepo, tok, head, title string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"title": title, "head": head, "base": "main"})
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/repos/"+ownerRepo+"/pulls", bytes.NewReader(body))
	req.Header.Set("Authorization", "token "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// MergePull merges pull request n of owner/repo, as a person would on
// GitHub.
func (g *GitHub) MergePull(ownerRepo string, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ps := g.pulls[strings.ToLower(ownerRepo)]
	now := time.Now().UTC()
	i := slices.IndexFunc(ps, func(p fakePull) bool { return p.Number == n })
	ps[i].State, ps[i].MergedAt = "closed", &now
}
