package hub

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
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
	g := &guard{life: store.Lifetimes{Max: c.SigninMaxAge, Idle: c.SigninIdle}, origin: originOf(pub),
		secure: !(pub.Scheme == "http" && isLoopbackHost(pub.Hostname())),
		fails:  newLimiter(failBurst, failRefill), starts: newLimiter(startBurst, startRefill)}
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
	h.guard = g
	h.life.Go(h.watchCredentials)
	return nil
}

// credentialCheckEvery is how often everyone connected has their sign-in or
// CLI token read again, catching an ending nobody announces, such as an
// expiry; an announced one (sign-out, logout, removal) closes at once.
const credentialCheckEvery = 30 * time.Second

// watchCredentials re-checks every connection's credential often, and its
// Repo access every HUB_REPO_ACCESS_TTL_MS, so someone who lost access on
// GitHub is taken out of a Repo's Sessions within twice the TTL.
func (h *Hub) watchCredentials(ctx context.Context) {
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

// limiter is a token bucket per address, counting only what it is told
// to: a right credential is let in whatever its address did before, so
// junk from one address (a NAT, a Runner's machine) never locks out the
// Runners, Sessions and people behind it. IPv6 addresses count by their
// /64, which one host usually has whole. When the table is full the entry
// spent longest ago is forgotten: the limit never switches off.
type limiter struct {
	mu     sync.Mutex
	burst  float64
	refill time.Duration
	cap    int
	m      map[string]*list.Element // of *bucket, by limitKey
	order  list.List                // least recently spent at the back
}

type bucket struct {
	key    string
	tokens float64
	at     time.Time
}

func newLimiter(burst int, refill time.Duration) *limiter {
	return &limiter{burst: float64(burst), refill: refill, cap: limiterCap, m: map[string]*list.Element{}}
}

// limitKey is what addr counts as: itself, or for IPv6 its /64.
func limitKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.WithZone("").Prefix(64)
		return p.String()
	}
	return ip.String()
}

// level returns key's tokens brought up to now, a full burst for one it
// doesn't remember; call with l.mu held.
func (l *limiter) level(key string, now time.Time) float64 {
	e := l.m[key]
	if e == nil {
		return l.burst
	}
	b := e.Value.(*bucket)
	return min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.refill))
}

// blocked reports whether addr has used up its attempts.
func (l *limiter) blocked(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.level(limitKey(addr), time.Now()) < 1
}

// take spends one of addr's attempts, and reports whether it had one: a
// failure from an address that had none left is refused as too many.
func (l *limiter) take(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	key, now := limitKey(addr), time.Now()
	tokens := l.level(key, now)
	e := l.m[key]
	if tokens < 1 {
		l.order.MoveToFront(e) // still failing: the last to forget
		return false
	}
	if e == nil {
		if len(l.m) >= l.cap {
			oldest := l.order.Back()
			delete(l.m, oldest.Value.(*bucket).key)
			l.order.Remove(oldest)
		}
		e = l.order.PushFront(&bucket{key: key})
		l.m[key] = e
	}
	b := e.Value.(*bucket)
	b.tokens, b.at = tokens-1, now
	l.order.MoveToFront(e)
	return true
}

// prune forgets addresses whose buckets are full again.
func (l *limiter) prune() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for key, e := range l.m {
		if l.level(key, now) >= l.burst {
			delete(l.m, key)
			l.order.Remove(e)
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
