package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/store"
)

// guard decides who gets in and what they may see: a request's credential
// (principal, routes.go), sign-in cookies, Repo access (access.go), the
// Repos and Sessions a person may read or change, the Sessions list's
// filter (filter.go), and the re-checks that end what someone lost. What
// it keeps lives only in memory: GitHub, the Repo access cache, the people
// connected, failed attempts per address, and CLI logins waiting for a
// browser.
type guard struct {
	store     guardStore
	log       *slog.Logger
	accessTTL time.Duration  // HUB_REPO_ACCESS_TTL_MS
	gh        *github.Client // nil without GITHUB_CLIENT_ID
	life      store.Lifetimes
	origin    string // HUB_PUBLIC_URL's origin, as a browser sends it
	secure    bool   // whether cookies are Secure
	fails     *signin.Limiter
	starts    *signin.Limiter
	conns     conns
	access    repoAccess
	devices   devices
}

// guardStore is the parts of the store the guard reads: sign-ins and
// tokens, and the Repos, Members, Runners and Sessions they name.
type guardStore struct {
	Signins  *store.Signins
	Repos    *store.Repos
	Members  *store.Members
	Runners  *store.Runners
	Sessions *store.Sessions
}

// Defaults of the sign-in settings.
const (
	defaultRepoAccessTTL = 5 * time.Minute
	defaultSigninMaxAge  = 24 * time.Hour
	defaultSigninIdle    = 8 * time.Hour
)

// checkSignIn fills in the sign-in settings' defaults and checks them.
func (c *Config) checkSignIn() error {
	if c.GitHubURL == "" {
		c.GitHubURL = "https://github.com"
	}
	if c.GitHubAPIURL == "" {
		c.GitHubAPIURL = "https://api.github.com"
		if u, err := url.Parse(c.GitHubURL); err == nil && u.Host != "github.com" {
			c.GitHubAPIURL = strings.TrimSuffix(c.GitHubURL, "/") + "/api/v3"
		}
	}
	if c.RepoAccessTTL == 0 {
		c.RepoAccessTTL = defaultRepoAccessTTL
	}
	if c.SigninMaxAge == 0 {
		c.SigninMaxAge = defaultSigninMaxAge
	}
	if c.SigninIdle == 0 {
		c.SigninIdle = defaultSigninIdle
	}
	if (c.GitHubClientID == "") != (c.GitHubClientSecret == "") {
		return errors.New("set both GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET (the GitHub App's client ID and a client secret), or neither")
	}
	if c.GitHubAppKeyFile != "" && c.GitHubAppKey == "" {
		b, err := os.ReadFile(c.GitHubAppKeyFile)
		if err != nil {
			return fmt.Errorf("GITHUB_APP_PRIVATE_KEY_FILE: %w", err)
		}
		c.GitHubAppKey = string(b)
	}
	if (c.GitHubAppID == 0) != (c.GitHubAppKey == "") {
		return errors.New("set both GITHUB_APP_ID and the App's private key (GITHUB_APP_PRIVATE_KEY or GITHUB_APP_PRIVATE_KEY_FILE), or neither")
	}
	return nil
}

// initGuard sets up sign-in and Repo access, and starts re-checking who is
// connected for the Hub's life.
func (h *Hub) initGuard() error {
	c := h.cfg
	pub, _ := url.Parse(c.PublicURL)
	g := &guard{store: guardStore{h.store.Signins, h.store.Repos, h.store.Members, h.store.Runners, h.store.Sessions}, log: h.log, accessTTL: c.RepoAccessTTL, life: store.Lifetimes{Max: c.SigninMaxAge, Idle: c.SigninIdle}, origin: signin.OriginOf(pub),
		secure: !(pub.Scheme == "http" && signin.IsLoopbackHost(pub.Hostname())),
		fails:  signin.NewLimiter(signin.FailBurst, signin.FailRefill), starts: signin.NewLimiter(signin.StartBurst, signin.StartRefill)}
	g.conns.set = map[*conn]struct{}{}
	g.access.m = map[accessKey]accessEntry{}
	g.devices.init()
	if c.GitHubClientID != "" {
		gc := github.Config{URL: c.GitHubURL, APIURL: c.GitHubAPIURL, ClientID: c.GitHubClientID, ClientSecret: c.GitHubClientSecret, AppID: c.GitHubAppID}
		if c.GitHubAppKey != "" {
			key, err := github.ParsePrivateKey([]byte(c.GitHubAppKey))
			if err != nil {
				return err
			}
			gc.PrivateKey = key
		}
		gh, err := github.New(gc)
		if err != nil {
			return err
		}
		g.gh = gh
	}
	if g.secure && pub.Scheme == "http" {
		h.log.Warn("HUB_PUBLIC_URL is plain http beyond loopback: browsers keep the Secure sign-in cookie only over https, so sign-in will not work there")
	}
	if g.gh == nil || !g.gh.HasApp() {
		h.log.Warn(noGitHubApp)
	}
	if c.DevLogin && !signin.IsLoopbackHost(signin.HostOf(c.Listen)) {
		h.log.Warn("dev login is off: it works only with the Hub bound to loopback", "listen", c.Listen)
	}
	h.guard = g
	h.life.Go(h.guard.watchCredentials)
	return nil
}

// noGitHubApp is what a Hub without a GitHub App says once, at start, in
// place of a warning at each Session's start (its Runner asks for a
// Sandbox token all the same, and is told quietly there is none).
const noGitHubApp = "this Hub has no GitHub App: nobody signs in with GitHub, Sandboxes get no GitHub token for git and gh, and Runners clone with their host's git credentials; to add one, set GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET, GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY_FILE (docs/operating.md, GitHub)"

// credentialCheckEvery is how often everyone connected has their sign-in or
// CLI token read again, catching an ending nobody announces, such as an
// expiry; an announced one (sign-out, logout, removal) closes at once.
const credentialCheckEvery = 30 * time.Second

// watchCredentials re-checks every connection's credential often, and its
// Repo access every HUB_REPO_ACCESS_TTL_MS, so someone who lost access on
// GitHub is taken out of a Repo's Sessions within twice the TTL.
func (g *guard) watchCredentials(ctx context.Context) {
	creds := time.NewTicker(min(credentialCheckEvery, g.accessTTL))
	repos := time.NewTicker(g.accessTTL)
	defer creds.Stop()
	defer repos.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-creds.C:
			g.recheckCredentials(ctx)
			if err := g.store.Signins.SweepSignins(ctx, g.life); err != nil && ctx.Err() == nil {
				g.log.Error("sweep ended sign-ins", "err", err)
			}
			g.devices.sweep()
			g.fails.Prune()
			g.starts.Prune()
		case <-repos.C:
			g.recheckRepoAccess(ctx)
		}
	}
}

// RouteInfo is one row of the route table as tests see it.
type RouteInfo struct {
	Pattern string
	Creds   []auth.Kind
}

// Routes lists the route table: every route the Hub serves and the
// credentials each takes.
func (h *Hub) Routes() []RouteInfo {
	rs := h.routes()
	out := make([]RouteInfo, len(rs))
	for i, rt := range rs {
		out[i] = RouteInfo{rt.pattern, rt.creds}
	}
	return out
}

// cookie makes one of the Hub's own cookies, Secure unless the Hub is on
// loopback over HTTP.
func (g *guard) cookie(base, value string, maxAge time.Duration) *http.Cookie {
	return signin.NewCookie(base, value, g.secure, maxAge)
}

// read is the value of the request's Hub cookie of base name, or "".
func (g *guard) read(r *http.Request, base string) string {
	c, err := r.Cookie(signin.CookieName(base, g.secure))
	if err != nil {
		return ""
	}
	return c.Value
}

// startSignin signs the browser in as userID.
func (h signinAPI) startSignin(ctx context.Context, w http.ResponseWriter, userID string) error {
	token, err := h.store.Signins.CreateSignin(ctx, userID)
	if err != nil {
		return err
	}
	// The cookie lives as long as the sign-in may; the Hub enforces both
	// lifetimes itself on every request.
	http.SetCookie(w, h.guard.cookie(signin.Cookie, token, h.cfg.SigninMaxAge))
	return nil
}

// signinToken is the request's sign-in cookie value, if it has one.
func (g *guard) signinToken(r *http.Request) string {
	v := g.read(r, signin.Cookie)
	if auth.KindOf(v) != auth.Cookie {
		return ""
	}
	return v
}

// cookiePrincipal resolves a sign-in cookie. A request that could change
// something, and a WebSocket, must come from HUB_PUBLIC_URL's origin: the
// cookie rides along on requests other sites make the browser send.
func (g *guard) cookiePrincipal(ctx context.Context, r *http.Request, token string) (Principal, error) {
	u, err := g.store.Signins.UserBySignin(ctx, token, g.life)
	if err != nil {
		return Principal{}, err
	}
	if signin.NeedsOrigin(r) && !g.sameOrigin(r) {
		return Principal{}, fmt.Errorf("a signed-in browser request that changes anything, or opens a WebSocket, must come from the Hub's own pages at %s: %w",
			g.origin, errdefs.ErrForbidden)
	}
	return Principal{Kind: auth.Cookie, User: u}, nil
}

// sameOrigin reports whether the browser says the request comes from
// HUB_PUBLIC_URL's origin. Browsers send Origin on every POST, PUT, PATCH,
// DELETE and WebSocket; its absence is refused.
func (g *guard) sameOrigin(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Origin"), g.origin)
}
