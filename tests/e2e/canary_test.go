package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestNoCredentialIsStoredLoggedOrShownInTheClear is the canary across
// every credential kind a Session can hold or be handed: the Creator's
// setup token, a Sensitive Variable, the Session token (in Claude Code's
// environment), an Installation's header secret (held by the Hub, sent on
// a tool call through the Gateway), and a Runner token, a CLI token and a
// sign-in cookie pasted into a prompt. Each is echoed every way a Session can: printed by
// a tool from the environment, pasted into a prompt, repeated in Claude's
// text. Then every file of the Hub's store, every line of the log and
// every Event are searched for each: none may hold one in the clear.
func TestNoCredentialIsStoredLoggedOrShownInTheClear(t *testing.T) {
	s := Start(t)
	const variable = "canary-variable-v4lue-e2e"
	repo := s.Repo()
	var r store.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": repo}, &r)
	s.Do(http.MethodPut, "/api/repos/"+r.ID+"/variables/CANARY", api.VariableRequest{Value: variable, Sensitive: true}, &store.Variable{})
	// An Installation's header secret, which only the Hub holds: the tool
	// call through the Gateway carries it to the MCP server.
	const mcpValue = "canary-mcp-v4lue-e2e-0042"
	up := testkit.NewMCPServer(t, mcpValue)
	s.Do(http.MethodPost, "/api/mcp/servers", api.MCPServer{ID: "hub:canary", Name: "Canary", URL: up.URL, Auth: "headers",
		Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}}, &api.MCPServer{})
	s.Do(http.MethodPost, "/api/mcp/installations", api.InstallationRequest{ID: "canary", Server: "hub:canary", Name: "Canary", Repos: []string{r.ID}}, &api.Installation{})
	s.Do(http.MethodPut, "/api/mcp/installations/canary/secrets/api-key", map[string]string{"value": mcpValue}, &api.Installation{})
	cookie, _ := auth.NewToken(auth.Cookie) // a cookie's shape, pasted as a person might
	pasted := map[string]string{"the Runner token": s.runnerCfg.Token, "a CLI token": s.cli, "a sign-in cookie": cookie}

	var prompt strings.Builder
	prompt.WriteString("canary check: ")
	for what, v := range pasted {
		prompt.WriteString(what + " is " + v + "; ")
	}
	s.Model.On(testkit.PromptContains("canary check"), testkit.Bash("env; printenv CANARY; tr '\\0' '\\n' < /proc/self/environ | grep -a KNDL_MOD_TOKEN; echo done-echoing"))
	reply := "Echoing: " + claudeToken + " " + variable + " " + mcpValue
	for _, v := range pasted {
		reply += " " + v
	}
	const tool = "mcp__plugin_kndl-gateway_canary__echo"
	s.Model.On(testkit.ToolResultContains("done-echoing"), testkit.ToolUse(tool, map[string]any{"text": "canary"}))
	s.Model.On(testkit.ToolResultContains("echo: canary"), testkit.Text(reply))
	v := s.NewSession(repo, prompt.String())
	if got := s.gatewayAnswer(v.ID, tool); !strings.Contains(got.Text, "echo: canary") {
		t.Fatalf("the Gateway's answer is %q, want the echo", got.Text)
	}
	s.WaitEvent(v.ID, testenv.WaitMedium, "Claude's echo", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && strings.HasPrefix(e.Text, "Echoing:")
	})
	// The Session token is in Claude Code's environment: read it there.
	env, err := claudeEnviron(t, s, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	var sessionToken string
	for _, kv := range strings.Split(string(env), "\x00") {
		if tok, ok := strings.CutPrefix(kv, "KNDL_MOD_TOKEN="); ok {
			sessionToken = tok
		}
	}
	if auth.KindOf(sessionToken) != auth.Session {
		t.Fatalf("no Session token in Claude Code's environment")
	}
	if strings.Contains(string(env), mcpValue) {
		t.Error("the Installation's header secret is in Claude Code's environment")
	}
	secrets := map[string]string{"the setup token": claudeToken, "the Sensitive Variable": variable, "the Session token": sessionToken,
		"the Installation's header secret": mcpValue}
	for what, v := range pasted {
		secrets[what] = v
	}

	evs := s.Events(v.ID)
	var shown strings.Builder
	for _, e := range evs {
		b, _ := jsonOf(e)
		shown.WriteString(b + "\n")
	}
	if !strings.Contains(shown.String(), "done-echoing") {
		t.Fatalf("the tool's output is not in the transcript:\n%s", dump(evs))
	}
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(s.Home), "hub.db*"))
	if len(files) == 0 {
		t.Fatal("no store files found")
	}
	for what, v := range secrets {
		if strings.Contains(shown.String(), v) {
			t.Errorf("%s is in the Session's Events", what)
		}
		if strings.Contains(s.log.String(), v) {
			t.Errorf("%s is in the log", what)
		}
		for _, f := range files {
			if b, _ := os.ReadFile(f); strings.Contains(string(b), v) {
				t.Errorf("%s is in the store's %s", what, filepath.Base(f))
			}
		}
	}
}
