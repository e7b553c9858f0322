// Package relay is the Runner's mod relay: the only thing on the Runner's
// host a Sandbox can reach. It knows each running Session by the SHA-256 of
// its Session token, hands the mod's hook events (/mod/hook) to the Runner,
// which merges them into the Session's one stream of Events, relays the
// mod's other /mod/* calls and Claude Code's MCP traffic to the Hub's
// Gateway (/gateway/*) to the Hub with the Session's mod token swapped in,
// and Claude Code's model calls (/model/<Session token>/v1/messages and
// its token counting, nothing else) to Anthropic's API with the Creator's
// token in place of what Claude Code holds (or, when a Runner is set up
// for it, to another model endpoint), and git's smart HTTP (/git/*, the
// Session token as Basic auth's password) to the Runner's git relay
// (internal/gitrelay). Only internal/runner imports it.
package relay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/gitrelay"
	"kndl.dev/kndl/internal/protocol"
)

// Relay is the mod relay.
type Relay struct {
	hub   *url.URL
	model *url.URL // AnthropicAPI unless the Runner points Claude Code elsewhere
	log   *slog.Logger
	proxy *httputil.ReverseProxy

	hook    func(ctx context.Context, sessionID string, event []byte) ([]byte, error)
	counted func(sessionID string, u protocol.Usage)
	git     Git

	// Serve's limits; New sets the defaults below, tests shorten them.
	readTimeout, idleTimeout time.Duration
	maxConnsPerAddr          int

	mu       sync.Mutex
	byHash   map[[32]byte]*run
	bySessID map[string]*run
}

// run is one run of one Session: its Session token's hash, the mod token
// it stands in for (empty until the Hub has given one), the address its
// Sandbox's connections come from (unset if the backend can't say) and,
// when the relay holds it, the Creator's token and the placeholder Claude
// Code has in its place (the token itself with HUB_CLAUDE_TOKEN=sandbox; a
// placeholder with no token yet: a restarted Runner waiting for the
// Hub's).
type run struct {
	sessionID   string
	hash        [32]byte
	modToken    string
	from        netip.Addr
	claudeToken string
	placeholder string
	capped      string // why its model requests are refused: a spend cap (usage.go)
	// pooled is set for a warm pool Sandbox's run, bound to no Session
	// until Hand: its hooks are answered and dropped.
	pooled bool
}

// Serve's limits. Each Sandbox reaches the relay from its own address (the
// oci backend gives each its own veth /30), so a cap per address bounds
// what one Sandbox holds; Claude Code, its subagents' model streams and the
// mod's hooks together stay far below it. A request must be read, body and
// all, within readTimeout, and a connection idle between requests is
// closed after idleTimeout. There is no write timeout: a hook waits for a
// person's answer to Claude's question, and a model answer streams (SSE)
// for as long as the model writes.
const (
	readTimeout     = time.Minute
	idleTimeout     = 2 * time.Minute
	maxConnsPerAddr = 64
)

// Options configure a Relay.
type Options struct {
	// HubURL is where /mod/* goes.
	HubURL string
	// ModelURL, when set, is the model endpoint /model/<session token>/…
	// forwards to instead of AnthropicAPI, the Creator's token with it.
	// Off by default; see runner.Config.
	ModelURL string
	// Hook takes one hook event (the JSON Claude Code gave the mod) for a
	// Session with a live token, for the Runner's stream of its Events, and
	// returns the hook's answer (nil for none). It may block until a person
	// answers (a question); ctx ends when the hook gives up.
	Hook func(ctx context.Context, sessionID string, event []byte) ([]byte, error)
	// Counted is told what a model reply of a Session spent, as the
	// model API's answer says, each time the count grows (usage.go). Nil:
	// nothing is counted.
	Counted func(sessionID string, u protocol.Usage)
	// Git, if set, serves /git/* for a Session with a live token.
	Git    Git
	Logger *slog.Logger
}

// Git serves git's smart HTTP for a Session whose token the relay checked
// (a *gitrelay.Relay): rest is the path below /git/.
type Git interface {
	ServeGit(w http.ResponseWriter, req *http.Request, sessionID, rest string)
	// ServeAPI serves gh's call to GitHub's API (a request for
	// gitrelay.APIHost).
	ServeAPI(w http.ResponseWriter, req *http.Request, sessionID string)
}

// isAPIHost reports whether req is for gh's API host, by its Host or, in
// a proxy's absolute form, its URL.
func isAPIHost(req *http.Request) bool {
	host := req.Host
	if req.URL.Host != "" {
		if req.URL.Scheme != "http" {
			return false
		}
		host = req.URL.Host
	}
	if h, port, err := net.SplitHostPort(host); err == nil {
		if port != "80" {
			return false
		}
		host = h
	}
	return strings.EqualFold(host, gitrelay.APIHost)
}

// AnthropicAPI is the origin Claude Code's model requests go to, and the
// only one the relay sends a Creator's token to unless ModelURL is set.
const AnthropicAPI = "https://api.anthropic.com"

// MaxHookBytes bounds one hook event.
const MaxHookBytes = 1 << 20

// New makes a Relay.
func New(o Options) (*Relay, error) {
	if o.Hook == nil {
		return nil, errors.New("relay: no Hook to take the mod's hook events")
	}
	hub, err := url.Parse(o.HubURL)
	if err != nil {
		return nil, fmt.Errorf("relay: hub URL: %w", err)
	}
	r := &Relay{hub: hub, hook: o.Hook, counted: o.Counted, git: o.Git, log: o.Logger.With("component", "relay"), byHash: map[[32]byte]*run{}, bySessID: map[string]*run{},
		readTimeout: readTimeout, idleTimeout: idleTimeout, maxConnsPerAddr: maxConnsPerAddr}
	model := AnthropicAPI
	if o.ModelURL != "" {
		model = o.ModelURL
	}
	if r.model, err = url.Parse(model); err != nil {
		return nil, fmt.Errorf("relay: model URL: %w", err)
	}
	// One proxy; Rewrite picks the upstream per request. FlushInterval -1
	// streams SSE and long polls as they come. What the proxy logs itself
	// (a body cut mid-copy) goes in the Runner's log, not the process's.
	r.proxy = &httputil.ReverseProxy{
		Rewrite:       r.rewrite,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(r.log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			r.log.Warn("upstream unreachable", "path", firstSegment(req.URL.Path), "err", err)
			http.Error(w, "kndl relay: upstream unreachable", http.StatusBadGateway)
		},
	}
	r.proxy.ModifyResponse = r.countUsage
	return r, nil
}

type ctxKey struct{}

// upstream is what a request was routed to, carried from ServeHTTP to
// rewrite.
type upstream struct {
	base        *url.URL
	path        string
	modToken    string // set for /mod/*: replaces the Session token
	claudeToken string // set for /model/* when held: replaces the placeholder
	session     string // set for /model/*: whose model answers are counted (usage.go)
}

func (r *Relay) rewrite(pr *httputil.ProxyRequest) {
	up := pr.In.Context().Value(ctxKey{}).(upstream)
	pr.SetURL(up.base)
	pr.Out.URL.Path = strings.TrimSuffix(up.base.Path, "/") + up.path
	pr.Out.URL.RawPath = ""
	pr.Out.Host = up.base.Host
	// Nothing about the Sandbox's side of the connection goes upstream.
	pr.Out.Header.Del("X-Forwarded-For")
	if up.modToken != "" {
		pr.Out.Header.Set("Authorization", "Bearer "+up.modToken)
	}
	if up.session != "" {
		countable(pr.Out)
	}
	if up.claudeToken != "" {
		pr.Out.Header.Del("X-Api-Key")
		pr.Out.Header.Set("Authorization", "Bearer "+up.claudeToken)
	}
}

// ServeHTTP routes /mod/* and /gateway/* (Session token in
// Authorization), /model/<Session token>/* (when the relay holds the
// Session's Creator's token) and /git/* (Session token as Basic auth's
// password); everything else is 404. A request without a
// live Session token, or with one from another address than its
// Sandbox's, is 401; a model request checkModel refuses is 401, 403 or 404
// in Anthropic's error shape; one for another origin (a proxy's request,
// CONNECT or an absolute URL) is 403.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case r.git != nil && req.Method != http.MethodConnect && isAPIHost(req):
		// gh's calls to GitHub's API, by the name gh gives it
		// (gitrelay.APIHost), with the Session token as gh sends a token.
		tok := req.Header.Get("Authorization")
		for _, scheme := range []string{"token ", "Bearer ", "bearer "} {
			tok = strings.TrimPrefix(tok, scheme)
		}
		run, ok := r.lookup(tok, req.RemoteAddr)
		if !ok {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"message":"kndl relay: no live Session token; gh in the Sandbox takes it from GH_TOKEN, as Claude Code's processes have it","documentation_url":"https://kndl.dev/docs/security#the-git-relay"}`+"\n")
			return
		}
		r.git.ServeAPI(w, req, run.sessionID)
	case req.Method == http.MethodConnect || req.URL.Host != "":
		// The relay is no proxy: what it forwards goes only to the Hub and
		// the model endpoint, whatever the request names.
		http.Error(w, "kndl relay: a request for another origin is refused; the relay forwards only to the Hub and the model endpoint", http.StatusForbidden)
	case strings.HasPrefix(req.URL.Path, "/mod/"), strings.HasPrefix(req.URL.Path, "/gateway/"):
		tok, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		run, ok := r.lookup(tok, req.RemoteAddr)
		if !ok {
			http.Error(w, "kndl relay: no live Session token", http.StatusUnauthorized)
			return
		}
		if run.pooled && req.URL.Path == "/mod/hook" {
			// A pool Sandbox's Claude Code has no Session to tell.
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "{}")
			return
		}
		if run.modToken == "" {
			// A restarted Runner knows the Session but not yet its new mod
			// token: the mod retries.
			retryLater(w, "kndl relay: Session not reconnected to the Hub yet; retry")
			return
		}
		if req.URL.Path == "/mod/hook" {
			r.takeHook(w, req, run.sessionID)
			return
		}
		r.forward(w, req, upstream{base: r.hub, path: req.URL.Path, modToken: run.modToken})
	case strings.HasPrefix(req.URL.Path, "/git/") && r.git != nil:
		// git sends its credential helper's answer as Basic auth, and asks
		// the helper only after a 401 that names Basic.
		_, tok, _ := req.BasicAuth()
		run, ok := r.lookup(tok, req.RemoteAddr)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="kndl"`)
			http.Error(w, "kndl relay: no live Session token; git in the Sandbox takes it from KNDL_MOD_TOKEN, as Claude Code's processes have it", http.StatusUnauthorized)
			return
		}
		r.git.ServeGit(w, req, run.sessionID, strings.TrimPrefix(req.URL.Path, "/git/"))
	case strings.HasPrefix(req.URL.Path, "/model/"):
		tok, rest, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/model/"), "/")
		run, ok := r.lookup(tok, req.RemoteAddr)
		switch {
		case !ok:
			(&modelRefusal{http.StatusUnauthorized, "authentication_error", "kndl relay: no live Session token in the model route's URL"}).write(w)
		case run.capped != "":
			refuseCapped(w, run.capped)
		case run.placeholder != "":
			r.forwardModel(w, req, run, rest)
		default:
			(&modelRefusal{http.StatusNotFound, "not_found_error", "kndl relay: this Session's model calls don't come through the relay"}).write(w)
		}
	default:
		http.NotFound(w, req)
	}
}

// forwardModel sends a model call on with the Creator's token in place of
// the placeholder, which must be the run's own and the request's only
// credential, to a route Claude Code calls (checkModel).
func (r *Relay) forwardModel(w http.ResponseWriter, req *http.Request, run run, rest string) {
	if no := checkModel(req, "/"+rest, run.placeholder); no != nil {
		no.write(w)
		return
	}
	if run.claudeToken == "" {
		// A restarted Runner has not had the token from the Hub yet: Claude
		// Code retries.
		retryLater(w, "kndl relay: the Creator's token is not back from the Hub yet; retry")
		return
	}
	r.forward(w, req, upstream{base: r.model, path: "/" + rest, claudeToken: run.claudeToken, session: run.sessionID})
}

// retryLater answers 503 with a Retry-After of a second, which the mod
// and Claude Code's API client both honour.
func retryLater(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// takeHook hands a hook event to the Runner, and answers the hook with
// the Runner's answer: an empty object unless it decides something (a
// question's answer).
func (r *Relay) takeHook(w http.ResponseWriter, req *http.Request, sessionID string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxHookBytes))
	if err != nil {
		http.Error(w, fmt.Sprintf("kndl relay: a hook event is at most %d bytes", MaxHookBytes), http.StatusRequestEntityTooLarge)
		return
	}
	answer, err := r.hook(req.Context(), sessionID, body)
	if err != nil {
		http.Error(w, "kndl relay: "+err.Error(), http.StatusBadRequest)
		return
	}
	if answer == nil {
		answer = []byte("{}")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(answer)
}

func (r *Relay) forward(w http.ResponseWriter, req *http.Request, up upstream) {
	// The proxy's Transport may still be reading the request's body, if
	// only to see its end, when the answer's headers come back and are
	// flushed. Go's HTTP/1 server then consumes and closes that body
	// (golang/go#40747): the Transport's read fails, it drops its
	// connection upstream and the answer is cut after its headers, which
	// lost Gateway tool calls' answers. In full duplex the body is left to
	// the Transport. (HTTP/2, which the relay doesn't serve, always is.)
	http.NewResponseController(w).EnableFullDuplex()
	r.proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), ctxKey{}, up)))
}

// lookup finds the run a token names, if it is live and, where its
// Sandbox's address is known, comes from there: a token that leaked out of
// its Sandbox is of no use from another.
func (r *Relay) lookup(token, remoteAddr string) (run, bool) {
	if token == "" {
		return run{}, false
	}
	h := sha256.Sum256([]byte(token))
	r.mu.Lock()
	defer r.mu.Unlock()
	x, ok := r.byHash[h]
	if !ok || (x.from.IsValid() && x.from != addrOf(remoteAddr)) {
		return run{}, false
	}
	return *x, true
}

// addrOf is the address of host:port, the zero Addr if it has none.
func addrOf(hostport string) netip.Addr {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// Issue makes a fresh Session token for a new run of a Session, revoking
// the Session's previous one, and returns it. The relay keeps only its
// hash, and takes it only from from, the Sandbox's address (the zero Addr:
// from anywhere, for a backend that can't say).
func (r *Relay) Issue(sessionID string, from netip.Addr) string {
	token, _ := auth.NewToken(auth.Session)
	r.Adopt(sessionID, token, from)
	return token
}

// Adopt registers a Session token read back from a Claude Code still
// running after the Runner restarted, from its Sandbox's address as in
// Issue; the relay answers 503 for it until SetModToken.
func (r *Relay) Adopt(sessionID, token string, from netip.Addr) {
	h := sha256.Sum256([]byte(token))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revokeLocked(sessionID)
	x := &run{sessionID: sessionID, hash: h, from: from.Unmap()}
	r.byHash[h], r.bySessID[sessionID] = x, x
}

// Pool makes the Session token of a warm pool Sandbox, under its pool id,
// from its address as in Issue, and holds placeholder for its Claude Code
// with no Creator's token behind it: its model calls and every /mod/ and
// /gateway/ call but its hooks get 503 until Hand binds it to a Session.
func (r *Relay) Pool(poolID string, from netip.Addr, placeholder string) string {
	token := r.Issue(poolID, from)
	r.withRun(poolID, func(x *run) { x.pooled, x.placeholder = true, placeholder })
	return token
}

// Hand binds a pool Sandbox's run to the Session it is handed to, once:
// its token is the Session's from now on, and the pool id names nothing.
// The caller then gives it the mod token and the Creator's token.
func (r *Relay) Hand(poolID, sessionID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.bySessID[poolID]
	if x == nil || !x.pooled {
		return fmt.Errorf("relay: %s is no pool Sandbox's run", poolID)
	}
	delete(r.bySessID, poolID)
	r.revokeLocked(sessionID)
	x.sessionID, x.pooled = sessionID, false
	r.byHash[x.hash], r.bySessID[sessionID] = x, x
	return nil
}

// SetModToken gives a Session's run its mod token from the Hub.
func (r *Relay) SetModToken(sessionID, modToken string) error {
	return r.withRun(sessionID, func(x *run) { x.modToken = modToken })
}

// withRun calls f with the live run of a Session, under the relay's lock.
func (r *Relay) withRun(sessionID string, f func(*run)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.bySessID[sessionID]
	if x == nil {
		return fmt.Errorf("relay: session %s has no live Session token", sessionID)
	}
	f(x)
	return nil
}

// Placeholder makes what Claude Code holds in place of the Creator's
// token: the setup token's shape (its prefix and length, base64url), from
// fresh random bytes, so it is worth nothing but to this relay and only
// for the run it is held for.
func Placeholder(claudeToken string) string {
	const prefix = "sk-ant-oat01-"
	n := max(len(claudeToken)-len(prefix), 43)
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range b {
		b[i] = alphabet[b[i]&63]
	}
	return prefix + string(b)
}

// Hold keeps a Session's Creator's token for its run, in memory alone,
// until the run's Session token is revoked: the model route puts it in
// place of placeholder, and takes no other (with HUB_CLAUDE_TOKEN=sandbox
// the placeholder is the token itself, which Claude Code holds, and the
// route takes it alone, no key of the Sandbox's own). An empty
// claudeToken holds the placeholder alone (a restarted Runner's read back
// from Claude Code) and answers 503 until Hold is called again with the
// token.
func (r *Relay) Hold(sessionID, claudeToken, placeholder string) error {
	if placeholder == "" {
		return errors.New("relay: an empty placeholder would take any model request")
	}
	return r.withRun(sessionID, func(x *run) { x.claudeToken, x.placeholder = claudeToken, placeholder })
}

// Awaits returns the placeholder of a Session's run that holds one whose
// token the Hub has yet to give (Hold with an empty token), and whether
// there is one.
func (r *Relay) Awaits(sessionID string) (placeholder string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.bySessID[sessionID]
	if x == nil || x.placeholder == "" || x.claudeToken != "" {
		return "", false
	}
	return x.placeholder, true
}

// Revoke ends a Session's token: at sleep, stop, archive or exit.
func (r *Relay) Revoke(sessionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revokeLocked(sessionID)
}

func (r *Relay) revokeLocked(sessionID string) {
	if x := r.bySessID[sessionID]; x != nil {
		delete(r.byHash, x.hash)
		delete(r.bySessID, sessionID)
	}
}

// Serve serves the relay on ln until ctx is done, at most
// maxConnsPerAddr connections from one address at a time.
func (r *Relay) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: r.readTimeout, IdleTimeout: r.idleTimeout}
	ln = &capListener{Listener: ln, max: r.maxConnsPerAddr, log: r.log, n: map[netip.Addr]int{}, warned: map[netip.Addr]bool{}}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// capListener closes, as it accepts it, a connection from an address that
// already holds max. It says so in the log once each time an address
// reaches the cap, not at every refusal a loop in a Sandbox could make.
type capListener struct {
	net.Listener
	max    int
	log    *slog.Logger
	mu     sync.Mutex
	n      map[netip.Addr]int
	warned map[netip.Addr]bool
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		a := addrOf(c.RemoteAddr().String())
		l.mu.Lock()
		full := l.n[a] >= l.max
		warn := full && !l.warned[a]
		if full {
			l.warned[a] = true
		} else {
			l.n[a]++
		}
		l.mu.Unlock()
		if warn {
			l.log.Warn("refusing connections from an address that holds the most the relay allows", "from", a, "max", l.max)
		}
		if full {
			c.Close()
			continue
		}
		return &capConn{Conn: c, release: func() { l.release(a) }}, nil
	}
}

func (l *capListener) release(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.warned, a)
	if l.n[a]--; l.n[a] <= 0 {
		delete(l.n, a)
	}
}

// capConn gives its address's place back once, when it is closed.
type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

func firstSegment(p string) string {
	p = strings.TrimPrefix(p, "/")
	s, _, _ := strings.Cut(p, "/")
	return "/" + s
}
