package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testkit"
)

// oauthServer makes an OAuth MCP server in front of as, and an Installation
// of it on app.
func (f *fixture) oauthServer(t testing.TB, as *testkit.OAuthServer) {
	t.Helper()
	ctx := context.Background()
	f.g.callback = "https://hub.example/mcp/oauth/callback"
	if _, err := f.g.CreateServer(ctx, f.member, api.MCPServer{ID: "hub:linear", Name: "Linear", URL: as.MCP.URL, Auth: AuthOAuth}); err != nil {
		t.Fatal(err)
	}
	f.install(t, f.member, api.InstallationRequest{ID: "linear", Server: "hub:linear", Name: "Linear Work", Repos: []string{f.app.ID}})
}

// consent is what the person's browser does with the URL Connect gives:
// the authorization server sends it back to the Hub's callback with a code
// and the state, which it returns.
func consent(t testing.TB, authURL string) (state, code string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || !strings.HasPrefix(back.String(), "https://hub.example/mcp/oauth/callback?") {
		t.Fatalf("the authorization server answered %d to %q", resp.StatusCode, back)
	}
	return back.Query().Get("state"), back.Query().Get("code")
}

func (f *fixture) connect(t testing.TB, u store.User, id string) {
	t.Helper()
	authURL, err := f.g.Connect(context.Background(), u, id)
	if err != nil {
		t.Fatal(err)
	}
	state, code := consent(t, authURL)
	if _, err := f.g.Callback(context.Background(), u, state, code); err != nil {
		t.Fatal(err)
	}
}

// linearSession starts a Session of app and connects an MCP client to its
// Installation linear through the Gateway.
func (f *fixture) linearSession(t testing.TB) (store.Session, *mcp.ClientSession) {
	t.Helper()
	s, err := f.session(t, f.app)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := connect(t, f.hub(t, s)+"/gateway/linear", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, cs
}

// postLinear posts to Installation linear through the Gateway at hub, and
// returns the answer's status and body.
func postLinear(t testing.TB, hub string) (int, string) {
	t.Helper()
	resp, err := http.Post(hub+"/gateway/linear", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestOAuthConnectsWithDCRAndPKCEAndRefreshesItself(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	as := testkit.NewOAuthServer(t, testkit.OAuthOptions{DCR: true})
	f.oauthServer(t, as)
	if _, err := f.session(t, f.app); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("a start before it is connected: %v, want it refused naming the way out", err)
	}
	authURL, err := f.g.Connect(ctx, f.member, "linear")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.Parse(authURL)
	if q.Query().Get("code_challenge_method") != "S256" || q.Query().Get("resource") != as.MCP.URL || !strings.HasPrefix(q.Query().Get("client_id"), "dcr-") {
		t.Fatalf("the authorization URL %s: want PKCE S256, the resource and a registered client", authURL)
	}
	state, code := consent(t, authURL)
	if _, err := f.g.Callback(ctx, f.member, state, code); err != nil {
		t.Fatal(err)
	}
	if _, err := f.g.Callback(ctx, f.member, state, code); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a state used twice: %v, want refused", err)
	}
	list, _ := f.g.List(ctx, f.member, nil)
	if st := list[0].OAuth; st == nil || !st.Connected || st.ConnectedBy != "Mia" || !st.Registered || !st.HasSecret {
		t.Fatalf("the Installation shows %+v, want connected by Mia with a registered client", st)
	}

	s, cs := f.linearSession(t)
	if got := echo(t, cs, "one"); got != "echo: one" {
		t.Fatalf("got %q", got)
	}
	vals, _ := f.g.Values(ctx, s.ID)
	if len(vals) < 3 {
		t.Fatalf("redaction values %d, want the tokens and the client secret", len(vals))
	}
	// The server drops its tokens: the Gateway refreshes and sends the
	// request again; the Session never notices.
	as.ExpireAccess()
	if got := echo(t, cs, "two"); got != "echo: two" || as.Refreshes() != 1 {
		t.Fatalf("after the server dropped the token: %q, %d refreshes; want it answered after one", got, as.Refreshes())
	}
	// A token near its expiry is refreshed first; the refresh token it
	// rotated out is not used again (the server would refuse it).
	f.g.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if got := echo(t, cs, "three"); got != "echo: three" || as.Refreshes() != 2 {
		t.Fatalf("past its expiry: %q, %d refreshes; want it answered after a second", got, as.Refreshes())
	}
	f.g.now = time.Now
	// A refresh the authorization server refuses fails the next start,
	// naming the way out: here its refresh token is one it rotated out.
	o, _ := f.st.MCP.InstallationOAuthOf(ctx, "linear")
	var stale oauthTokens
	plain, _ := f.g.sealer.Open(o.Tokens, tokensSeal("linear"))
	json.Unmarshal(plain, &stale)
	stale.Refresh, stale.Expiry = "rt-rotated-out", time.Now().Add(-time.Minute)
	sealed, _ := json.Marshal(stale)
	f.st.MCP.SetInstallationTokens(ctx, "linear", f.g.sealer.Seal(sealed, tokensSeal("linear")), f.member.ID, "")
	if _, err := f.session(t, f.app); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "connect it again") {
		t.Fatalf("a start whose refresh is refused: %v, want it failed naming the way out", err)
	}
	f.st.MCP.SetInstallationTokens(ctx, "linear", o.Tokens, f.member.ID, "")
	// A disconnect stops the running Session at once.
	if err := f.g.Disconnect(ctx, f.member, "linear"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, callEcho("four")); err == nil {
		t.Fatal("a call after a disconnect was answered")
	}
	if code, body := postLinear(t, f.hub(t, s)); code != http.StatusConflict || !strings.Contains(body, "not connected") {
		t.Fatalf("after a disconnect: %d %s, want 409 saying it is not connected", code, body)
	}
	if strings.Contains(f.logs.String(), "at-") || strings.Contains(f.logs.String(), "rt-") {
		t.Fatalf("a token reached the log:\n%s", f.logs)
	}
}

func TestTheOAuthStateIsBoundToItsPersonAndTenMinutes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	as := testkit.NewOAuthServer(t, testkit.OAuthOptions{DCR: true})
	f.oauthServer(t, as)
	authURL, err := f.g.Connect(ctx, f.member, "linear")
	if err != nil {
		t.Fatal(err)
	}
	state, code := consent(t, authURL)
	if _, err := f.g.Callback(ctx, f.owner, state, code); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("someone else's state: %v, want refused", err)
	}
	if _, err := f.g.Callback(ctx, f.member, state, code); err != nil {
		t.Fatalf("its own person, after another's try: %v", err)
	}
	f.g.now = func() time.Time { return time.Now().Add(-stateTTL - time.Minute) }
	authURL, err = f.g.Connect(ctx, f.member, "linear")
	if err != nil {
		t.Fatal(err)
	}
	state, code = consent(t, authURL)
	if _, err := f.g.Callback(ctx, f.member, state, code); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a state over ten minutes old: %v, want refused", err)
	}
}

func TestWithoutDCRAnEnteredClientIsUsedAndStaysWriteOnly(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	as := testkit.NewOAuthServer(t, testkit.OAuthOptions{})
	f.oauthServer(t, as)
	if _, err := f.g.Connect(ctx, f.member, "linear"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "client id and secret") {
		t.Fatalf("connect without DCR or a client: %v, want the way out", err)
	}
	if issuer, err := f.g.SetClient(ctx, f.member, "linear", as.ClientID, as.ClientSecret); err != nil || issuer != as.URL {
		t.Fatalf("entering the client: bound to %q, %v; want %s", issuer, err, as.URL)
	}
	f.connect(t, f.member, "linear")
	list, _ := f.g.List(ctx, f.member, nil)
	if st := list[0].OAuth; !st.Connected || st.ClientID != as.ClientID || !st.HasSecret || st.Registered {
		t.Fatalf("the Installation shows %+v", st)
	}
	log, _ := f.g.Log(ctx, f.app)
	for _, c := range log {
		if strings.Contains(c.What, as.ClientSecret) {
			t.Fatalf("the log holds the client secret: %q", c.What)
		}
	}
}

// TestAnyURLEditDropsTheTokensAndTheClient: another path on the same
// origin drops them as another origin does; a Session that started before
// the move never sends the token got for the new URL to its old one, nor
// reaches the new one before its next run.
func TestAnyURLEditDropsTheTokensAndTheClient(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	as := testkit.NewOAuthServer(t, testkit.OAuthOptions{DCR: true})
	f.oauthServer(t, as)
	f.connect(t, f.member, "linear")
	s, err := f.session(t, f.app)
	if err != nil {
		t.Fatal(err)
	}
	edit := api.MCPServer{ID: "hub:linear", Name: "Linear", URL: as.MCP.URL + "/v2", Auth: AuthOAuth}
	if _, err := f.g.EditServer(ctx, f.member, edit, false); err != nil {
		t.Fatal(err)
	}
	if o, _ := f.st.MCP.InstallationOAuthOf(ctx, "linear"); o.Tokens != nil || o.Client != nil {
		t.Fatal("tokens or the client outlived a move to another path")
	}
	moved := testkit.NewOAuthServer(t, testkit.OAuthOptions{DCR: true})
	edit.URL = moved.MCP.URL
	if _, err := f.g.EditServer(ctx, f.member, edit, false); err != nil {
		t.Fatal(err)
	}
	f.connect(t, f.member, "linear")
	before, after := len(as.MCP.Seen()), len(moved.MCP.Seen())
	if code, body := postLinear(t, f.hub(t, s)); code != http.StatusConflict || !strings.Contains(body, "restart the Session") || len(as.MCP.Seen()) != before || len(moved.MCP.Seen()) != after {
		t.Fatalf("a Session started before the move: %d %s; want 409 saying to restart, and no request at either URL", code, body)
	}
	_, cs := f.linearSession(t)
	defer cs.Close()
	if got := echo(t, cs, "moved"); got != "echo: moved" {
		t.Fatalf("a Session started after the move: %q", got)
	}
}

// TestAnEnteredClientIsClearedWhenDiscoveryNamesAnotherIssuer: a client
// entered is bound to the authorization server the MCP server named then;
// once it names another, the client and its tokens are cleared, and the
// Installation needs a client again, so the secret never reaches the
// other's token endpoint.
func TestAnEnteredClientIsClearedWhenDiscoveryNamesAnotherIssuer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first := testkit.NewOAuthServer(t, testkit.OAuthOptions{})
	other := testkit.NewOAuthServer(t, testkit.OAuthOptions{})
	var named atomic.Value
	named.Store(first.URL)
	var resource string
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"resource": resource, "authorization_servers": []string{named.Load().(string)}})
	}))
	defer rs.Close()
	resource = rs.URL + "/mcp"
	f.g.callback = "https://hub.example/mcp/oauth/callback"
	if _, err := f.g.CreateServer(ctx, f.member, api.MCPServer{ID: "hub:linear", Name: "Linear", URL: resource, Auth: AuthOAuth}); err != nil {
		t.Fatal(err)
	}
	f.install(t, f.member, api.InstallationRequest{ID: "linear", Server: "hub:linear", Name: "Linear Work", Repos: []string{f.app.ID}})
	if issuer, err := f.g.SetClient(ctx, f.member, "linear", first.ClientID, first.ClientSecret); err != nil || issuer != first.URL {
		t.Fatalf("entering the client: bound to %q, %v; want %s", issuer, err, first.URL)
	}
	f.connect(t, f.member, "linear")

	named.Store(other.URL)
	if _, err := f.g.Connect(ctx, f.member, "linear"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "enter a client id and secret") {
		t.Fatalf("connecting once another authorization server is named: %v, want it refused, saying to enter a client", err)
	}
	if o, _ := f.st.MCP.InstallationOAuthOf(ctx, "linear"); o.Client != nil || o.Tokens != nil {
		t.Fatal("the entered client or its tokens outlived a change of authorization server")
	}
	list, _ := f.g.List(ctx, f.member, nil)
	if st := list[0].OAuth; st.Connected || st.ClientID != "" {
		t.Fatalf("the Installation shows %+v, want no client and not connected", st)
	}
	log, _ := f.g.Log(ctx, f.app)
	if last := log[len(log)-1].What; !strings.Contains(last, "cleared entered OAuth client") || !strings.Contains(last, other.URL) || strings.Contains(last, first.ClientSecret) {
		t.Fatalf("the Repo's log ends with %q, want the client cleared and the issuer named, never its secret", last)
	}
}

func TestAuthorizationServersAreHTTPSNoRedirectAndCapped(t *testing.T) {
	redirect := httptest.NewServer(http.RedirectHandler("https://elsewhere.example/", http.StatusFound))
	defer redirect.Close()
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"x":"`+strings.Repeat("a", maxOAuthBody)+`"}`)
	}))
	defer big.Close()
	small := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("a", maxOAuthBody))
	}))
	defer small.Close()
	c := authServerClient(nil)
	if _, err := c.Get("http://192.0.2.1/.well-known/oauth-authorization-server"); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("plain http beyond loopback: %v, want refused", err)
	}
	if _, err := c.Get(redirect.URL); !errors.Is(err, errNoRedirect) {
		t.Errorf("a redirect: %v, want it not followed", err)
	}
	read := func(u string) (int, error) {
		resp, err := c.Get(u)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return len(b), err
	}
	if _, err := read(big.URL); err == nil {
		t.Error("an answer over 256 KiB was read")
	}
	if n, err := read(small.URL); err != nil || n != maxOAuthBody {
		t.Errorf("an answer of exactly 256 KiB: %d, %v", n, err)
	}
}

// TestRequestsRefusedTogetherRefreshOnce: refresh tokens rotate, so
// requests the server refused at once refresh the token once, and each is
// sent again with the new one.
func TestRequestsRefusedTogetherRefreshOnce(t *testing.T) {
	f := newFixture(t)
	as := testkit.NewOAuthServer(t, testkit.OAuthOptions{DCR: true})
	f.oauthServer(t, as)
	f.connect(t, f.member, "linear")
	s, err := f.session(t, f.app)
	if err != nil {
		t.Fatal(err)
	}
	hub := f.hub(t, s)
	var sessions []*mcp.ClientSession
	for range 4 {
		cs, err := connect(t, hub+"/gateway/linear", nil)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, cs)
	}
	as.ExpireAccess()
	errs := make(chan error, len(sessions))
	for i, cs := range sessions {
		go func() {
			res, err := cs.CallTool(context.Background(), callEcho(fmt.Sprint(i)))
			if err == nil && res.Content[0].(*mcp.TextContent).Text != fmt.Sprintf("echo: %d", i) {
				err = fmt.Errorf("got %v", res.Content[0])
			}
			errs <- err
		}()
	}
	for range sessions {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if as.Refreshes() != 1 {
		t.Fatalf("%d refreshes for requests refused together, want 1", as.Refreshes())
	}
}
