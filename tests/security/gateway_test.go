package security

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testkit"
)

// mcpKey is the header secret value the tests' MCP server needs.
const mcpKey = "mcp-key-security-test-0123456789"

// gatewayEnv is the team with bob's Runner connected, and an Installation
// "docs" of a bearer-header MCP server on acme/app, its value set by bob.
type gatewayEnv struct {
	*env
	owner, bob *browser
	runner     *fakeRunner
	up         *testkit.MCPServer
	repo       api.Repo
}

func newGatewayEnv(t *testing.T, opts ...func(*hub.Config)) *gatewayEnv {
	// The tests' MCP and authorization servers are on loopback, which
	// kndl dev's Hub allows; opts may change that.
	e := &gatewayEnv{env: newEnv(t, append([]func(*hub.Config){allowLoopback}, opts...)...)}
	e.owner, e.bob, _ = e.team()
	e.runner = e.pair(e.bob, "bobs-box")
	e.up = testkit.NewMCPServer(t, mcpKey)
	e.api(e.bob, "POST", "/api/repos", map[string]string{"url": e.gh.RepoURL("acme/app")}, &e.repo)
	e.api(e.bob, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:docs", Name: "Docs", URL: e.up.URL, Auth: "headers",
		Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}}, nil)
	e.api(e.bob, "POST", "/api/mcp/installations", api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{e.repo.ID}}, nil)
	e.api(e.bob, "PUT", "/api/mcp/installations/docs/secrets/api-key", map[string]string{"value": mcpKey}, nil)
	return e
}

// allowLoopback gives the Hub kndl dev's HUB_OUTBOUND_ALLOW.
func allowLoopback(c *hub.Config) {
	c.Outbound = outbound.Dialer{Allow: outbound.AllowLoopback, Setting: "HUB_OUTBOUND_ALLOW"}
}

// linear adds an OAuth MCP server in front of a testkit authorization
// server with DCR, and bob's Installation "linear" of it on acme/app.
func (e *gatewayEnv) linear(t *testing.T) {
	as := testkit.NewOAuthServer(t, testkit.OAuthOptions{DCR: true})
	e.api(e.bob, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:linear", Name: "Linear", URL: as.MCP.URL, Auth: "oauth"}, nil)
	e.api(e.bob, "POST", "/api/mcp/installations", api.InstallationRequest{ID: "linear", Server: "hub:linear", Name: "Linear Work", Repos: []string{e.repo.ID}}, nil)
}

// beginConnect has bob begin connecting "linear", and returns the URL his
// browser goes to.
func (e *gatewayEnv) beginConnect() string {
	var begun struct {
		URL string `json:"url"`
	}
	e.api(e.bob, "POST", "/api/mcp/installations/linear/connect", nil, &begun)
	return begun.URL
}

// api has b call the Hub's API, and fails the test on an error.
func (e *gatewayEnv) api(b *browser, method, path string, in, out any) {
	e.t.Helper()
	body, _ := json.Marshal(in)
	code, answer := e.do(b.Client, req{method: method, path: path, body: string(body), origin: "self"})
	if code != http.StatusOK {
		e.t.Fatalf("%s %s: %d %s", method, path, code, answer)
	}
	if out != nil {
		json.Unmarshal([]byte(answer), out)
	}
}

// started has bob start a Session and returns it with the session.start
// his Runner got.
func (e *gatewayEnv) started() (api.Session, protocol.SessionStart, string) {
	e.t.Helper()
	s := e.running(e.bob, e.runner)
	raw, _ := e.runner.starts.Load(s.ID)
	var m protocol.SessionStart
	json.Unmarshal(raw.(json.RawMessage), &m)
	return s, m, string(raw.(json.RawMessage))
}

// echoThrough calls the echo tool of Installation id with an MCP client
// on the SDK's streamable HTTP transport, at the Hub's /gateway/<id> with
// a run's mod token as the relay sends it, and returns its answer.
func (e *gatewayEnv) echoThrough(id, modToken, text string) string {
	e.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "security-test", Version: "v1"}, nil)
	hc := &http.Client{Transport: bearerTransport(modToken)}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url + "/gateway/" + id, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestAnInstallationsToolWorksThroughTheHubAndItsKeyNeverReachesTheRunner:
// the Runner's session.start names the Installation and holds no value of
// it, nor do the Session's credentials; with the run's mod token the
// Gateway answers the server's tools, the key added on the Hub.
func TestAnInstallationsToolWorksThroughTheHubAndItsKeyNeverReachesTheRunner(t *testing.T) {
	e := newGatewayEnv(t)
	s, start, raw := e.started()
	if len(start.MCPServers) != 1 || start.MCPServers[0].Installation != "docs" {
		t.Fatalf("session.start names %+v, want docs", start.MCPServers)
	}
	creds, err := e.runner.credentials(s.ID)
	if err != nil {
		t.Fatal(err)
	}
	credsJSON, _ := json.Marshal(creds)
	if strings.Contains(raw, mcpKey) || strings.Contains(string(credsJSON), mcpKey) {
		t.Fatal("an Installation's value reached the Runner")
	}
	if got := e.echoThrough("docs", start.ModToken, "through the Hub"); got != "echo: through the Hub" {
		t.Fatalf("echo: %q", got)
	}
	// The run's Installations show on the Session.
	var view struct {
		MCPServers []protocol.MCPServer `json:"mcp_servers"`
	}
	code, body := e.do(e.bob.Client, req{method: "GET", path: "/api/sessions/" + s.ID, origin: "self"})
	json.Unmarshal([]byte(body), &view)
	if code != http.StatusOK || len(view.MCPServers) != 1 || view.MCPServers[0].Installation != "docs" {
		t.Fatalf("the Session view: %d %s, want it to list docs", code, body)
	}
	if code, page := e.do(e.bob.Client, req{method: "GET", path: "/sessions/" + s.ID}); code != http.StatusOK || !strings.Contains(page, "MCP servers <strong>Docs</strong>") {
		t.Fatalf("the Session's page: %d, want it to name Docs", code)
	}
}

// TestTheGatewayNeedsTheModTokenOfALiveRun: without a mod token, with
// another kind of credential, or with the token of a run that ended, the
// Gateway answers 401, with no challenge for Claude Code to follow.
func TestTheGatewayNeedsTheModTokenOfALiveRun(t *testing.T) {
	e := newGatewayEnv(t)
	s, start, _ := e.started()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	try := func(what, bearer string) {
		t.Helper()
		resp := e.send(nil, req{method: "POST", path: "/gateway/docs", body: init, bearer: bearer, from: nextAddr()})
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "" {
			t.Errorf("%s: %d, WWW-Authenticate %q; want 401 without a challenge", what, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	try("no token", "")
	try("a CLI token", e.cliLogin(e.bob))
	try("the runner's token", e.runner.Token)
	e.do(e.bob.Client, req{method: "POST", path: "/api/sessions/" + s.ID + "/sleep", origin: "self"})
	e.waitState(s.ID, store.Asleep)
	try("the mod token of a run that ended", start.ModToken)
}

// TestAStartFailsNamingAnInstallationWithoutItsValue: a global
// Installation without a value fails every start, saying which and the
// way out; turned off for the Repo, the Session starts.
func TestAStartFailsNamingAnInstallationWithoutItsValue(t *testing.T) {
	e := newGatewayEnv(t)
	e.api(e.owner, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:tracker", Name: "Tracker", URL: "https://tracker.example/mcp", Auth: "headers",
		Headers: []api.HeaderSecret{{Key: "token", Header: "X-Token", Format: "{value}"}}}, nil)
	e.api(e.owner, "POST", "/api/mcp/installations", api.InstallationRequest{ID: "tracker", Server: "hub:tracker", Name: "Tracker", Global: true}, nil)
	code, body, s := e.start(e.bob, e.runner.Name)
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, body)
	}
	failed := e.waitState(s.ID, store.Failed)
	if !strings.Contains(failed.StateDetail, "tracker") || !strings.Contains(failed.StateDetail, "token") || !strings.Contains(failed.StateDetail, "turn the Installation off") {
		t.Fatalf("failed saying %q, want the Installation, its secret and the way out", failed.StateDetail)
	}
	e.runner.nothingStarted(t, "a start without an Installation's value")
	e.api(e.bob, "PUT", fmt.Sprintf("/api/repos/%s/mcp/tracker/off", e.repo.ID), nil, nil)
	e.started()
}

// TestAMembersInstallationOnARepoTheyCantSeeIsRefusedAlike: a Member may
// not list a Repo they have no access to, and the refusal reads as for a
// Repo that doesn't exist; only the Owner makes a global Installation.
func TestAMembersInstallationOnARepoTheyCantSeeIsRefusedAlike(t *testing.T) {
	e := newGatewayEnv(t)
	var hidden api.Repo
	e.gh.InstallApp("acme/hidden")
	e.gh.SetCollaborator("acme/hidden", e.owner.login, true)
	e.api(e.owner, "POST", "/api/repos", map[string]string{"url": e.gh.RepoURL("acme/hidden")}, &hidden)
	try := func(in api.InstallationRequest) (int, string) {
		b, _ := json.Marshal(in)
		return e.do(e.bob.Client, req{method: "POST", path: "/api/mcp/installations", body: string(b), origin: "self"})
	}
	c1, b1 := try(api.InstallationRequest{ID: "x", Server: "hub:docs", Name: "X", Repos: []string{hidden.ID}})
	c2, b2 := try(api.InstallationRequest{ID: "x", Server: "hub:docs", Name: "X", Repos: []string{"no-such-repo"}})
	if c1 != http.StatusNotFound || c1 != c2 || strings.ReplaceAll(b1, hidden.ID, "R") != strings.ReplaceAll(b2, "no-such-repo", "R") {
		t.Fatalf("refusals differ: %d %s / %d %s", c1, b1, c2, b2)
	}
	if code, body := try(api.InstallationRequest{ID: "g", Server: "hub:docs", Name: "G", Global: true}); code != http.StatusForbidden {
		t.Fatalf("a Member's global Installation: %d %s, want 403", code, body)
	}
	// The Owner's Installation on both shows bob acme/app and a count.
	e.api(e.owner, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:wiki", Name: "Wiki", URL: "https://wiki.example/mcp", Auth: "none"}, nil)
	e.api(e.owner, "POST", "/api/mcp/installations", api.InstallationRequest{ID: "wiki", Server: "hub:wiki", Name: "Wiki", Repos: []string{e.repo.ID, hidden.ID}}, nil)
	var list []api.Installation
	e.api(e.bob, "GET", "/api/mcp/installations", nil, &list)
	for _, in := range list {
		if in.ID == "wiki" && (len(in.Repos) != 1 || in.HiddenRepos != 1) {
			t.Fatalf("bob sees %+v, want acme/app and one other Repo counted", in)
		}
	}
}

// TestTheMCPCommandsKeepValuesWriteOnly: kndl mcp adds a server, installs
// it on a Repo and sets its value from stdin; kndl mcp ls shows who set it
// and never the value; an edit to another origin says whose values it
// clears and saves only with --yes; the Repo's log names the secret, never
// its value.
func TestTheMCPCommandsKeepValuesWriteOnly(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", owner.login, true)
	e.cliLogin(owner)
	repo := e.gh.RepoURL("acme/app")
	run := func(stdin string, want int, args ...string) string {
		t.Helper()
		out, errOut, code := e.kndlIn(stdin, args...)
		if code != want {
			t.Fatalf("kndl %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}
	run("", 0, "mcp", "server", "add", "hub:docs", "--name", "Docs", "--url", "https://docs.example/mcp", "--header", "api-key:Authorization:Bearer {value}")
	if out := run("", 0, "mcp", "install", "docs", "--server", "hub:docs", "--name", "Docs", "--repo", repo); !strings.Contains(out, "kndl mcp secret set docs api-key") {
		t.Fatalf("install says %q, want the way to set its value", out)
	}
	run(mcpKey+"\n", 0, "mcp", "secret", "set", "docs", "api-key")
	ls := run("", 0, "mcp", "ls", "--repo", repo, "--json")
	var list []api.Installation
	if err := json.Unmarshal([]byte(ls), &list); err != nil || len(list) != 1 || list[0].Secrets[0].SetBy == "" || !list[0].On.On || strings.Contains(ls, mcpKey) {
		t.Fatalf("kndl mcp ls --json: %s, want docs on, set by someone, no value", ls)
	}
	edit := []string{"mcp", "server", "edit", "hub:docs", "--name", "Docs", "--url", "https://elsewhere.example/mcp", "--header", "api-key:Authorization:Bearer {value}"}
	if out := run("", 1, edit...); !strings.Contains(out, "clears Installation docs's values of api-key") || !strings.Contains(out, "--yes") {
		t.Fatalf("an edit to another origin says %q, want whose values it clears and --yes", out)
	}
	if ls := run("", 0, "mcp", "ls", "--json"); strings.Contains(ls, "needs_value\": true") {
		t.Fatalf("an edit not saved cleared a value: %s", ls)
	}
	run("", 0, append(edit, "--yes")...)
	if ls := run("", 0, "mcp", "ls", "--json"); !strings.Contains(ls, `"needs_value": true`) {
		t.Fatalf("after the edit: %s, want docs to need a value", ls)
	}
	log := run("", 0, "mcp", "log", "--repo", repo)
	if !strings.Contains(log, "set the value of header secret api-key") || !strings.Contains(log, "cleared the values of api-key") || strings.Contains(log, mcpKey) {
		t.Fatalf("kndl mcp log: %s", log)
	}
}

// TestAnOAuthInstallationIsConnectedInTheBrowserOfWhoBeganIt: bob begins
// connecting an OAuth Installation; the Hub registers itself with the
// authorization server (DCR) and hands bob a URL with PKCE; the Owner's
// browser can't finish bob's flow; bob's can, once; his Sessions then
// reach the server with the Hub's token, which never reaches the Runner.
func TestAnOAuthInstallationIsConnectedInTheBrowserOfWhoBeganIt(t *testing.T) {
	e := newGatewayEnv(t)
	e.linear(t)
	begun := e.beginConnect()
	// The authorization server sends the browser back to the Hub.
	resp, err := e.owner.Get(begun)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the Owner's browser finishing bob's flow: %d, want refused", resp.StatusCode)
	}
	resp, err = e.bob.Get(e.beginConnect())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "linear is connected") {
		t.Fatalf("bob's browser back at the Hub: %d %s", resp.StatusCode, page)
	}
	var list []api.Installation
	e.api(e.bob, "GET", "/api/mcp/installations", nil, &list)
	raw, _ := json.Marshal(list)
	for _, in := range list {
		if in.ID == "linear" && (in.OAuth == nil || !in.OAuth.Connected || in.OAuth.ConnectedBy == "") {
			t.Fatalf("the Installation shows %s, want it connected by bob", raw)
		}
	}
	if strings.Contains(string(raw), "at-") || strings.Contains(string(raw), "dcr-secret-") {
		t.Fatalf("a token or the client secret reached the API: %s", raw)
	}
	_, start, rawStart := e.started()
	if strings.Contains(rawStart, "at-") || strings.Contains(rawStart, "rt-") {
		t.Fatal("a token reached the Runner")
	}
	if got := e.echoThrough("linear", start.ModToken, "oauth"); got != "echo: oauth" {
		t.Fatalf("echo through an OAuth Installation: %q", got)
	}
}

// TestTheMCPPageShowsWhoSetAValueNeverTheValue: the MCP servers page lists
// the Installation, who set its value and whether it is on in the Repo
// picked, and holds neither the value nor an OAuth token; the Repo's page
// lists them on or off there.
func TestTheMCPPageShowsWhoSetAValueNeverTheValue(t *testing.T) {
	e := newGatewayEnv(t)
	e.linear(t)
	begun := e.beginConnect()
	if resp, err := e.bob.Get(begun); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("connect: %v %v", resp, err)
	}
	code, page := e.do(e.bob.Client, req{method: "GET", path: "/mcp?repo=" + e.repo.ID})
	if code != http.StatusOK {
		t.Fatalf("the page: %d %s", code, page)
	}
	for _, want := range []string{"docs", "api-key: set by", "connected by", "Turn off", `data-action="connect"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, mcpKey) || strings.Contains(page, "at-") || strings.Contains(page, "dcr-secret-") {
		t.Fatal("the page holds a value, a token or the client secret")
	}
	// The Repo's page lists them too, each on or off there.
	code, page = e.do(e.bob.Client, req{method: "GET", path: "/repos/" + e.repo.ID})
	if code != http.StatusOK || !strings.Contains(page, `Linear Work <span class="note">linear</span>`) || !strings.Contains(page, `state-active">on`) || strings.Contains(page, mcpKey) {
		t.Fatalf("the Repo's page: %d, want its Installations on, without a value", code)
	}
}

// TestInstallationActsAreAuditedWithoutTheirValues: adding a server,
// making an Installation, setting its value and turning it off and on in a
// Repo are in the audit log, in order, by who did them; no entry holds the
// value.
func TestInstallationActsAreAuditedWithoutTheirValues(t *testing.T) {
	e := newGatewayEnv(t)
	e.api(e.bob, "PUT", "/api/repos/"+e.repo.ID+"/mcp/docs/off", nil, nil)
	e.api(e.bob, "DELETE", "/api/repos/"+e.repo.ID+"/mcp/docs/off", nil, nil)
	want := []string{"mcp_server.added", "installation.made", "installation.value_set", "installation.turned_off", "installation.turned_on"}
	i := 0
	for _, g := range e.auditLog(e.owner) {
		raw, _ := json.Marshal(g)
		if strings.Contains(string(raw), mcpKey) {
			t.Fatalf("an audit entry holds the value: %s", raw)
		}
		if i < len(want) && g.Action == want[i] {
			if g.Actor != "bob" || (g.Action == "installation.value_set" && g.Detail != "header secret api-key") {
				t.Errorf("entry %s", raw)
			}
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("the audit log lacks %s (and what follows)", want[i])
	}
}

// TestChangingARepoInstallationTakesWritePermission: a read-only
// collaborator sees a Repo's Installations and their log, but can't make
// one there (pointing its Sessions at their own server), fill one in,
// give it Repos, enter its client, connect or disconnect it, turn one off
// or on there, or edit the server behind it: each reaches every Creator's
// Sessions in the Repo, as its Variables do. A collaborator who may push
// can.
func TestChangingARepoInstallationTakesWritePermission(t *testing.T) {
	e, reader, writer, base := readerAndWriter(t)
	g := &gatewayEnv{env: e}
	repo := strings.TrimPrefix(base, "/api/repos/")
	g.api(writer, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:docs", Name: "Docs", URL: "https://docs.example/mcp", Auth: "headers",
		Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}}, nil)
	g.api(writer, "POST", "/api/mcp/installations", api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{repo}}, nil)
	g.api(writer, "PUT", "/api/mcp/installations/docs/secrets/api-key", map[string]string{"value": mcpKey}, nil)
	g.api(writer, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:linear", Name: "Linear", URL: "https://linear.example/mcp", Auth: "oauth"}, nil)
	g.api(writer, "POST", "/api/mcp/installations", api.InstallationRequest{ID: "linear", Server: "hub:linear", Name: "Linear", Repos: []string{repo}}, nil)
	g.api(reader, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:mine", Name: "Mine", URL: "https://reader.example/mcp", Auth: "none"}, nil)

	mine, _ := json.Marshal(api.InstallationRequest{ID: "mine", Server: "hub:mine", Name: "Mine", Repos: []string{repo}})
	edit, _ := json.Marshal(api.MCPServer{ID: "hub:docs", Name: "Docs", URL: "https://reader.example/mcp", Auth: "headers",
		Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}})
	for _, r := range []req{
		{method: "POST", path: "/api/mcp/installations", body: string(mine)},
		{method: "PUT", path: "/api/mcp/installations/docs/repos", body: `{"repos":["` + repo + `"]}`},
		{method: "PUT", path: "/api/mcp/installations/docs/secrets/api-key", body: `{"value":"the-readers-own-key"}`},
		{method: "PUT", path: "/api/mcp/installations/linear/client", body: `{"client_id":"readers","client_secret":"readers-secret"}`},
		{method: "POST", path: "/api/mcp/installations/linear/connect"},
		{method: "DELETE", path: "/api/mcp/installations/linear/connect"},
		{method: "PUT", path: base + "/mcp/docs/off"},
		{method: "DELETE", path: base + "/mcp/docs/off"},
		{method: "PUT", path: "/api/mcp/servers/hub:docs", body: string(edit)},
	} {
		r.origin = "self"
		if code, body := e.do(reader.Client, r); code != http.StatusForbidden || !strings.Contains(body, "write (push) permission") {
			t.Errorf("reader %s %s: %d %s, want 403 naming write permission", r.method, r.path, code, body)
		}
	}
	var list []api.Installation
	g.api(reader, "GET", "/api/mcp/installations?repo="+repo, nil, &list)
	if len(list) != 2 || list[0].Secrets[0].NeedsOne || !list[0].On.On {
		t.Fatalf("the reader lists %+v, want docs on, its value as the writer set it", list)
	}
	g.api(reader, "GET", base+"/mcp/log", nil, nil)
	g.api(writer, "PUT", base+"/mcp/docs/off", nil, nil)
}

// TestAMemberCantEditTheServerOfTheOwnersGlobalInstallation: the server
// behind a global Installation reaches every Session on the Hub, so only
// the Owner edits it, though a Member added it; the refused edit changes
// nothing.
func TestAMemberCantEditTheServerOfTheOwnersGlobalInstallation(t *testing.T) {
	e := newGatewayEnv(t)
	e.api(e.bob, "POST", "/api/mcp/servers", api.MCPServer{ID: "hub:wiki", Name: "Wiki", URL: "https://wiki.example/mcp", Auth: "none"}, nil)
	e.api(e.owner, "POST", "/api/mcp/installations", api.InstallationRequest{ID: "wiki", Server: "hub:wiki", Name: "Wiki", Global: true}, nil)
	edit := func(b *browser, url string) (int, string) {
		body, _ := json.Marshal(api.MCPServer{ID: "hub:wiki", Name: "Wiki", URL: url, Auth: "none"})
		return e.do(b.Client, req{method: "PUT", path: "/api/mcp/servers/hub:wiki", body: string(body), origin: "self"})
	}
	if code, body := edit(e.bob, "https://bobs.example/mcp"); code != http.StatusForbidden || !strings.Contains(body, "wiki") {
		t.Fatalf("bob edits the server of the Owner's global Installation: %d %s, want 403 naming it", code, body)
	}
	var servers []api.MCPServer
	e.api(e.bob, "GET", "/api/mcp/servers", nil, &servers)
	for _, s := range servers {
		if s.ID == "hub:wiki" && s.URL != "https://wiki.example/mcp" {
			t.Fatalf("a refused edit moved the server to %s", s.URL)
		}
	}
	if code, body := edit(e.owner, "https://wiki.example/v2/mcp"); code != http.StatusOK {
		t.Fatalf("the Owner edits it: %d %s", code, body)
	}
}

// TestAPathEditClearsTheKeyAndARunningSessionKeepsItsURL: an edit that
// keeps the origin and changes only the path clears the key, so it can't
// follow the server to another path on a shared host; a Session running
// since before the edit still reaches the URL it started with, with the
// key it started with, and only a Session started after it reaches the
// new path.
func TestAPathEditClearsTheKeyAndARunningSessionKeepsItsURL(t *testing.T) {
	e := newGatewayEnv(t)
	_, start, _ := e.started()
	moved := e.up.URL + "/v2"
	e.api(e.bob, "PUT", "/api/mcp/servers/hub:docs", api.MCPServer{ID: "hub:docs", Name: "Docs", URL: moved, Auth: "headers",
		Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}}, nil)
	var list []api.Installation
	e.api(e.bob, "GET", "/api/mcp/installations", nil, &list)
	if len(list) != 1 || !list[0].Secrets[0].NeedsOne {
		t.Fatalf("after a path edit: %+v, want docs to need its key again", list)
	}
	if got := e.echoThrough("docs", start.ModToken, "still"); got != "echo: still" {
		t.Fatalf("the running Session after the edit: %q", got)
	}
	e.api(e.bob, "PUT", "/api/mcp/installations/docs/secrets/api-key", map[string]string{"value": mcpKey}, nil)
	_, next, _ := e.started()
	resp := e.send(nil, req{method: "POST", path: "/gateway/docs", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		bearer: next.ModToken, from: nextAddr()})
	resp.Body.Close()
	var paths []string
	for _, s := range e.up.Seen() {
		paths = append(paths, s.Path)
	}
	if n := len(paths); n < 2 || paths[n-1] != "/mcp/v2" || slices.Contains(paths[:n-1], "/mcp/v2") {
		t.Fatalf("the MCP server saw %v, want the running Session's calls at /mcp and only the next Session's at /mcp/v2", paths)
	}
}
