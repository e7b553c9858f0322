package hub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/store"
)

// guard is who-gets-in state that lives only in memory: GitHub, the Repo
// access cache, the people connected, failed attempts per address, and CLI
// logins waiting for a browser.
type guard struct {
	gh      *github.Client // nil without GITHUB_CLIENT_ID
	life    store.Lifetimes
	origin  string // HUB_PUBLIC_URL's origin, as a browser sends it
	secure  bool   // whether cookies are Secure
	fails   *limiter
	starts  *limiter
	conns   conns
	access  repoAccess
	devices devices
	stop    context.CancelFunc
	done    chan struct{}
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
// connected; Close stops it.
func (h *Hub) initGuard() error {
	c := h.cfg
	pub, _ := url.Parse(c.PublicURL)
	g := &guard{life: store.Lifetimes{Max: c.SigninMaxAge, Idle: c.SigninIdle}, origin: originOf(pub),
		secure: !(pub.Scheme == "http" && isLoopbackHost(pub.Hostname())),
		fails:  newLimiter(failBurst, failRefill), starts: newLimiter(startBurst, startRefill),
		done: make(chan struct{})}
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
	if c.DevLogin && !isLoopbackHost(hostOf(c.Listen)) {
		h.log.Warn("dev login is off: it works only with the Hub bound to loopback", "listen", c.Listen)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	h.guard = g
	go h.watchCredentials(ctx)
	return nil
}

// Close stops the Hub's background work.
func (h *Hub) Close() {
	h.guard.stop()
	<-h.guard.done
	h.sessions.Close()
}

// credentialCheckEvery is how often everyone connected has their sign-in or
// CLI token read again, catching an ending nobody announces, such as an
// expiry; an announced one (sign-out, logout, removal) closes at once.
const credentialCheckEvery = 30 * time.Second

// watchCredentials re-checks every connection's credential often, and its
// Repo access every HUB_REPO_ACCESS_TTL_MS, so someone who lost access on
// GitHub is taken out of a Repo's Sessions within twice the TTL.
func (h *Hub) watchCredentials(ctx context.Context) {
	defer close(h.guard.done)
	creds := time.NewTicker(min(credentialCheckEvery, h.cfg.RepoAccessTTL))
	repos := time.NewTicker(h.cfg.RepoAccessTTL)
	defer creds.Stop()
	defer repos.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-creds.C:
			h.recheckCredentials(ctx)
			if err := h.store.SweepSignins(ctx, h.guard.life); err != nil && ctx.Err() == nil {
				h.log.Error("sweep ended sign-ins", "err", err)
			}
			h.guard.devices.sweep()
			h.guard.fails.prune()
			h.guard.starts.prune()
		case <-repos.C:
			h.recheckRepoAccess(ctx)
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

// Failed sign-ins and credential guesses per address: a burst, then one
// more every refill. Starting CLI logins is limited the same way.
const (
	failBurst   = 20
	failRefill  = 3 * time.Second
	startBurst  = 10
	startRefill = 30 * time.Second
	// limiterCap bounds how many addresses are remembered at once.
	limiterCap = 100_000
)

// limiter is a token bucket per address.
type limiter struct {
	mu     sync.Mutex
	burst  float64
	refill time.Duration
	m      map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(burst int, refill time.Duration) *limiter {
	return &limiter{burst: float64(burst), refill: refill, m: map[string]*bucket{}}
}

// level returns addr's bucket brought up to now; call with l.mu held.
func (l *limiter) level(addr string, now time.Time) *bucket {
	b := l.m[addr]
	if b == nil {
		b = &bucket{tokens: l.burst, at: now}
		if len(l.m) < limiterCap {
			l.m[addr] = b
		}
	}
	b.tokens = min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.refill))
	b.at = now
	return b
}

// blocked reports whether addr has used up its attempts.
func (l *limiter) blocked(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.level(addr, time.Now()).tokens < 1
}

// take spends one of addr's attempts.
func (l *limiter) take(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.level(addr, time.Now()).tokens--
}

// prune forgets addresses whose buckets are full again.
func (l *limiter) prune() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for a := range l.m {
		if l.level(a, now).tokens >= l.burst {
			delete(l.m, a)
		}
	}
}

// clientAddr is the address a request comes from: the peer's, or, from a
// proxy on the Hub's own loopback, the one it appended to X-Forwarded-For.
func clientAddr(r *http.Request) string {
	host := hostOf(r.RemoteAddr)
	if isLoopbackHost(host) {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			parts := strings.Split(xff[len(xff)-1], ",")
			if last := strings.TrimSpace(parts[len(parts)-1]); net.ParseIP(last) != nil {
				return last
			}
		}
	}
	return host
}

// hostOf is the host of host:port (or the whole string without a port).
func hostOf(hostport string) string {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return h
}

// isLoopbackHost reports whether host names this machine's loopback.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// originOf is a URL's origin as a browser sends it in Origin: scheme and
// host, without a default port.
func originOf(u *url.URL) string {
	host := strings.ToLower(u.Host)
	if (u.Scheme == "https" && strings.HasSuffix(host, ":443")) || (u.Scheme == "http" && strings.HasSuffix(host, ":80")) {
		host = host[:strings.LastIndex(host, ":")]
	}
	return strings.ToLower(u.Scheme) + "://" + host
}
