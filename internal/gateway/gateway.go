// Package gateway is the Hub's Gateway to remote MCP servers (ADR 0020):
// MCP servers and their Installations, who may manage them, which are on
// for a Repo, what a Session's run starts with, and the proxy that adds an
// Installation's header secrets on the way out, so no MCP server
// credential enters a Runner or a Sandbox. Only internal/hub imports it.
package gateway

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"time"

	outdial "kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/store"
)

// Sealer seals header secret values under HUB_SECRETS_KEY, bound to ad
// (seal.Box is one).
type Sealer interface {
	Seal(plain []byte, ad string) []byte
	Open(sealed []byte, ad string) ([]byte, error)
}

// Access reports whether u has access to the Repo at repoURL, as starting
// a Session there needs, or, as Options.Push, may push to it.
type Access func(ctx context.Context, u store.User, repoURL string) bool

// Store is the parts of the Hub's store a Gateway uses: the MCP servers
// and their Installations, and the Repo and Member an Installation names.
type Store struct {
	MCP   *store.MCP
	Repos interface {
		RepoByID(ctx context.Context, id string) (store.Repo, error)
	}
	Members interface {
		UserByID(ctx context.Context, id string) (store.User, error)
	}
}

// Options configure a Gateway.
type Options struct {
	Store  Store
	Sealer Sealer
	// Access lets u see a Repo's Installations.
	Access Access
	// Push lets u change what a Repo's Sessions reach through the Gateway:
	// make, fill in, connect or turn off its Installations, as write
	// (push) permission lets them change its Variables.
	Push Access
	// Transport calls the MCP servers and their authorization servers;
	// default one through an outbound Dialer that opens nothing the
	// table refuses. Neither follows a redirect.
	Transport http.RoundTripper
	// Timeout is how long an MCP server has to answer a request (its
	// status and headers) before the Gateway answers 504 and lets go of
	// the request's body; default DefaultTimeout.
	Timeout time.Duration
	// CallbackURL is where authorization servers send a browser back:
	// HUB_PUBLIC_URL's /mcp/oauth/callback.
	CallbackURL string
	// Masked, when set, is told each new OAuth token of an Installation,
	// for the redaction sets of the Sessions running with it.
	Masked func(installationID string, values ...string)
	// Metrics counts the Gateway's requests (internal/metrics is one);
	// nil counts none.
	Metrics Metrics
	Logger  *slog.Logger
}

// DefaultTimeout is Options.Timeout's default (HUB_GATEWAY_TIMEOUT's): a
// tool that answers in plain JSON after working a while still fits.
const DefaultTimeout = 2 * time.Minute

// Metrics is told of each Gateway request: the Installation it was for,
// or "unknown" for an id the Session did not start with (a Sandbox may send
// any), and the status it was answered with.
type Metrics interface {
	GatewayRequest(installation string, status int)
}

// Gateway is the Hub's Gateway.
type Gateway struct {
	store      Store
	sealer     Sealer
	access     Access
	push       Access
	log        *slog.Logger
	proxy      *httputil.ReverseProxy
	transport  http.RoundTripper
	timeout    time.Duration
	callback   string
	masked     func(installationID string, values ...string)
	metrics    Metrics
	now        func() time.Time
	refreshing refreshers
}

// New makes a Gateway.
func New(o Options) (*Gateway, error) {
	if o.Store.MCP == nil || o.Store.Repos == nil || o.Store.Members == nil || o.Sealer == nil || o.Access == nil || o.Push == nil {
		return nil, errors.New("gateway: a Store, a Sealer, an Access and a Push check are needed")
	}
	g := &Gateway{store: o.Store, sealer: o.Sealer, access: o.Access, push: o.Push, log: o.Logger.With("component", "gateway"),
		transport: o.Transport, timeout: cmp.Or(o.Timeout, DefaultTimeout), callback: o.CallbackURL, masked: o.Masked,
		metrics: o.Metrics, now: time.Now}
	if g.transport == nil {
		g.transport = (&outdial.Dialer{}).Transport()
	}
	g.proxy = g.newProxy(retryTransport{g})
	g.proxy.ErrorLog = slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)
	return g, nil
}
