// Package hub is the Hub: the HTTP server with its one route table (every
// route declares its credential), the Runners' WebSocket endpoint, and the
// live state of who is connected. cmd/kndl (through internal/cli) and tests
// import it.
package hub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/gateway"
	"kndl.dev/kndl/internal/hub/attempts"
	"kndl.dev/kndl/internal/hub/forward"
	"kndl.dev/kndl/internal/hub/front"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/notify"
	"kndl.dev/kndl/internal/hub/pulls"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/hub/triggers"
	"kndl.dev/kndl/internal/lifetime"
	"kndl.dev/kndl/internal/metrics"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
)

// Hub serves the API, the web UI and Runners.
type Hub struct {
	core
	vault
	db       *store.Store // the whole store: its health (ops.go); handlers have core's Domains
	handler  http.Handler
	web      *webState            // the web UI's live state: web.go
	forward  *forward.Proxy       // the forward origins of Sessions' ports
	sessions *session.Owner       // every Session's state, queue and live stream
	runners  *runners.Conns       // the connected Runners
	envs     *environment.Service // each Repo's Environment, its versions and Test builds
	pulls    *pulls.Tracker       // the branches Sessions pushed and their pull requests
	triggers *triggers.Receiver   // the App's webhook: Sessions started from GitHub
	notify   *notify.Notifier     // each Member's notification webhooks: effects.go
	checks   *attempts.Checks     // the Environment's check after each Turn of an attempt: effects.go
	masks    *masks.Sets          // each running Session's redaction set
	tokens   *masks.Tokens        // each Session's Sandbox token, revoked once replaced
	gateway  *gateway.Gateway     // MCP servers, their Installations and the /gateway route
	refusals refusals             // sign-in refusals the audit log recorded this minute: audit.go
	metrics  *metrics.Metrics     // what /metrics serves: ops.go
	healthz  http.Handler         // what /health answers: ops.go
	// life is the Hub's own: work that outlives a request, such as an
	// Attachment sent to a Runner, runs under it, and Close ends it.
	life *lifetime.Group

	// Serve's timeouts; New sets the defaults below, tests shorten them.
	readTimeout, idleTimeout time.Duration

	// placing is held from picking a new Session's Runner until the
	// Session is stored, so two starts cannot both take a Runner's last
	// place.
	placing sync.Mutex
	// egressAsks orders each Request to allow a host: egressask.go.
	egressAsks sync.Mutex

	// diffs shares one Runner's session.diff among everyone asking for a
	// Session's changes at once: every watcher's tab asks at a Turn's end.
	diffs singleflight.Group
}

// New makes a Hub over an open store; Close stops it.
func New(cfg Config, st *store.Store) (*Hub, error) { return newHub(cfg, st, (*Hub).routes) }

// newHub makes a Hub serving the route table routes returns. A step that
// fails closes what the steps before it started.
func newHub(cfg Config, st *store.Store, routes func(*Hub) []route) (_ *Hub, err error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	key, err := seal.ParseKey(cfg.SecretsKey)
	if err != nil {
		return nil, err
	}
	box, err := seal.New(key)
	if err != nil {
		return nil, err
	}
	h := &Hub{core: core{cfg: cfg, log: cfg.Logger.With("component", "hub"), store: st.Domains, full: st.Full, auditKey: AuditKey(key),
		catchUp: newCatchUps()},
		vault: vault{box}, db: st,
		readTimeout: readTimeout, idleTimeout: idleTimeout, life: lifetime.New(),
		web: newWebState()}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	ctx := h.life.Context()
	if err := keyAuditLog(ctx, st.Audit, h.auditKey, h.log); err != nil {
		return nil, err
	}
	h.metrics, h.healthz = h.newMetrics(), h.newHealth()
	h.runners = runners.New(runners.Options{Store: st.Runners, Log: h.log, Life: ctx, PingEvery: cfg.PingEvery,
		Back: func(ctx context.Context, runnerID string, running []string) []protocol.ResumedSession {
			return h.sessions.RunnerBack(ctx, runnerID, running)
		},
		Handle: h.handleRunner, Gone: h.runnerLeft})
	sensitive := func(ctx context.Context, s store.Session) ([]string, error) {
		return newSessionSecrets(h).sensitiveValues(ctx, s) // the gateway it reads is made below
	}
	h.masks = masks.NewSets(masks.SetsStore{Sessions: st.Sessions, Variables: st.Variables}, box, sensitive, cfg.RedactAllShapes)
	h.tokens = masks.NewTokens(st.Sessions, box, func(ctx context.Context, token string) error { return h.forge().RevokeToken(ctx, token) },
		cfg.SandboxTokenGrace, h.log)
	st.Observe(h.metrics.StoreCall)
	st.Log(h.log)
	h.gateway, err = gateway.New(gateway.Options{Store: gateway.Store{MCP: st.MCP, Repos: st.Repos, Members: st.Members}, Sealer: box, Logger: cfg.Logger,
		Access: func(ctx context.Context, u store.User, repoURL string) bool {
			return h.guard.canAccess(ctx, u, repoURL, false)
		},
		Push: func(ctx context.Context, u store.User, repoURL string) bool {
			return h.guard.canPush(ctx, u, repoURL) // a method value would take the guard before it is set
		},
		CallbackURL: strings.TrimSuffix(cfg.PublicURL, "/") + oauthCallbackPath, Masked: h.maskInstallation, Metrics: h.metrics,
		Transport: cfg.Outbound.Transport(), Timeout: cfg.GatewayTimeout})
	if err != nil {
		return nil, err
	}
	h.envs = h.newEnvironments()
	if err := h.envs.Recover(ctx); err != nil {
		return nil, fmt.Errorf("recover Test builds: %w", err)
	}
	// Before the Sessions, whose Turns' ends they are told of.
	h.checks = newChecks(h)
	// Before the Sessions, whose Events it is told of.
	h.notify = notify.New(notify.Options{Store: st.Notify, Sealer: box, Redactor: h.masks, Dialer: &h.cfg.Outbound,
		PublicURL: cfg.PublicURL, Retry: cfg.NotifyRetry, Logger: cfg.Logger})
	h.sessions = session.New(session.Options{Store: &st.Domains, Runners: h.runners, Redactor: h.masks, Sealer: box, Logger: cfg.Logger,
		Environments: h.envs, Idle: cfg.SessionIdle, EventsMax: cfg.SessionEventsMax, Effects: effects{h},
		MCPServers: h.prepareGateway, Metrics: h.metrics, MemberMaxAwake: cfg.MemberMaxAwake, MemberMaxSpend: cfg.MemberMaxSpend,
		Limited: func(id, text string) { h.triggers.Tell(id, text) }})
	if err := h.sessions.Recover(ctx); err != nil {
		return nil, fmt.Errorf("recover Sessions: %w", err)
	}
	if err := h.initGuard(); err != nil {
		return nil, err
	}
	po := pulls.Options{Store: st.Branches, WebURL: cfg.GitHubURL, Gap: cfg.PullsCheckGap, Changed: h.sessions.Changed,
		Titled: func(ctx context.Context, id, title string) { newSessionsAPI(h).titleFromPull(ctx, id, title) },
		Opened: effects{h}.pullOpened, Logger: cfg.Logger}
	po.Forge = h.forge()
	h.pulls = pulls.New(po)
	h.forward = newViewAPI(h).newForward() // its callbacks use none of what is made after it
	// Its worker at once acts on the deliveries a Hub before took and did
	// not, which may start Sessions through all of the above.
	to := triggers.Options{Secret: []byte(cfg.GitHubWebhookSecret),
		Store:    triggers.Store{Threads: st.Threads, Sessions: st.Sessions, Members: st.Members, Repos: st.Repos, Branches: st.Branches},
		Sessions: triggerSessions{h}, PublicURL: cfg.PublicURL,
		Ignored: h.metrics.WebhookIgnored, RefusalDropped: h.metrics.RefusalDropped, PullChanged: h.pulls.Reread, Logger: cfg.Logger,
		Pushed: devcontainerFollow{environmentsAPI{core: h.core, envs: h.envs}, h.notify, h.masks}.pushed}
	if h.guard.gh != nil {
		to.GitHub = h.guard.gh
	}
	h.triggers = triggers.New(to)
	h.life.Go(h.followSessions)
	// Last: each handler type takes the parts of the Hub it uses, which
	// are all made by now.
	mux, err := h.muxOf(routes(h))
	if err != nil {
		return nil, err
	}
	h.handler = h.forward.Hosts(mux)
	if strings.HasPrefix(cfg.PublicURL, "https:") {
		h.handler = front.WithHSTS(h.handler)
	}
	// In front of all: the one place a request's address is decided.
	h.handler = h.cfg.TrustedProxies.Handler(h.handler)
	return h, nil
}

// Close stops the Hub's background work and waits for it: the webhook's
// work under way, the pull request tracker, the Test builds under way, the Sessions' timers, the
// token revokes, the notifications' worker, and last the Hub's own goroutines (the credential checks
// among them), whose lifetime the others' last callbacks still use. It
// closes as much as New made when a step of New failed.
func (h *Hub) Close() {
	if h.triggers != nil {
		h.triggers.Close() // may still start a Session: before sessions
	}
	if h.pulls != nil {
		h.pulls.Close()
	}
	if h.envs != nil {
		h.envs.Close()
	}
	if h.sessions != nil {
		h.sessions.Close() // may still stop a Sandbox token: before tokens
	}
	if h.checks != nil {
		h.checks.Close() // after sessions, which tell it of Turns
	}
	if h.tokens != nil {
		h.tokens.Close()
	}
	if h.notify != nil {
		h.notify.Close() // after sessions and pulls, which queue for it
	}
	h.life.Close()
}

// Connected reports whether the Runner with that id is connected.
func (h *Hub) Connected(id string) bool { return h.runners.Connected(id) }

// Handler is the Hub's HTTP handler.
func (h *Hub) Handler() http.Handler { return h.handler }

// Config is the Hub's configuration with defaults filled in.
func (h *Hub) Config() Config { return h.cfg }

// Serve's timeouts. A request must be read, body and all, within
// readTimeout (the API's bodies are at most maxBody; a forward origin's,
// an app's upload, is exempt), and a connection idle between requests is
// closed after idleTimeout. A WebSocket is hijacked, which clears both.
// There is no write timeout: an archive answers once its Runner has moved
// the disks (up to ten minutes), and a download or a forwarded app streams
// for as long as it takes; each needs a credential.
const (
	readTimeout = time.Minute
	idleTimeout = 2 * time.Minute
)

// Serve serves on ln until ctx is done, then closes every Runner connection
// and waits briefly for requests in flight.
func (h *Hub) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: h.handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: h.readTimeout, IdleTimeout: h.idleTimeout,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		<-ctx.Done()
		h.runners.CloseAll("hub shutting down")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-shut // Serve returns once Shutdown has waited
		return nil
	}
	return err
}
