// Package gateway is the Hub's Gateway to remote MCP servers (ADR 0020):
// MCP servers and their Installations, who may manage them, which are on
// for a Repo, what a Session's run starts with, and the proxy that adds an
// Installation's header secrets on the way out, so no MCP server
// credential enters a Runner or a Sandbox. Only internal/hub imports it.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httputil"

	"kndl.dev/kndl/internal/store"
)

// Sealer seals header secret values under HUB_SECRETS_KEY, bound to ad
// (seal.Box is one).
type Sealer interface {
	Seal(plain []byte, ad string) []byte
	Open(sealed []byte, ad string) ([]byte, error)
}

// Access reports whether u has access to the Repo at repoURL, as starting
// a Session there needs.
type Access func(ctx context.Context, u store.User, repoURL string) bool

// Options configure a Gateway.
type Options struct {
	Store  *store.Store
	Sealer Sealer
	Access Access
	// Transport calls the MCP servers; default http.DefaultTransport. It
	// follows no redirect: a proxy only round-trips.
	Transport http.RoundTripper
	Logger    *slog.Logger
}

// Gateway is the Hub's Gateway.
type Gateway struct {
	store  *store.Store
	sealer Sealer
	access Access
	log    *slog.Logger
	proxy  *httputil.ReverseProxy
}

// New makes a Gateway.
func New(o Options) (*Gateway, error) {
	if o.Store == nil || o.Sealer == nil || o.Access == nil {
		return nil, errors.New("gateway: a Store, a Sealer and an Access check are needed")
	}
	g := &Gateway{store: o.Store, sealer: o.Sealer, access: o.Access, log: o.Logger.With("component", "gateway")}
	g.proxy = g.newProxy(o.Transport)
	g.proxy.ErrorLog = slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)
	return g, nil
}
