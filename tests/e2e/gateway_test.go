package e2e

import (
	"bytes"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestAnInstallationsToolAnswersThroughTheGateway: the real Claude Code
// calls an Installation's tool (mcp__plugin_kndl-gateway_docs__echo), the
// Hub adds the Installation's key on the way to a real MCP server, and
// the tool's answer is in the transcript; the key is in neither Claude
// Code's environment nor any file of its Sandbox's config, and the
// transcript masks it where Claude repeats it. Once the
// Installation is turned off for the Repo, the same call is refused.
func TestAnInstallationsToolAnswersThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := Start(t)
	const key = "mcp-e2e-key-7d1f0c5a9b"
	up := testkit.NewMCPServer(t, key)
	repo := s.Repo()
	var r api.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": repo}, &r)
	s.Do(http.MethodPost, "/api/mcp/servers", api.MCPServer{ID: "hub:docs", Name: "Docs", URL: up.URL, Auth: "headers",
		Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}}, &api.MCPServer{})
	s.Do(http.MethodPost, "/api/mcp/installations", api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{r.ID}}, &api.Installation{})
	s.Do(http.MethodPut, "/api/mcp/installations/docs/secrets/api-key", map[string]string{"value": key}, &api.Installation{})

	const tool = "mcp__plugin_kndl-gateway_docs__echo"
	s.Model.On(testkit.PromptContains("ask the docs"), testkit.ToolUse(tool, map[string]any{"text": "from the sandbox"}))
	s.Model.On(testkit.ToolResultContains("echo: from the sandbox"), testkit.Text("The docs answered; their key is "+key+"."))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("The docs refused."))
	v := s.NewSession(repo, "ask the docs")
	if got := s.gatewayAnswer(v.ID, tool); !strings.Contains(got.Text, "echo: from the sandbox") {
		t.Fatalf("the tool's answer is %q, want the echo", got.Text)
	}
	s.turnEnds(v.ID, 1)
	// The key is in the Session's redaction set, in case a server echoes it.
	for _, e := range s.Events(v.ID) {
		if strings.Contains(e.Text, key) || strings.Contains(string(e.Input), key) {
			t.Errorf("an Event shows the Installation's key: %+v", e)
		}
		if e.Kind == protocol.EventText && strings.Contains(e.Text, "their key is") && !strings.Contains(e.Text, strings.Repeat("*", len(key))) {
			t.Errorf("Claude's text %q, want the key masked", e.Text)
		}
	}

	env, err := claudeEnviron(t, s, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(env, []byte(key)) {
		t.Error("the Installation's key is in Claude Code's environment")
	}
	if out, _ := s.Exec(v.ID, "sh", "-c", "grep -rl "+key+" /opt/kndl /root 2>/dev/null; true"); strings.TrimSpace(out) != "" {
		t.Errorf("the key is in the Sandbox's files: %s", out)
	}
	var view api.SessionView
	s.Do(http.MethodGet, "/api/sessions/"+v.ID, nil, &view)
	if len(view.MCPServers) != 1 || view.MCPServers[0].Installation != "docs" {
		t.Errorf("the Session view lists %+v, want docs", view.MCPServers)
	}

	// Off for the Repo: the running Session's next call is refused.
	s.Do(http.MethodPut, "/api/repos/"+r.ID+"/mcp/docs/off", nil, &api.Installation{})
	s.Model.On(testkit.PromptContains("ask again"), testkit.ToolUse(tool, map[string]any{"text": "once more"}))
	s.prompt(v.ID, "ask again")
	s.turnEnds(v.ID, 2)
	var results []string
	for _, e := range s.Events(v.ID) {
		if e.Kind == protocol.EventToolResult {
			results = append(results, e.Text)
		}
	}
	if len(results) != 2 || strings.Contains(results[1], "echo: once more") {
		t.Fatalf("tool results %q: the call after the Installation was turned off got through", results)
	}
	t.Logf("the refused call's result: %q", results[1])
}

// TestAnOAuthInstallationRefreshesUnnoticedAndADisconnectStopsIt: the dev
// user connects an OAuth Installation in their browser; the real Claude
// Code's tool call works, again after the server dropped the token (the
// Hub refreshes it and sends the call again), and fails at once after a
// disconnect.
func TestAnOAuthInstallationRefreshesUnnoticedAndADisconnectStopsIt(t *testing.T) {
	t.Parallel()
	s := Start(t)
	as := testkit.NewOAuthServer(t, testkit.OAuthOptions{DCR: true})
	repo := s.Repo()
	var r api.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": repo}, &r)
	s.Do(http.MethodPost, "/api/mcp/servers", api.MCPServer{ID: "hub:linear", Name: "Linear", URL: as.MCP.URL, Auth: "oauth"}, &api.MCPServer{})
	s.Do(http.MethodPost, "/api/mcp/installations", api.InstallationRequest{ID: "linear", Server: "hub:linear", Name: "Linear Work", Repos: []string{r.ID}}, &api.Installation{})
	var begun struct {
		URL string `json:"url"`
	}
	s.Do(http.MethodPost, "/api/mcp/installations/linear/connect", nil, &begun)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	form, _ := http.NewRequest(http.MethodPost, s.URL+"/signin/dev", strings.NewReader(""))
	form.Header.Set("Origin", s.URL)
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := browser.Do(form); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("dev sign-in: %v %v", resp, err)
	}
	resp, err := browser.Get(begun.URL)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the browser back at the Hub: %v %v", resp, err)
	}
	resp.Body.Close()

	const tool = "mcp__plugin_kndl-gateway_linear__echo"
	for _, text := range []string{"first", "second", "third"} {
		s.Model.On(testkit.PromptContains("call "+text), testkit.ToolUse(tool, map[string]any{"text": text}))
	}
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Done."))
	v := s.NewSession(repo, "call first")
	s.turnEnds(v.ID, 1)
	as.ExpireAccess()
	s.prompt(v.ID, "call second")
	s.turnEnds(v.ID, 2)
	s.Do(http.MethodDelete, "/api/mcp/installations/linear/connect", nil, &map[string]string{})
	s.prompt(v.ID, "call third")
	s.turnEnds(v.ID, 3)
	var results []string
	for _, e := range s.Events(v.ID) {
		if e.Kind == protocol.EventToolResult {
			results = append(results, e.Text)
		}
	}
	if len(results) != 3 || !strings.Contains(results[0], "echo: first") || !strings.Contains(results[1], "echo: second") || strings.Contains(results[2], "echo: third") {
		t.Fatalf("tool results %q: want the first two answered (the second after a refresh) and the third refused", results)
	}
	if as.Refreshes() != 1 {
		t.Fatalf("%d refreshes, want 1", as.Refreshes())
	}
	t.Logf("after the disconnect: %q", results[2])
}

// gatewayAnswer waits for Claude Code's call of tool, an Installation's
// tool, and then for its answer through the relay and the Gateway. The call
// comes once the Session is up (WaitBuild); its answer takes milliseconds,
// so it gets WaitMedium: an answer lost on the way fails the test here,
// saying so, instead of holding it until a WaitBuild wait ends.
func (s *System) gatewayAnswer(id, tool string) protocol.Event {
	s.t.Helper()
	call := s.WaitEvent(id, testenv.WaitBuild, "Claude Code's call of "+tool, func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolUse && e.Tool == tool
	})
	return s.WaitEvent(id, testenv.WaitMedium, "answer from the Gateway to "+tool+" (lost on the way?)", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolResult && e.ToolID == call.ToolID
	})
}
