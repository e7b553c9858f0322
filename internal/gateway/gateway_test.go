package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	outdial "kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
	"kndl.dev/kndl/internal/testkit"
)

// fixture is a Gateway over a real store: the Owner, a Member, two Repos
// the Member may push to (app, lib), one they may only read (ro) and one
// they haven't access to (secret). The Owner may push to each.
type fixture struct {
	g                 *Gateway
	st                *store.Store
	owner, member     store.User
	app, lib, ro, sec store.Repo
	runner            string
	logs              *bytes.Buffer
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	st := storetest.Open(t)
	box, err := seal.New(bytes.Repeat([]byte{7}, seal.KeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, logs: &bytes.Buffer{}}
	link, _ := st.Members.NewSetupLink(ctx)
	if f.owner, err = st.Members.ClaimSetupLink(ctx, link, store.GitHubIdentity{ID: 1, Login: "olga", Name: "Olga"}); err != nil {
		t.Fatal(err)
	}
	_, invite, _ := st.Members.CreateInvite(ctx, "mia", f.owner.ID, time.Hour)
	if f.member, err = st.Members.RedeemInvite(ctx, invite, store.GitHubIdentity{ID: 2, Login: "mia", Name: "Mia"}); err != nil {
		t.Fatal(err)
	}
	f.app, _ = st.Repos.EnsureRepo(ctx, "https://github.com/acme/app", "acme/app")
	f.lib, _ = st.Repos.EnsureRepo(ctx, "https://github.com/acme/lib", "acme/lib")
	f.ro, _ = st.Repos.EnsureRepo(ctx, "https://github.com/acme/ro", "acme/ro")
	f.sec, _ = st.Repos.EnsureRepo(ctx, "https://github.com/acme/secret", "acme/secret")
	rn, _, _ := st.Runners.CreateRunner(ctx, "r", f.owner.ID)
	f.runner = rn.ID
	access := func(_ context.Context, u store.User, repoURL string) bool {
		return u.IsOwner || repoURL != f.sec.URL
	}
	push := func(ctx context.Context, u store.User, repoURL string) bool {
		return access(ctx, u, repoURL) && (u.IsOwner || repoURL != f.ro.URL)
	}
	// The test's MCP servers are on loopback, which kndl dev allows.
	f.g, err = New(Options{Store: Store{MCP: st.MCP, Repos: st.Repos, Members: st.Members}, Sealer: box, Access: access, Push: push, Logger: slog.New(slog.NewTextHandler(f.logs, nil)),
		Transport: (&outdial.Dialer{Allow: outdial.AllowLoopback}).Transport()})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// server makes a header-secret MCP server at url, sending key as
// Authorization: Bearer {value}.
func (f *fixture) server(t testing.TB, id, url string) {
	t.Helper()
	_, err := f.g.CreateServer(context.Background(), f.member, api.MCPServer{ID: id, Name: "Docs", URL: url, Auth: AuthHeaders,
		Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) install(t testing.TB, u store.User, req api.InstallationRequest) {
	t.Helper()
	if _, err := f.g.Install(context.Background(), u, req); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) setValue(t testing.TB, u store.User, id, value string) {
	t.Helper()
	if _, err := f.g.SetValue(context.Background(), u, id, "api-key", value); err != nil {
		t.Fatal(err)
	}
}

// session starts a Session on repo: the Gateway prepares its run.
func (f *fixture) session(t testing.TB, repo store.Repo) (store.Session, error) {
	t.Helper()
	ctx := context.Background()
	s, err := f.st.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: f.member.ID, RunnerID: f.runner, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.g.Prepare(ctx, s)
	return s, err
}

// docsSession is a Session of app running with Installation "docs" of a
// bearer-header MCP server that takes serverKey, its value set to value.
func (f *fixture) docsSession(t testing.TB, serverKey, value string) (store.Session, *testkit.MCPServer) {
	t.Helper()
	up := testkit.NewMCPServer(t, serverKey)
	f.server(t, "hub:docs", up.URL)
	f.install(t, f.member, api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{f.app.ID}})
	f.setValue(t, f.member, "docs", value)
	s, err := f.session(t, f.app)
	if err != nil {
		t.Fatal(err)
	}
	return s, up
}

// hub serves the Gateway for one Session as the Hub's route does, once a
// mod token named it.
func (f *fixture) hub(t testing.TB, s store.Session) string {
	t.Helper()
	mux := http.NewServeMux()
	for _, m := range []string{"GET", "POST", "DELETE"} {
		mux.HandleFunc(m+" /gateway/{installation}", func(w http.ResponseWriter, r *http.Request) {
			f.g.Serve(w, r, s, r.PathValue("installation"))
		})
	}
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

// connect is an MCP client on the SDK's streamable HTTP transport at url,
// each request carrying header (what code in the Sandbox could add).
func connect(t testing.TB, url string, header http.Header) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v1"}, nil)
	hc := &http.Client{Transport: headerTransport{header}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	return http.DefaultTransport.RoundTrip(r)
}

func callEcho(text string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}}
}

func echo(t testing.TB, cs *mcp.ClientSession, text string) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), callEcho(text))
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func TestAToolCallGoesThroughTheGatewayWithTheInstallationsKey(t *testing.T) {
	f := newFixture(t)
	s, _ := f.docsSession(t, "key-for-docs", "key-for-docs")
	cs, err := connect(t, f.hub(t, s)+"/gateway/docs", nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("tools %v, %v; want echo and time", tools, err)
	}
	if got := echo(t, cs, "hello"); got != "echo: hello" {
		t.Fatalf("got %q, want echo: hello", got)
	}
	vals, err := f.g.Values(context.Background(), s.ID)
	if err != nil || len(vals) != 1 || vals[0] != "key-for-docs" {
		t.Fatalf("redaction values %q, %v; want the key", vals, err)
	}
	log := f.logs.String()
	if !strings.Contains(log, "installation=docs") || !strings.Contains(log, "status=200") || strings.Contains(log, "key-for-docs") || strings.Contains(log, "hello") {
		t.Fatalf("the log must name the Session, Installation, method and status, never a value or content:\n%s", log)
	}
}

// initialize is an MCP client's first request.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

// postMCP posts body to an MCP endpoint as a streamable-HTTP client does,
// reads the answer out and returns it.
func postMCP(t *testing.T, url string, body io.Reader) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestTheGatewaysRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, up := f.docsSession(t, "k-123", "k-123")
	hub := f.hub(t, s)
	post := func(path string, body io.Reader) *http.Response { return postMCP(t, hub+path, body) }

	t.Run("403 for an Installation the Session did not start with", func(t *testing.T) {
		f.install(t, f.member, api.InstallationRequest{ID: "later", Server: "hub:docs", Name: "Later", Repos: []string{f.lib.ID}})
		for _, id := range []string{"later", "nothing"} {
			if resp := post("/gateway/"+id, strings.NewReader(initialize)); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: status %d, want 403", id, resp.StatusCode)
			}
		}
	})
	t.Run("413 beyond the body the Gateway holds", func(t *testing.T) {
		n := len(up.Seen())
		big := bytes.Repeat([]byte("x"), MaxBodyBytes+1)
		if resp := post("/gateway/docs", bytes.NewReader(big)); resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d, want 413", resp.StatusCode)
		}
		// Without a length up front, as a chunked body comes.
		if resp := post("/gateway/docs", io.MultiReader(bytes.NewReader(big))); resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked: status %d, want 413", resp.StatusCode)
		}
		if len(up.Seen()) != n {
			t.Error("a refused request reached the MCP server")
		}
	})
	t.Run("409 naming the Installation and the secret when the run has no value", func(t *testing.T) {
		// The server declares a second secret after the Session started.
		srv, _ := f.st.MCP.MCPServerByID(ctx, "hub:docs")
		edit := apiServer(srv)
		edit.Headers = append(edit.Headers, api.HeaderSecret{Key: "team", Header: "X-Team", Format: "{value}"})
		if _, err := f.g.EditServer(ctx, f.member, edit, false); err != nil {
			t.Fatal(err)
		}
		n := len(up.Seen())
		req, _ := http.NewRequest("POST", hub+"/gateway/docs", strings.NewReader(initialize))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "docs") || !strings.Contains(string(body), "team") {
			t.Errorf("status %d %s, want 409 naming docs and team", resp.StatusCode, body)
		}
		if len(up.Seen()) != n {
			t.Error("a request without its secret reached the MCP server")
		}
		edit.Headers = edit.Headers[:1]
		f.g.EditServer(ctx, f.member, edit, false)
	})
	t.Run("403 once the Installation is taken off the Repo", func(t *testing.T) {
		if _, err := f.g.SetOff(ctx, f.member, f.app, "docs", true); err != nil {
			t.Fatal(err)
		}
		if resp := post("/gateway/docs", strings.NewReader(initialize)); resp.StatusCode != http.StatusForbidden {
			t.Errorf("status %d, want 403", resp.StatusCode)
		}
		f.g.SetOff(ctx, f.member, f.app, "docs", false)
		if resp := post("/gateway/docs", strings.NewReader(initialize)); resp.StatusCode != http.StatusOK {
			t.Errorf("on again: status %d, want 200", resp.StatusCode)
		}
	})
}

// TestAServerThatDoesNotAnswerIsCutAtTheTimeout: an MCP server that holds
// a request unanswered gets the Gateway's timeout, not the Sandbox's
// patience: the Sandbox gets 504 naming HUB_GATEWAY_TIMEOUT, and the Hub
// lets go of the request.
func TestAServerThatDoesNotAnswerIsCutAtTheTimeout(t *testing.T) {
	f := newFixture(t)
	f.g.timeout = 200 * time.Millisecond
	over := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so the server sees the Gateway go away
		select {
		case <-r.Context().Done():
		case <-over:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(over) })
	f.server(t, "hub:slow", slow.URL)
	f.install(t, f.member, api.InstallationRequest{ID: "slow", Server: "hub:slow", Name: "Slow", Repos: []string{f.app.ID}})
	f.setValue(t, f.member, "slow", "key-for-slow")
	s, err := f.session(t, f.app)
	if err != nil {
		t.Fatal(err)
	}
	hub := f.hub(t, s)
	type answer struct {
		status int
		body   string
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Post(hub+"/gateway/slow", "application/json", strings.NewReader(initialize))
		if err != nil {
			got <- answer{body: err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- answer{resp.StatusCode, string(b)}
	}()
	select {
	case a := <-got:
		if a.status != http.StatusGatewayTimeout || !strings.Contains(a.body, "HUB_GATEWAY_TIMEOUT") {
			t.Fatalf("got %d %s, want 504 naming HUB_GATEWAY_TIMEOUT", a.status, a.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Gateway still waits for a server that does not answer, 10 s after its 200 ms timeout")
	}
}

func TestHeadersFromTheSandboxNeverReachTheServer(t *testing.T) {
	f := newFixture(t)
	s, up := f.docsSession(t, "the-real-key", "the-real-key")
	smuggled := http.Header{}
	// Go canonicalizes a header's name; a raw one in another case reaches
	// the Hub as the Sandbox wrote it.
	smuggled["AUTHORIZATION"] = []string{"Bearer the-sandboxes-own"}
	smuggled.Set("Cookie", "hub=1")
	smuggled.Set("X-Forwarded-For", "10.0.0.1")
	smuggled.Set("Forwarded", "for=10.0.0.1")
	smuggled.Set("X-Real-Ip", "10.0.0.1")
	cs, err := connect(t, f.hub(t, s)+"/gateway/docs", smuggled)
	if err != nil {
		t.Fatal(err)
	}
	echo(t, cs, "x")
	for _, seen := range up.Seen() {
		if got := seen.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer the-real-key" {
			t.Errorf("Authorization at the server %q, want only the Installation's", got)
		}
		for _, h := range []string{"Cookie", "X-Forwarded-For", "Forwarded", "X-Real-Ip"} {
			if v := seen.Header.Get(h); v != "" {
				t.Errorf("%s reached the server: %q", h, v)
			}
		}
	}
}

func TestNoChallengeAndNoWellKnownPassThrough(t *testing.T) {
	f := newFixture(t)
	s, up := f.docsSession(t, "right-key", "a-wrong-key")
	hub := f.hub(t, s)
	resp, err := http.Post(hub+"/gateway/docs", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "" {
		t.Fatalf("status %d, WWW-Authenticate %q; want the server's 401 without its challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	for _, p := range []string{"/gateway/docs/.well-known/oauth-protected-resource", "/gateway/docs/anything", "/.well-known/oauth-protected-resource/gateway/docs"} {
		resp, err := http.Get(hub + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", p, resp.StatusCode)
		}
	}
	if up.SawWellKnown() {
		t.Fatal("a .well-known request reached the MCP server")
	}
}

func TestAStartFailsOnAMissingValueNamingTheWayOut(t *testing.T) {
	f := newFixture(t)
	f.server(t, "hub:docs", "https://docs.example/mcp")
	f.install(t, f.owner, api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Global: true})
	_, err := f.session(t, f.app)
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "docs") || !strings.Contains(err.Error(), "api-key") || !strings.Contains(err.Error(), "turn the Installation off") {
		t.Fatalf("got %v, want a conflict naming docs, api-key and the way out", err)
	}
	// Turned off for this Repo, the Session starts without it.
	if _, err := f.g.SetOff(context.Background(), f.member, f.app, "docs", true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.session(t, f.app); err != nil {
		t.Fatal(err)
	}
}

func TestAnyURLEditClearsValuesAndAKeyEditClearsItsOwn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.server(t, "hub:docs", "https://docs.example/mcp")
	f.install(t, f.member, api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{f.app.ID}})
	f.install(t, f.member, api.InstallationRequest{ID: "docs-lib", Server: "hub:docs", Name: "Docs for lib", Repos: []string{f.lib.ID}})
	setBoth := func() {
		f.setValue(t, f.member, "docs", "value-one")
		f.setValue(t, f.member, "docs-lib", "value-two")
	}
	setBoth()
	srv, _ := f.st.MCP.MCPServerByID(ctx, "hub:docs")
	edit := apiServer(srv)

	stored := func() int {
		n := 0
		for _, id := range []string{"docs", "docs-lib"} {
			vs, _ := f.st.MCP.InstallationValues(ctx, id)
			n += len(vs)
		}
		return n
	}
	// Saved as it is: values stay.
	if out, err := f.g.EditServer(ctx, f.member, edit, false); err != nil || len(out.Clears) != 0 || stored() != 2 {
		t.Fatalf("no change: clears %v, %v, %d values stored; want none cleared", out.Clears, err, stored())
	}
	// Another path on the same origin, as another server on a shared host
	// would be: a dry run says whose values go, and changes nothing.
	edit.URL = "https://docs.example/v2/mcp"
	out, err := f.g.EditServer(ctx, f.member, edit, true)
	if err != nil || len(out.Clears) != 2 || stored() != 2 {
		t.Fatalf("dry run: clears %v, %v, %d stored; want both named and nothing changed", out.Clears, err, stored())
	}
	if _, err := f.g.EditServer(ctx, f.member, edit, false); err != nil || stored() != 0 {
		t.Fatalf("another path: %v, %d values stored; want every value cleared", err, stored())
	}
	// Another origin.
	setBoth()
	edit.URL = "https://elsewhere.example/mcp"
	if _, err := f.g.EditServer(ctx, f.member, edit, false); err != nil || stored() != 0 {
		t.Fatalf("another origin: %v, %d values stored; want every value cleared", err, stored())
	}
	// A header secret's header changed: its values go.
	f.setValue(t, f.member, "docs", "value-one")
	edit.Headers[0].Header = "X-Api-Key"
	if out, err := f.g.EditServer(ctx, f.member, edit, false); err != nil || len(out.Clears) != 1 || stored() != 0 {
		t.Fatalf("header changed: clears %v, %v, %d stored; want docs's value cleared", out.Clears, err, stored())
	}
	var logged bool
	log, _ := f.g.Log(ctx, f.app)
	for _, c := range log {
		logged = logged || strings.Contains(c.What, "cleared the values of api-key")
		if strings.Contains(c.What, "value-one") {
			t.Fatalf("the log holds a value: %q", c.What)
		}
	}
	if !logged {
		t.Fatalf("the Repo's log does not say the edit cleared the value: %+v", log)
	}
}

func TestWhoManagesInstallations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.server(t, "hub:docs", "https://docs.example/mcp")
	f.server(t, "hub:other", "https://other.example/mcp")

	// Only the Owner makes a global one.
	_, err := f.g.Install(ctx, f.member, api.InstallationRequest{ID: "g", Server: "hub:docs", Name: "G", Global: true})
	if !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("a Member's global Installation: %v, want forbidden", err)
	}
	f.install(t, f.owner, api.InstallationRequest{ID: "g", Server: "hub:docs", Name: "G", Global: true})
	if _, err := f.g.SetValue(ctx, f.member, "g", "api-key", "abcd"); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("a Member setting a global one's value: %v, want forbidden", err)
	}

	// A Repo they can't see reads the same as one that doesn't exist.
	_, errSecret := f.g.Install(ctx, f.member, api.InstallationRequest{ID: "x", Server: "hub:docs", Name: "X", Repos: []string{f.app.ID, f.sec.ID}})
	_, errNone := f.g.Install(ctx, f.member, api.InstallationRequest{ID: "x", Server: "hub:docs", Name: "X", Repos: []string{f.app.ID, f.sec.ID + "0"}})
	if !errors.Is(errSecret, errdefs.ErrNotFound) || strings.ReplaceAll(errSecret.Error(), f.sec.ID, "R") != strings.ReplaceAll(errNone.Error(), f.sec.ID+"0", "R") {
		t.Fatalf("refusals differ:\n%v\n%v", errSecret, errNone)
	}

	// The Owner puts one on secret and app; the Member sees app and a
	// count, and may not edit it or add Repos.
	f.install(t, f.owner, api.InstallationRequest{ID: "o", Server: "hub:other", Name: "O", Repos: []string{f.app.ID, f.sec.ID}})
	list, err := f.g.List(ctx, f.member, &f.app)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if in.ID == "o" && (len(in.Repos) != 1 || in.Repos[0] != f.app.ID || in.HiddenRepos != 1 || !in.On.On) {
			t.Fatalf("the Member sees %+v, want app, one hidden Repo, on in app", in)
		}
	}
	if _, err := f.g.SetRepos(ctx, f.member, "o", []string{f.app.ID, f.lib.ID}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a Member adding a Repo to one listing a Repo they can't see: %v, want refused", err)
	}

	// A second Installation of a server on a Repo is refused; a Repo-scoped
	// one takes a global one's place.
	f.install(t, f.member, api.InstallationRequest{ID: "mine", Server: "hub:docs", Name: "Mine", Repos: []string{f.app.ID}})
	if _, err := f.g.Install(ctx, f.member, api.InstallationRequest{ID: "mine2", Server: "hub:docs", Name: "Mine 2", Repos: []string{f.lib.ID, f.app.ID}}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("a second Installation of hub:docs on app: %v, want conflict", err)
	}
	if _, err := f.g.Install(ctx, f.owner, api.InstallationRequest{ID: "g2", Server: "hub:docs", Name: "G2", Global: true}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("a second global Installation of hub:docs: %v, want conflict", err)
	}
	on, why, err := f.g.on(ctx, f.app.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range on {
		ids = append(ids, in.ID)
	}
	if strings.Join(ids, ",") != "mine,o" || !strings.Contains(why["g"], "mine") {
		t.Fatalf("on in app: %v (g: %q), want mine in g's place, and o", ids, why["g"])
	}
	if on, _, _ := f.g.on(ctx, f.lib.ID); len(on) != 1 || on[0].ID != "g" {
		t.Fatalf("on in lib: %v, want the global g", on)
	}
}

// TestARepoInstallationIsChangedOnlyWithPushOnEachRepo: someone who may
// only read a Repo sees its Installations, but can't make one there, fill
// one in, give it Repos or turn one off or on there; it reaches every
// Creator's Sessions in the Repo.
func TestARepoInstallationIsChangedOnlyWithPushOnEachRepo(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.server(t, "hub:docs", "https://docs.example/mcp")
	f.server(t, "hub:other", "https://other.example/mcp")
	forbidden := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "write (push) permission") {
			t.Errorf("%s: %v, want forbidden naming write permission", what, err)
		}
	}
	_, err := f.g.Install(ctx, f.member, api.InstallationRequest{ID: "mine", Server: "hub:docs", Name: "Mine", Repos: []string{f.app.ID, f.ro.ID}})
	forbidden("making one on a Repo they may only read", err)
	f.install(t, f.owner, api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{f.ro.ID}})
	_, err = f.g.SetValue(ctx, f.member, "docs", "api-key", "their-own-key")
	forbidden("filling it in", err)
	_, err = f.g.SetRepos(ctx, f.member, "docs", []string{f.ro.ID, f.app.ID})
	forbidden("giving it Repos", err)
	f.install(t, f.owner, api.InstallationRequest{ID: "g", Server: "hub:other", Name: "G", Global: true})
	_, err = f.g.SetOff(ctx, f.member, f.ro, "g", true)
	forbidden("turning the global one off there", err)
	if list, err := f.g.List(ctx, f.member, &f.ro); err != nil || len(list) != 2 || !list[0].On.On {
		t.Fatalf("the reader lists %+v, %v; want both, on in ro", list, err)
	}
	if _, err := f.g.SetOff(ctx, f.member, f.app, "g", true); err != nil {
		t.Fatalf("turning it off where they may push: %v", err)
	}
}

// TestAServerIsEditedOnlyByWhoMayEditEachOfItsInstallations: the server
// behind the Owner's global Installation, or behind one on a Repo a Member
// may only read, is the Owner's to edit; one with no Installation, or
// with ones the Member may edit, any Member's. A refused edit changes
// nothing.
func TestAServerIsEditedOnlyByWhoMayEditEachOfItsInstallations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	edit := func(u store.User, id, url string) error {
		_, err := f.g.EditServer(ctx, u, api.MCPServer{ID: id, Name: "Docs", URL: url, Auth: AuthHeaders,
			Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}}, false)
		return err
	}
	f.server(t, "hub:docs", "https://docs.example/mcp")
	if err := edit(f.member, "hub:docs", "https://docs.example/v1/mcp"); err != nil {
		t.Fatalf("a server without Installations: %v", err)
	}
	f.install(t, f.member, api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{f.app.ID}})
	if err := edit(f.member, "hub:docs", "https://docs.example/v2/mcp"); err != nil {
		t.Fatalf("a server whose one Installation the Member may edit: %v", err)
	}
	for _, in := range []api.InstallationRequest{
		{ID: "global", Server: "hub:global", Name: "Global", Global: true},
		{ID: "read-only", Server: "hub:read-only", Name: "On ro", Repos: []string{f.ro.ID}},
	} {
		f.server(t, in.Server, "https://docs.example/mcp")
		f.install(t, f.member, api.InstallationRequest{ID: in.ID + "-app", Server: in.Server, Name: "On app", Repos: []string{f.app.ID}})
		f.install(t, f.owner, in)
		if err := edit(f.member, in.Server, "https://attacker.example/mcp"); !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), in.ID) {
			t.Fatalf("the Member edits the server of %s: %v, want forbidden naming it", in.ID, err)
		}
		if srv, _ := f.st.MCP.MCPServerByID(ctx, in.Server); srv.URL != "https://docs.example/mcp" {
			t.Fatalf("a refused edit moved the server to %s", srv.URL)
		}
		if err := edit(f.owner, in.Server, "https://docs.example/v2/mcp"); err != nil {
			t.Fatalf("the Owner edits the server of %s: %v", in.ID, err)
		}
	}
}

// TestARunningSessionKeepsTheURLItStartedWith: an edit moving the server
// reaches a Session at its next run (a wake or a Restart prepares it
// again), never in between: its requests keep going, with the values it
// started with, to the URL it started with, and the new one gets none.
func TestARunningSessionKeepsTheURLItStartedWith(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, before := f.docsSession(t, "k-before", "k-before")
	after := testkit.NewMCPServer(t, "k-after")
	srv, _ := f.st.MCP.MCPServerByID(ctx, "hub:docs")
	edit := apiServer(srv)
	edit.URL = after.URL
	if _, err := f.g.EditServer(ctx, f.member, edit, false); err != nil {
		t.Fatal(err)
	}
	hub := f.hub(t, s)
	cs, err := connect(t, hub+"/gateway/docs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := echo(t, cs, "still"); got != "echo: still" || len(after.Seen()) != 0 {
		t.Fatalf("after the edit: %q, %d requests at the new URL; want the one it started with to answer", got, len(after.Seen()))
	}
	cs.Close()
	f.setValue(t, f.member, "docs", "k-after")
	if _, err := f.g.Prepare(ctx, s); err != nil {
		t.Fatal(err)
	}
	n := len(before.Seen())
	cs, err = connect(t, hub+"/gateway/docs", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := echo(t, cs, "moved"); got != "echo: moved" || len(before.Seen()) != n {
		t.Fatalf("its next run: %q, %d requests at the old URL; want the new one to answer", got, len(before.Seen())-n)
	}
}

func TestValuesAreWriteOnlyAndSealed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.server(t, "hub:docs", "https://docs.example/mcp")
	f.install(t, f.member, api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{f.app.ID}})
	v, err := f.g.SetValue(ctx, f.member, "docs", "api-key", "sk-live-value")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	if strings.Contains(string(out), "sk-live-value") || v.Secrets[0].SetBy != "Mia" || v.Secrets[0].NeedsOne {
		t.Fatalf("the view %s must say who set it, never the value", out)
	}
	vs, _ := f.st.MCP.InstallationValues(ctx, "docs")
	if bytes.Contains(vs["api-key"].Sealed, []byte("sk-live-value")) {
		t.Fatal("the value is stored in the clear")
	}
	for _, bad := range []string{"abc", "two\nlines", " padded "} {
		if _, err := f.g.SetValue(ctx, f.member, "docs", "api-key", bad); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("value %q: %v, want invalid", bad, err)
		}
	}
}

func TestServerDefinitionsAreChecked(t *testing.T) {
	f := newFixture(t)
	h := []api.HeaderSecret{{Key: "k", Header: "Authorization", Format: "Bearer {value}"}}
	tests := []struct {
		name string
		m    api.MCPServer
	}{
		{"an id outside hub:", api.MCPServer{ID: "docs", Name: "D", URL: "https://x.example", Auth: AuthHeaders, Headers: h}},
		{"plain http beyond loopback", api.MCPServer{ID: "hub:d", Name: "D", URL: "http://x.example", Auth: AuthHeaders, Headers: h}},
		{"credentials in the URL", api.MCPServer{ID: "hub:d", Name: "D", URL: "https://u:p@x.example", Auth: AuthHeaders, Headers: h}},
		{"a reserved header", api.MCPServer{ID: "hub:d", Name: "D", URL: "https://x.example", Auth: AuthHeaders,
			Headers: []api.HeaderSecret{{Key: "k", Header: "Mcp-Session-Id", Format: "{value}"}}}},
		{"a format without {value}", api.MCPServer{ID: "hub:d", Name: "D", URL: "https://x.example", Auth: AuthHeaders,
			Headers: []api.HeaderSecret{{Key: "k", Header: "X-Key", Format: "Bearer"}}}},
		{"headers without auth headers", api.MCPServer{ID: "hub:d", Name: "D", URL: "https://x.example", Auth: AuthNone, Headers: h}},
		{"oauth with header secrets", api.MCPServer{ID: "hub:d", Name: "D", URL: "https://x.example", Auth: AuthOAuth, Headers: h}},
		{"an auth it does not know", api.MCPServer{ID: "hub:d", Name: "D", URL: "https://x.example", Auth: "basic"}},
	}
	for _, tt := range tests {
		if _, err := f.g.CreateServer(context.Background(), f.member, tt.m); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", tt.name, err)
		}
	}
	if s, _ := f.g.Servers(context.Background()); len(s) != 0 {
		t.Fatalf("refused servers were stored: %v", s)
	}
}

// counted is a Metrics that keeps what it is told.
type counted struct {
	mu   sync.Mutex
	seen []string
}

func (c *counted) GatewayRequest(installation string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, fmt.Sprintf("%s %d", installation, status))
}

// TestRequestsAreCountedByInstallationNeverByAnIDTheSandboxMadeUp: each
// request is counted with its Installation and status; an id the Session
// did not start with, which code in the Sandbox may make up without end,
// counts as unknown.
func TestRequestsAreCountedByInstallationNeverByAnIDTheSandboxMadeUp(t *testing.T) {
	f := newFixture(t)
	c := &counted{}
	f.g.metrics = c
	s, _ := f.docsSession(t, "k-123", "k-123")
	hub := f.hub(t, s)
	post := func(id string) { postMCP(t, hub+"/gateway/"+id, strings.NewReader(initialize)) }
	post("docs")
	post("made-up-1")
	post("made-up-2")
	if _, err := f.g.SetOff(context.Background(), f.member, f.app, "docs", true); err != nil {
		t.Fatal(err)
	}
	post("docs")
	c.mu.Lock()
	defer c.mu.Unlock()
	want := []string{"docs 200", "unknown 403", "unknown 403", "docs 403"}
	if !slices.Equal(c.seen, want) {
		t.Fatalf("counted %q, want %q", c.seen, want)
	}
}
