package testkit

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/auth"
)

// OAuthServer is an OAuth 2.1 authorization server as MCP's authorization
// spec has one, in front of a real MCPServer that takes only its access
// tokens: metadata discovery (RFC 8414), Dynamic Client Registration (RFC
// 7591) when DCR is set, else one client made up front, the authorization
// code grant with PKCE S256 alone, and refresh tokens that rotate (each
// works once). Its authorization endpoint consents at once, as a person
// signed in there would, redirecting to the client's redirect URI.
type OAuthServer struct {
	URL string     // the issuer
	MCP *MCPServer // the resource server
	// ClientID and ClientSecret are the client made up front, when DCR is
	// off.
	ClientID, ClientSecret string

	ttl time.Duration
	dcr bool

	mu        sync.Mutex
	clients   map[string]oauthClient // by id
	codes     map[string]oauthCode
	access    map[string]time.Time // access token -> expiry
	refresh   map[string]string    // live refresh token -> client id
	refreshed int
}

type oauthClient struct {
	secret    string
	redirects []string
}

type oauthCode struct {
	client, redirect, challenge string
}

// OAuthOptions configure an OAuthServer.
type OAuthOptions struct {
	DCR bool
	// TokenTTL is how long an access token lasts; default an hour.
	TokenTTL time.Duration
}

// NewOAuthServer starts an OAuthServer and its MCP server.
func NewOAuthServer(t testing.TB, o OAuthOptions) *OAuthServer {
	a := &OAuthServer{ttl: o.TokenTTL, dcr: o.DCR, clients: map[string]oauthClient{}, codes: map[string]oauthCode{},
		access: map[string]time.Time{}, refresh: map[string]string{}}
	if a.ttl == 0 {
		a.ttl = time.Hour
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", a.metadata)
	mux.HandleFunc("POST /register", a.register)
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	a.URL = hs.URL
	if !o.DCR {
		a.ClientID, a.ClientSecret = "made-up-front", "secret-"+randHex(8)
		a.clients[a.ClientID] = oauthClient{secret: a.ClientSecret}
	}
	a.MCP = newMCPServer(t, a.valid, a.URL)
	return a
}

// Refreshes is how many refresh grants the server has answered.
func (a *OAuthServer) Refreshes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refreshed
}

// ExpireAccess makes every access token it issued so far invalid, as a
// server that revoked them early.
func (a *OAuthServer) ExpireAccess() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.access)
}

func (a *OAuthServer) valid(token string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.access[token]
	return ok && time.Now().Before(exp)
}

func (a *OAuthServer) metadata(w http.ResponseWriter, r *http.Request) {
	m := map[string]any{"issuer": a.URL, "authorization_endpoint": a.URL + "/authorize", "token_endpoint": a.URL + "/token",
		"response_types_supported": []string{"code"}, "grant_types_supported": []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"}}
	if a.dcr {
		m["registration_endpoint"] = a.URL + "/register"
	}
	oauthJSON(w, http.StatusOK, m)
}

func (a *OAuthServer) register(w http.ResponseWriter, r *http.Request) {
	if !a.dcr {
		http.NotFound(w, r)
		return
	}
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.RedirectURIs) == 0 {
		oauthJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	id, secret := "dcr-"+randHex(8), "dcr-secret-"+randHex(8)
	a.mu.Lock()
	a.clients[id] = oauthClient{secret: secret, redirects: req.RedirectURIs}
	a.mu.Unlock()
	oauthJSON(w, http.StatusCreated, map[string]any{"client_id": id, "client_secret": secret, "redirect_uris": req.RedirectURIs})
}

func (a *OAuthServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	c, ok := a.clients[q.Get("client_id")]
	a.mu.Unlock()
	redirect := q.Get("redirect_uri")
	switch {
	case !ok, a.dcr && !slices.Contains(c.redirects, redirect), redirect == "":
		http.Error(w, "unknown client or redirect URI", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code", q.Get("code_challenge_method") != "S256", q.Get("code_challenge") == "":
		http.Error(w, "the authorization code grant with PKCE S256 only", http.StatusBadRequest)
		return
	}
	code := randHex(16)
	a.mu.Lock()
	a.codes[code] = oauthCode{client: q.Get("client_id"), redirect: redirect, challenge: q.Get("code_challenge")}
	a.mu.Unlock()
	u, _ := url.Parse(redirect)
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	v.Set("iss", a.URL)
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (a *OAuthServer) token(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[id]; !ok || !auth.Equal([]byte(c.secret), []byte(secret)) {
		oauthJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		c, ok := a.codes[r.PostForm.Get("code")]
		delete(a.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || c.client != id || c.redirect != r.PostForm.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
			oauthJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if a.refresh[rt] != id {
			oauthJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "refresh token unknown or used"})
			return
		}
		delete(a.refresh, rt) // it rotates: each works once
		a.refreshed++
	default:
		oauthJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	access, refresh := "at-"+randHex(16), "rt-"+randHex(16)
	a.access[access] = time.Now().Add(a.ttl)
	a.refresh[refresh] = id
	oauthJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": int(a.ttl.Seconds()), "refresh_token": refresh})
}

func oauthJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
