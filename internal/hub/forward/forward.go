// Package forward is the Hub's port-forward proxy: it serves a Session's
// forwarded ports on origins of their own (HUB_FORWARD_URL), each to the
// person a grant was handed to, through a stream the Session's Runner
// dials back. The Hub (internal/hub) makes one, hands out grants from its
// own origin and serves the proxy ahead of its routes; nothing else
// imports it.
package forward

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// Options configure a Proxy.
type Options struct {
	// URL is HUB_FORWARD_URL, "" for none; PublicURL is HUB_PUBLIC_URL.
	URL, PublicURL string
	// GrantMax is how long a grant lasts at most: as long as a sign-in
	// may, HUB_SIGNIN_MAX_AGE.
	GrantMax time.Duration
	Log      *slog.Logger
	// Allowed reports whether a grant still holds: the sign-in whose hash
	// is cred lives, and user has access to the Session's Repo.
	Allowed func(ctx context.Context, user store.User, cred []byte, sessionID string) bool
	// Listed reports whether port is open in the Session's Sandbox now.
	Listed func(ctx context.Context, sessionID string, port int) bool
	// Dial connects to port in the Session's Sandbox.
	Dial func(ctx context.Context, sessionID string, port int) (net.Conn, error)
	// Failed counts a code that was wrong against the request's address.
	Failed func(r *http.Request)
}

// Proxy serves the forward origins.
type Proxy struct {
	opts   Options
	grants grants

	proxyOnce sync.Once
	proxy     *httputil.ReverseProxy // to forwarded ports
}

// New makes a Proxy.
func New(o Options) *Proxy {
	p := &Proxy{opts: o}
	p.grants.init()
	return p
}

// Forwarding. A forwarded port is served on an origin of its own,
// HUB_FORWARD_URL with p<port>-<session id> for its *, never on the Hub's:
// what runs there is written in the Sandbox, and on the Hub's origin its
// script could use a Member's sign-in. Each forward origin has its own
// cookie, a grant for one person, Session and port, made from a code the
// Hub hands out on its own origin to someone with access and used once. The
// grant holds while their sign-in does and they keep access; it never
// reaches the Sandbox.

// forwardCookie names a forward origin's grant.
const forwardCookie = "kndl_fwd"

// hubCookie reports whether a cookie is named like one of kndl's own
// (kndl, kndl_*, prefixed or not), which an app behind a forward neither
// sees nor sets.
func hubCookie(name string) bool {
	name = strings.ToLower(name)
	for _, p := range []string{"__host-", "__secure-"} {
		name = strings.TrimPrefix(name, p)
	}
	return name == signin.Cookie || strings.HasPrefix(name, signin.Cookie+"_")
}

// Grant lifetimes: a code is used at once; a grant lasts at most as long
// as a sign-in may.
const codeTTL = time.Minute

type grant struct {
	user    store.User
	cred    []byte // the sign-in's hash: it ends with it
	session string
	port    int
	expires time.Time
}

// grants are the forward codes and cookies handed out, by hash, in memory:
// a Hub restart asks everyone to open their forwards again.
type grants struct {
	mu      sync.Mutex
	codes   map[string]grant
	cookies map[string]grant
}

func (g *grants) init() {
	g.codes, g.cookies = map[string]grant{}, map[string]grant{}
}

func newSecret() string {
	b := make([]byte, auth.TokenBytes)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// take returns and removes the grant under secret's hash in m.
func (g *grants) take(m map[string]grant, secret string, remove bool) (grant, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := string(auth.Hash(secret))
	gr, ok := m[k]
	if ok && (remove || time.Now().After(gr.expires)) {
		delete(m, k)
	}
	return gr, ok && time.Now().Before(gr.expires)
}

func (g *grants) put(m map[string]grant, secret string, gr grant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for k, x := range m {
		if now.After(x.expires) {
			delete(m, k)
		}
	}
	m[string(auth.Hash(secret))] = gr
}

// forwardLabel is the forward origin's name for a Session's port.
func forwardLabel(session string, port int) string { return fmt.Sprintf("p%d-%s", port, session) }

// origin is the origin a Session's port is served on.
func (p *Proxy) origin(session string, port int) string {
	return strings.Replace(p.opts.URL, "*", forwardLabel(session, port), 1)
}

// target reads the Session and port from a request's Host, if it
// names a forward origin.
func (p *Proxy) target(host string) (session string, port int, ok bool) {
	suffix := p.suffix()
	if suffix == "" {
		return "", 0, false
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), suffix)
	if !ok {
		return "", 0, false
	}
	return parseLabel(label)
}

// parseLabel reads p<port>-<session id>.
func parseLabel(label string) (session string, port int, ok bool) {
	rest, ok := strings.CutPrefix(label, "p")
	p, id, cut := strings.Cut(rest, "-")
	n, err := strconv.Atoi(p)
	if !ok || !cut || err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p || !protocol.ValidSessionID(id) {
		return "", 0, false
	}
	return id, n, true
}

// Open hands user a grant to a Session's port, made from the sign-in
// whose hash is cred, and returns where to send their browser: the port's
// forward origin, with a code used once, then next there (a path).
func (p *Proxy) Open(user store.User, cred []byte, sessionID string, port int, next string) string {
	code := newSecret()
	p.grants.put(p.grants.codes, code, grant{user: user, cred: cred, session: sessionID, port: port, expires: time.Now().Add(codeTTL)})
	next = signin.LocalPath(next)
	return p.origin(sessionID, port) + "/.kndl/forward?code=" + url.QueryEscape(code) + "&next=" + url.QueryEscape(next)
}

// Hosts serves forward origins ahead of the Hub's own routes; any other
// Host goes to next.
func (p *Proxy) Hosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		session, port, ok := p.target(r.Host)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		p.serve(w, r, session, port)
	})
}

// serve serves one request on a forward origin.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, session string, port int) {
	secure := strings.HasPrefix(p.opts.URL, "https:")
	if r.URL.Path == "/.kndl/forward" {
		gr, ok := p.grants.take(p.grants.codes, r.URL.Query().Get("code"), true)
		if !ok || gr.session != session || gr.port != port {
			p.opts.Failed(r)
			http.Error(w, "This link to a forwarded port expired or was used: open the port again from its Session.", http.StatusForbidden)
			return
		}
		token := newSecret()
		gr.expires = time.Now().Add(p.opts.GrantMax)
		p.grants.put(p.grants.cookies, token, gr)
		http.SetCookie(w, signin.NewCookie(forwardCookie, token, secure, 0))
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, signin.LocalPath(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	gr, ok := grant{}, false
	if c, err := r.Cookie(signin.CookieName(forwardCookie, secure)); err == nil {
		gr, ok = p.grants.take(p.grants.cookies, c.Value, false)
	}
	if ok && (gr.session != session || gr.port != port) {
		ok = false
	}
	if ok {
		ok = p.opts.Allowed(r.Context(), gr.user, gr.cred, session)
	}
	if !ok {
		if r.Method == http.MethodGet && signin.WantsPage(r) {
			http.Redirect(w, r, strings.TrimSuffix(p.opts.PublicURL, "/")+fmt.Sprintf("/sessions/%s/ports/%d?next=%s", session, port, url.QueryEscape(r.URL.RequestURI())), http.StatusSeeOther)
			return
		}
		http.Error(w, "Open this forwarded port from its Session's page on the Hub.", http.StatusUnauthorized)
		return
	}
	if !p.opts.Listed(r.Context(), session, port) {
		http.Error(w, fmt.Sprintf("Nothing listens on port %d in the Session's Sandbox now, or the Session is not active.", port), http.StatusBadGateway)
		return
	}
	// An app's upload takes as long as it takes: Serve's read timeout is
	// for the Hub's own requests.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	// An app may answer before its upload is all read: in full duplex the
	// server leaves the request's body to the proxy's Transport instead of
	// closing it under it, which cuts the answer (as in the relay: see its
	// forward).
	rc.EnableFullDuplex()
	p.proxyOnce.Do(func() { p.proxy = p.newProxy() })
	p.proxy.ServeHTTP(w, r)
}

// newProxy proxies a forward origin's requests, WebSocket upgrades
// included, to the port in the Sandbox: each connection is a stream the
// Session's Runner dials back after connecting to the port from inside the
// Sandbox. The forward cookie is taken out before the request goes on, and
// nothing says who the viewer is or where they are.
func (p *Proxy) newProxy() *httputil.ReverseProxy {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			session, port, ok := parseLabel(strings.TrimSuffix(host, ".forward"))
			if !ok {
				return nil, fmt.Errorf("no forward target %s", addr)
			}
			return p.opts.Dial(ctx, session, port)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	return &httputil.ReverseProxy{
		Transport: tr,
		// What the proxy logs itself (a body cut mid-copy) goes in the
		// Hub's log, not the process's default logger.
		ErrorLog: slog.NewLogLogger(p.opts.Log.With("proxy", "forward").Handler(), slog.LevelWarn),
		Rewrite: func(pr *httputil.ProxyRequest) {
			session, port, _ := p.target(pr.In.Host)
			pr.Out.URL.Scheme = "http"
			// The transport pools connections by this name and dials the
			// Session's port for it.
			pr.Out.URL.Host = forwardLabel(session, port) + ".forward"
			// Dev servers check Host against DNS rebinding: the app sees
			// the address it listens on, as in a local browser.
			pr.Out.Host = "localhost:" + strconv.Itoa(port)
			pr.Out.Header.Del("Cookie")
			for _, c := range pr.In.Cookies() {
				if !hubCookie(c.Name) {
					pr.Out.AddCookie(c)
				}
			}
			pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
			pr.Out.Header.Set("X-Forwarded-Proto", strings.SplitN(p.opts.URL, ":", 2)[0])
		},
		ModifyResponse: func(resp *http.Response) error {
			// The app's own cookies stay on its own origin: one for a
			// parent domain would reach the Hub and its other forwards.
			var keep []string
			for _, sc := range resp.Header.Values("Set-Cookie") {
				if c, err := http.ParseSetCookie(sc); err == nil && c.Domain == "" && !hubCookie(c.Name) {
					keep = append(keep, sc)
				}
			}
			resp.Header["Set-Cookie"] = keep
			if loc := resp.Header.Get("Location"); loc != "" {
				session, port, _ := parseLabel(strings.TrimSuffix(resp.Request.URL.Hostname(), ".forward"))
				for _, local := range []string{"http://localhost:", "http://127.0.0.1:"} {
					if rest, ok := strings.CutPrefix(loc, local+strconv.Itoa(port)); ok {
						resp.Header.Set("Location", p.origin(session, port)+rest)
					}
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.opts.Log.Info("forward failed", "host", r.Host, "err", err)
			msg, _ := json.Marshal(err.Error())
			http.Error(w, "The forwarded port did not answer: "+string(msg), http.StatusBadGateway)
		},
	}
}

// suffix is HUB_FORWARD_URL's host after its *, or "".
func (p *Proxy) suffix() string {
	u, err := url.Parse(p.opts.URL)
	if p.opts.URL == "" || err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(u.Host, "*"))
}
