package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// AuthOAuth is the auth of an MCP server behind OAuth: an Installation is
// connected to one account through the server's authorization server.
const AuthOAuth = "oauth"

// The Hub talks to authorization servers within these bounds.
const (
	stateTTL     = 10 * time.Minute // a flow under way
	maxOAuthBody = 256 << 10        // of each answer
	oauthTimeout = 30 * time.Second
	refreshEarly = 30 * time.Second // a token this close to its expiry is refreshed first
)

// oauthClient is an Installation's OAuth client, sealed in the store: the
// one the Hub registered (Registered) or the one someone entered, and the
// authorization server it is bound to: the issuer and token endpoint it
// was registered or entered for, and the authorization endpoint it was
// last used with.
type oauthClient struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	Registered   bool   `json:"registered"`
	Issuer       string `json:"issuer,omitempty"`
	AuthURL      string `json:"auth_url,omitempty"`
	TokenURL     string `json:"token_url,omitempty"`
}

// oauthTokens are an Installation's tokens, sealed in the store.
type oauthTokens struct {
	Access  string    `json:"access"`
	Refresh string    `json:"refresh,omitempty"`
	Expiry  time.Time `json:"expiry,omitzero"`
}

// errNoRedirect refuses every redirect an authorization server answers
// with: a token request must not go anywhere else.
var errNoRedirect = errors.New("the authorization server answered with a redirect, which the Hub does not follow")

// authServerClient is how the Hub talks to authorization servers: https
// alone, or plain http to localhost or a loopback address, no redirect
// followed, at most maxOAuthBody of each answer.
func authServerClient(base http.RoundTripper) *http.Client {
	if base == nil {
		base = http.DefaultTransport
	}
	return &http.Client{Transport: capTransport{base}, Timeout: oauthTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return errNoRedirect }}
}

type capTransport struct{ base http.RoundTripper }

func (t capTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := checkURL(r.URL.String()); err != nil {
		return nil, fmt.Errorf("an authorization server: %w", err)
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: maxOAuthBody}
	}
	return resp, err
}

// cappedBody fails a read past its cap, rather than cut the answer short
// where a parser would take it whole.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("an authorization server's answer is over %d bytes", maxOAuthBody)
		}
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, fmt.Errorf("an authorization server's answer is over %d bytes", maxOAuthBody)
	}
	return n, err
}

// refreshers serialize the refresh of each Installation's tokens: refresh
// tokens rotate, so two refreshes at once would lose one.
type refreshers struct {
	mu sync.Mutex
	by map[string]*sync.Mutex
}

func (r *refreshers) lock(id string) func() {
	r.mu.Lock()
	if r.by == nil {
		r.by = map[string]*sync.Mutex{}
	}
	m := r.by[id]
	if m == nil {
		m = &sync.Mutex{}
		r.by[id] = m
	}
	r.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// SetClient enters an OAuth client for an Installation whose authorization
// server offers no Dynamic Client Registration; it takes the right to edit
// the Installation. The client is bound to the authorization server the
// MCP server names now, whose issuer it returns: the secret, write-only,
// goes only to that issuer's token endpoint, and the client is cleared
// once discovery names another (clientFor).
func (g *Gateway) SetClient(ctx context.Context, u store.User, id, clientID, secret string) (string, error) {
	in, err := g.oauthInstallation(ctx, u, id)
	if err != nil {
		return "", err
	}
	if clientID == "" || len(clientID) > 512 || !printable(clientID) || len(secret) > 4096 || !printable(secret) {
		return "", fmt.Errorf("a client id is 1 to 512 printable characters, its secret at most 4096: %w", errdefs.ErrInvalid)
	}
	_, meta, err := g.authServer(ctx, in)
	if err != nil {
		return "", err
	}
	c := oauthClient{ClientID: clientID, ClientSecret: secret, Issuer: meta.Issuer, AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint}
	return meta.Issuer, g.putClient(ctx, u, in.ID, c, "entered OAuth client "+clientID+" for authorization server "+meta.Issuer)
}

// Connect begins connecting an Installation to an account: it discovers
// the server's authorization server, registers the Hub as a client there
// if it has none, and returns the URL to send the person's browser to.
// The flow's state is bound to u and the Installation, used once, and
// lasts stateTTL.
func (g *Gateway) Connect(ctx context.Context, u store.User, id string) (string, error) {
	in, err := g.oauthInstallation(ctx, u, id)
	if err != nil {
		return "", err
	}
	srv, meta, err := g.authServer(ctx, in)
	if err != nil {
		return "", err
	}
	client, err := g.clientFor(ctx, u, in.ID, meta)
	if err != nil {
		return "", err
	}
	verifier := oauth2.GenerateVerifier()
	state := randomToken()
	if err := g.store.MCP.PutOAuthState(ctx, auth.Hash(state), in.ID, u.ID, g.sealer.Seal([]byte(verifier), stateSeal(in.ID)), g.now().Add(stateTTL)); err != nil {
		return "", err
	}
	return g.oauthConfig(client).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", srv.URL)), nil
}

// Callback finishes a flow: the authorization server sent u's browser
// back with state and code. It refuses alike a state used, expired, or
// begun by someone else, and stores the tokens it gets for the code.
func (g *Gateway) Callback(ctx context.Context, u store.User, state, code string) (string, error) {
	id, sealed, err := g.store.MCP.TakeOAuthState(ctx, auth.Hash(state), u.ID)
	if err != nil {
		return "", fmt.Errorf("this sign-in was used already, is over %s old, or was begun by someone else: connect the Installation again: %w", stateTTL, errdefs.ErrNotFound)
	}
	verifier, err := g.sealer.Open(sealed, stateSeal(id))
	if err != nil {
		return "", err
	}
	in, err := g.oauthInstallation(ctx, u, id)
	if err != nil {
		return "", err
	}
	client, err := g.client(ctx, in.ID)
	if err != nil {
		return "", err
	}
	tok, err := g.oauthConfig(client).Exchange(g.oauthContext(ctx), code, oauth2.VerifierOption(string(verifier)))
	if err != nil {
		return "", fmt.Errorf("the authorization server refused the code: %s: %w", oauthError(err), errdefs.ErrConflict)
	}
	if err := g.putTokens(ctx, in.ID, u.ID, tok, "connected an account"); err != nil {
		return "", err
	}
	return in.ID, nil
}

// Disconnect drops an Installation's tokens: its running Sessions' next
// request is refused.
func (g *Gateway) Disconnect(ctx context.Context, u store.User, id string) error {
	in, err := g.oauthInstallation(ctx, u, id)
	if err != nil {
		return err
	}
	return g.store.MCP.SetInstallationTokens(ctx, in.ID, nil, u.ID, "disconnected its account")
}

// oauthInstallation returns an Installation of an OAuth server u may edit.
func (g *Gateway) oauthInstallation(ctx context.Context, u store.User, id string) (store.Installation, error) {
	in, err := g.installationFor(ctx, u, id)
	if err != nil {
		return in, err
	}
	srv, err := g.store.MCP.MCPServerByID(ctx, in.ServerID)
	if err == nil && srv.Auth != AuthOAuth {
		err = fmt.Errorf("Installation %s's MCP server %s is not behind OAuth: %w", id, srv.ID, errdefs.ErrInvalid)
	}
	return in, err
}

// authServer discovers the authorization server of in's MCP server.
func (g *Gateway) authServer(ctx context.Context, in store.Installation) (store.MCPServer, *oauthex.AuthServerMeta, error) {
	srv, err := g.store.MCP.MCPServerByID(ctx, in.ServerID)
	if err != nil {
		return srv, nil, err
	}
	meta, err := g.discover(ctx, srv.URL)
	if err != nil {
		return srv, nil, fmt.Errorf("discover the authorization server of %s: %v: %w", srv.URL, err, errdefs.ErrUnavailable)
	}
	return srv, meta, nil
}

// discover finds the authorization server of the MCP server at resource:
// its protected resource metadata (RFC 9728), at the path-inserted
// well-known URL then the origin's, names the issuer, whose metadata
// (RFC 8414) names the endpoints.
func (g *Gateway) discover(ctx context.Context, resource string) (*oauthex.AuthServerMeta, error) {
	u, err := url.Parse(resource)
	if err != nil {
		return nil, err
	}
	hc := authServerClient(g.transport)
	var prm *oauthex.ProtectedResourceMetadata
	for _, p := range []string{"/.well-known/oauth-protected-resource" + strings.TrimSuffix(u.Path, "/"), "/.well-known/oauth-protected-resource"} {
		m := url.URL{Scheme: u.Scheme, Host: u.Host, Path: p}
		if prm, err = oauthex.GetProtectedResourceMetadata(ctx, m.String(), resource, hc); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, errors.New("its protected resource metadata names no authorization server")
	}
	meta, err := mcpauth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], hc)
	if err == nil && meta == nil {
		err = fmt.Errorf("authorization server %s publishes no metadata", prm.AuthorizationServers[0])
	}
	return meta, err
}

// clientFor returns the Installation's client for the authorization server
// meta describes: the one it has, if bound to that issuer and token
// endpoint, else one registered with Dynamic Client Registration, else an
// error saying to enter one. An entered client bound to another is
// cleared, so its secret never goes to a token endpoint it wasn't entered
// for.
func (g *Gateway) clientFor(ctx context.Context, u store.User, id string, meta *oauthex.AuthServerMeta) (oauthClient, error) {
	c, err := g.client(ctx, id)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return c, err
	}
	if err == nil && c.Issuer == meta.Issuer && c.TokenURL == meta.TokenEndpoint {
		c.AuthURL = meta.AuthorizationEndpoint
		return c, g.putClient(ctx, u, id, c, "")
	}
	if err == nil && !c.Registered {
		what := fmt.Sprintf("cleared entered OAuth client %s: its MCP server's authorization server is now %s (token endpoint %s), not %s (%s) it was entered for",
			c.ClientID, meta.Issuer, meta.TokenEndpoint, c.Issuer, c.TokenURL)
		if err := g.storeClient(ctx, u, id, nil, what); err != nil {
			return c, err
		}
	}
	if meta.RegistrationEndpoint == "" {
		return c, fmt.Errorf("authorization server %s offers no Dynamic Client Registration: enter a client id and secret registered there for %s (kndl mcp client set): %w",
			meta.Issuer, g.callback, errdefs.ErrConflict)
	}
	reg, err := oauthex.RegisterClient(g.oauthContext(ctx), meta.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{g.callback}, TokenEndpointAuthMethod: "client_secret_basic", ClientName: "kndl Hub",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}}, authServerClient(g.transport))
	if err != nil {
		return c, fmt.Errorf("register with authorization server %s: %v: %w", meta.Issuer, err, errdefs.ErrUnavailable)
	}
	c = oauthClient{ClientID: reg.ClientID, ClientSecret: reg.ClientSecret, Registered: true,
		Issuer: meta.Issuer, AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint}
	return c, g.putClient(ctx, u, id, c, "registered the Hub as OAuth client "+reg.ClientID)
}

func (g *Gateway) client(ctx context.Context, id string) (oauthClient, error) {
	var c oauthClient
	o, err := g.store.MCP.InstallationOAuthOf(ctx, id)
	if err != nil {
		return c, err
	}
	if o.Client == nil {
		return c, fmt.Errorf("Installation %s has no OAuth client: %w", id, errdefs.ErrNotFound)
	}
	plain, err := g.sealer.Open(o.Client, clientSeal(id))
	if err == nil {
		err = json.Unmarshal(plain, &c)
	}
	return c, err
}

// putClient stores c, as storeClient does.
func (g *Gateway) putClient(ctx context.Context, u store.User, id string, c oauthClient, what string) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return g.storeClient(ctx, u, id, g.sealer.Seal(data, clientSeal(id)), what)
}

// storeClient stores a sealed client, or with nil drops it. A change of
// client (what says which, for the log, never its secret) drops the tokens
// got with the one before; the same client with the endpoints it was used
// with keeps them.
func (g *Gateway) storeClient(ctx context.Context, u store.User, id string, sealed []byte, what string) error {
	if err := g.store.MCP.SetInstallationClient(ctx, id, sealed, u.ID, what); err != nil || what == "" {
		return err
	}
	return g.store.MCP.SetInstallationTokens(ctx, id, nil, u.ID, "")
}

func (g *Gateway) putTokens(ctx context.Context, id, actorID string, tok *oauth2.Token, what string) error {
	data, err := json.Marshal(oauthTokens{Access: tok.AccessToken, Refresh: tok.RefreshToken, Expiry: tok.Expiry})
	if err != nil {
		return err
	}
	if err := g.store.MCP.SetInstallationTokens(ctx, id, g.sealer.Seal(data, tokensSeal(id)), actorID, what); err != nil {
		return err
	}
	if g.masked != nil {
		g.masked(id, tok.AccessToken, tok.RefreshToken)
	}
	return nil
}

func (g *Gateway) tokens(ctx context.Context, id string) (oauthTokens, string, error) {
	var t oauthTokens
	o, err := g.store.MCP.InstallationOAuthOf(ctx, id)
	if err != nil {
		return t, "", err
	}
	if o.Tokens == nil {
		return t, "", fmt.Errorf("Installation %s is not connected to an account: connect it, or turn it off for this Repo: %w", id, errdefs.ErrConflict)
	}
	plain, err := g.sealer.Open(o.Tokens, tokensSeal(id))
	if err == nil {
		err = json.Unmarshal(plain, &t)
	}
	return t, o.TokensBy, err
}

// accessToken returns the Installation's access token as it is now,
// refreshing it first if it is about to expire or because the server
// refused it (refused, the token it refused). Only the Hub refreshes, one
// refresh of an Installation at a time, so the rotating refresh token
// stays right; requests refused together refresh it once.
func (g *Gateway) accessToken(ctx context.Context, id, refused string) (string, error) {
	defer g.refreshing.lock(id)()
	t, by, err := g.tokens(ctx, id)
	if err != nil {
		return "", err
	}
	fresh := t.Expiry.IsZero() || g.now().Add(refreshEarly).Before(t.Expiry)
	if (refused == "" && fresh) || (refused != "" && refused != t.Access) {
		return t.Access, nil
	}
	if t.Refresh == "" {
		return "", fmt.Errorf("Installation %s's token expired and its authorization server gave no refresh token: connect it again: %w", id, errdefs.ErrConflict)
	}
	c, err := g.client(ctx, id)
	if err != nil {
		return "", err
	}
	tok, err := g.oauthConfig(c).TokenSource(g.oauthContext(ctx), &oauth2.Token{RefreshToken: t.Refresh, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return "", fmt.Errorf("Installation %s's authorization server refused to refresh its token (%s): connect it again: %w", id, oauthError(err), errdefs.ErrConflict)
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = t.Refresh
	}
	if err := g.putTokens(ctx, id, by, tok, ""); err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

// oauthSecrets are the values of an OAuth Installation a Session must
// never show: its tokens and its client's secret.
func (g *Gateway) oauthSecrets(ctx context.Context, id string) []string {
	var all []string
	if t, _, err := g.tokens(ctx, id); err == nil {
		all = append(all, t.Access, t.Refresh)
	}
	if c, err := g.client(ctx, id); err == nil {
		all = append(all, c.ClientSecret)
	}
	// Redaction finds only values of MinValueBytes or more.
	var out []string
	for _, x := range all {
		if len(x) >= MinValueBytes {
			out = append(out, x)
		}
	}
	return out
}

// oauthStatus is an OAuth Installation's state as anyone may see it: who
// connected it and when, and its client's id, never a token or secret.
func (g *Gateway) oauthStatus(ctx context.Context, id string) *api.OAuthStatus {
	st := &api.OAuthStatus{}
	o, err := g.store.MCP.InstallationOAuthOf(ctx, id)
	if err != nil {
		return st
	}
	if o.Tokens != nil {
		st.Connected, st.ConnectedBy, st.ConnectedAt = true, g.nameOf(ctx, o.TokensBy), o.TokensAt
	}
	if c, err := g.client(ctx, id); err == nil {
		st.ClientID, st.HasSecret, st.Registered = c.ClientID, c.ClientSecret != "", c.Registered
	}
	return st
}

func (g *Gateway) oauthConfig(c oauthClient) *oauth2.Config {
	return &oauth2.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, RedirectURL: g.callback,
		Endpoint: oauth2.Endpoint{AuthURL: c.AuthURL, TokenURL: c.TokenURL, AuthStyle: oauth2.AuthStyleInHeader}}
}

// oauthContext makes x/oauth2 use authServerClient.
func (g *Gateway) oauthContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, authServerClient(g.transport))
}

// oauthError is what an authorization server said, without the request.
func oauthError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		return re.ErrorCode
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func stateSeal(id string) string  { return "oauth-state:" + id }
func clientSeal(id string) string { return "oauth-client:" + id }
func tokensSeal(id string) string { return "oauth-tokens:" + id }
