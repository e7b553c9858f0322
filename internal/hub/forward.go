package hub

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// sessionPorts handles a Runner's list for one of its Sessions: kept in
// memory only, while the Session is Active and its Runner connected.
func (h *Hub) sessionPorts(ctx context.Context, rc *runners.Conn, s store.Session, list []protocol.Port) {
	h.web.mu.Lock()
	if s.State == store.Active {
		h.web.ports[s.ID] = portsEntry{rc: rc, list: list}
	} else {
		delete(h.web.ports, s.ID)
	}
	h.web.mu.Unlock()
	h.portsChanged(s.ID)
}

// portsOf returns a Session's open ports, dropping the list of a Session
// no longer Active (Asleep, Frozen, Archived) or whose Runner went away.
func (h *Hub) portsOf(ctx context.Context, id string) []protocol.Port {
	h.web.mu.Lock()
	e, ok := h.web.ports[id]
	h.web.mu.Unlock()
	if !ok {
		return nil
	}
	s, err := h.store.SessionByID(ctx, id)
	if err != nil || s.State != store.Active || h.runners.Get(s.RunnerID) != e.rc {
		h.web.mu.Lock()
		if cur, ok := h.web.ports[id]; ok && cur.rc == e.rc {
			delete(h.web.ports, id)
		}
		h.web.mu.Unlock()
		return nil
	}
	return e.list
}

// sendPorts sends a view its Session's open ports.
func (h *Hub) sendPorts(ctx context.Context, v *view) {
	list := h.portsOf(ctx, v.session)
	out := make([]api.Port, len(list))
	for i, p := range list {
		out[i] = api.Port{Port: p}
		if h.cfg.ForwardURL != "" {
			out[i].URL = fmt.Sprintf("/sessions/%s/ports/%d", v.session, p.Port)
		}
	}
	v.send(viewMsg{Type: "ports", Ports: &out})
}

// portsChanged sends every view of the Session its list again.
func (h *Hub) portsChanged(id string) {
	for _, v := range h.viewsOf(id) {
		h.sendPorts(h.life.Context(), v)
	}
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

// forwardOrigin is the origin a Session's port is served on.
func (h *Hub) forwardOrigin(session string, port int) string {
	return strings.Replace(h.cfg.ForwardURL, "*", forwardLabel(session, port), 1)
}

// forwardTarget reads the Session and port from a request's Host, if it
// names a forward origin.
func (h *Hub) forwardTarget(host string) (session string, port int, ok bool) {
	suffix := h.forwardSuffix()
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

// openPort is GET /sessions/{id}/ports/{port} on the Hub's own origin: for
// someone with access to the Session, it hands out a code for the port's
// forward origin and sends the browser there.
func (h *Hub) openPort(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.sessionFor(r.Context(), p, r.PathValue("id"))
	var port int
	if err == nil {
		port, err = strconv.Atoi(r.PathValue("port"))
		if err != nil || !slices.ContainsFunc(h.portsOf(r.Context(), s.ID), func(x protocol.Port) bool { return x.Port == port }) {
			err = fmt.Errorf("nothing listens on port %s in the Session's Sandbox now: %w", r.PathValue("port"), errdefs.ErrNotFound)
		}
	}
	if err == nil && h.cfg.ForwardURL == "" {
		err = fmt.Errorf("this Hub forwards no ports: its operator sets HUB_FORWARD_URL to a wildcard address such as https://*.kndl-ports.example.com: %w", errdefs.ErrUnavailable)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	code := newSecret()
	h.web.grants.put(h.web.grants.codes, code, grant{user: p.User, cred: p.cred, session: s.ID, port: port, expires: time.Now().Add(codeTTL)})
	next := localPath(r.URL.Query().Get("next"))
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, h.forwardOrigin(s.ID, port)+"/.kndl/forward?code="+url.QueryEscape(code)+"&next="+url.QueryEscape(next), http.StatusSeeOther)
}

// forwardHosts serves forward origins ahead of the Hub's own routes; any
// other Host goes to next.
func (h *Hub) forwardHosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		session, port, ok := h.forwardTarget(r.Host)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		h.forward(w, r, session, port)
	})
}

// forward serves one request on a forward origin.
func (h *Hub) forward(w http.ResponseWriter, r *http.Request, session string, port int) {
	secure := strings.HasPrefix(h.cfg.ForwardURL, "https:")
	if r.URL.Path == "/.kndl/forward" {
		gr, ok := h.web.grants.take(h.web.grants.codes, r.URL.Query().Get("code"), true)
		if !ok || gr.session != session || gr.port != port {
			h.guard.fails.Take(signin.ClientAddr(r))
			http.Error(w, "This link to a forwarded port expired or was used: open the port again from its Session.", http.StatusForbidden)
			return
		}
		token := newSecret()
		gr.expires = time.Now().Add(h.cfg.SigninMaxAge)
		h.web.grants.put(h.web.grants.cookies, token, gr)
		http.SetCookie(w, signin.NewCookie(forwardCookie, token, secure, 0))
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, localPath(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	gr, ok := grant{}, false
	if c, err := r.Cookie(signin.CookieName(forwardCookie, secure)); err == nil {
		gr, ok = h.web.grants.take(h.web.grants.cookies, c.Value, false)
	}
	if ok && (gr.session != session || gr.port != port) {
		ok = false
	}
	if ok {
		live, err := h.store.SigninLive(r.Context(), gr.cred, h.guard.life)
		ok = err == nil && live && h.canAccess(r.Context(), gr.user, h.repoOf(r.Context(), session), false)
	}
	if !ok {
		if r.Method == http.MethodGet && signin.WantsPage(r) {
			http.Redirect(w, r, strings.TrimSuffix(h.cfg.PublicURL, "/")+fmt.Sprintf("/sessions/%s/ports/%d?next=%s", session, port, url.QueryEscape(r.URL.RequestURI())), http.StatusSeeOther)
			return
		}
		http.Error(w, "Open this forwarded port from its Session's page on the Hub.", http.StatusUnauthorized)
		return
	}
	listed := slices.ContainsFunc(h.portsOf(r.Context(), session), func(x protocol.Port) bool { return x.Port == port })
	if !listed {
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
	h.web.proxyOnce.Do(func() { h.web.proxy = h.forwardProxy() })
	h.web.proxy.ServeHTTP(w, r)
}

// repoOf is a Session's Repo URL, or "" if there is no such Session.
func (h *Hub) repoOf(ctx context.Context, id string) string {
	s, err := h.store.SessionByID(ctx, id)
	if err != nil {
		return ""
	}
	return s.RepoURL
}

// forwardProxy proxies a forward origin's requests, WebSocket upgrades
// included, to the port in the Sandbox: each connection is a stream the
// Session's Runner dials back after connecting to the port from inside the
// Sandbox. The forward cookie is taken out before the request goes on, and
// nothing says who the viewer is or where they are.
func (h *Hub) forwardProxy() *httputil.ReverseProxy {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			session, port, ok := parseLabel(strings.TrimSuffix(host, ".forward"))
			if !ok {
				return nil, fmt.Errorf("no forward target %s", addr)
			}
			s, err := h.store.SessionByID(ctx, session)
			if err != nil {
				return nil, err
			}
			rc := h.runners.Get(s.RunnerID)
			if rc == nil {
				return nil, fmt.Errorf("the Session's Runner is not connected")
			}
			return h.runners.OpenStream(ctx, rc, protocol.TypeSessionDial, func(stream string) any {
				return protocol.SessionDial{SessionID: session, Port: port, Stream: stream}
			}, nil)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	return &httputil.ReverseProxy{
		Transport: tr,
		// What the proxy logs itself (a body cut mid-copy) goes in the
		// Hub's log, not the process's default logger.
		ErrorLog: slog.NewLogLogger(h.log.With("proxy", "forward").Handler(), slog.LevelWarn),
		Rewrite: func(pr *httputil.ProxyRequest) {
			session, port, _ := h.forwardTarget(pr.In.Host)
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
			pr.Out.Header.Set("X-Forwarded-Proto", strings.SplitN(h.cfg.ForwardURL, ":", 2)[0])
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
						resp.Header.Set("Location", h.forwardOrigin(session, port)+rest)
					}
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			h.log.Info("forward failed", "host", r.Host, "err", err)
			msg, _ := json.Marshal(err.Error())
			http.Error(w, "The forwarded port did not answer: "+string(msg), http.StatusBadGateway)
		},
	}
}

// forwardSuffix is HUB_FORWARD_URL's host after its *, or "".
func (h *Hub) forwardSuffix() string {
	u, err := url.Parse(h.cfg.ForwardURL)
	if h.cfg.ForwardURL == "" || err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(u.Host, "*"))
}
