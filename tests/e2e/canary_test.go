package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
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
// every Event are searched for each: none may hold one in the clear. It
// runs in both of HUB_CLAUDE_TOKEN's modes; in relay mode, where the
// Creator's token never reaches the Sandbox (and so no model can repeat
// it), Claude Code's environment, every process's in the Sandbox and every
// file there are searched for it too. It searches only its own System, so
// it runs beside other tests.
func TestNoCredentialIsStoredLoggedOrShownInTheClear(t *testing.T) {
	t.Parallel()
	t.Run("relay", func(t *testing.T) { canary(t, true) })
	t.Run("sandbox", func(t *testing.T) { canary(t, false) })
}

func canary(t *testing.T, relay bool) {
	var opts []Option
	if !relay {
		opts = append(opts, WithClaudeTokenInSandbox())
	}
	s := Start(t, opts...)
	const variable = "canary-variable-v4lue-e2e"
	repo := s.Repo()
	var r api.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": repo}, &r)
	s.Do(http.MethodPut, "/api/repos/"+r.ID+"/variables/CANARY", api.VariableRequest{Value: variable, Sensitive: true}, &api.Variable{})
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
	reply := "Echoing: " + variable + " " + mcpValue
	if !relay {
		reply += " " + claudeToken
	}
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
	if relay {
		noCreatorsTokenInTheSandbox(t, s, v.ID, env)
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

// noCreatorsTokenInTheSandbox checks, in relay mode, that the Creator's
// token is nowhere in a Session's Sandbox: not in Claude Code's
// environment (env), which holds a placeholder of its shape instead, nor
// any process's, nor any file. It searches for the token's secret part,
// after its public prefix, which no placeholder shares.
func noCreatorsTokenInTheSandbox(t *testing.T, s *System, sessionID string, env []byte) {
	t.Helper()
	secret := strings.TrimPrefix(claudeToken, "sk-ant-oat01-")
	var placeholder string
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "CLAUDE_CODE_OAUTH_TOKEN="); ok {
			placeholder = v
		}
	}
	if !isPlaceholder(placeholder) {
		t.Errorf("Claude Code's CLAUDE_CODE_OAUTH_TOKEN is %q, want a placeholder of the token's shape", placeholder)
	}
	if strings.Contains(string(env), secret) {
		t.Error("the Creator's token is in Claude Code's environment")
	}
	if environs, _ := s.Exec(sessionID, "bash", "-c", "cat /proc/[0-9]*/environ 2>/dev/null"); strings.Contains(environs, secret) {
		t.Error("a process in the Sandbox holds the Creator's token in its environment")
	} else if !strings.Contains(environs, placeholder) {
		t.Fatal("no process in the Sandbox holds the placeholder: the search of their environments found nothing to look at")
	}
	if files := sandboxFilesHolding(t, s, sessionID, secret); len(files) > 0 {
		t.Errorf("files in the Sandbox hold the Creator's token: %q", files)
	}
	// The same search finds what is there: Claude Code's config.
	if files := sandboxFilesHolding(t, s, sessionID, "hasCompletedOnboarding"); len(files) == 0 {
		t.Fatal("the search of the Sandbox's files found not even Claude Code's config")
	}
}

// sandboxFilesHolding lists the files in a Session's Sandbox that hold
// needle, but for /proc, /sys and /dev. grep reads needle on its standard
// input, so no command line and no file holds it.
func sandboxFilesHolding(t *testing.T, s *System, sessionID, needle string) []string {
	t.Helper()
	var out bytes.Buffer
	p, err := s.Backend.Exec(context.Background(), "s-"+sessionID, sandbox.Cmd{
		Args:  []string{"grep", "-rlaF", "-f", "-", "/", "--exclude-dir=proc", "--exclude-dir=sys", "--exclude-dir=dev"},
		Env:   []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Stdin: strings.NewReader(needle + "\n"), Stdout: &out, Stderr: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := time.AfterFunc(testenv.WaitMedium, func() { p.Kill() })
	code, err := p.Wait()
	if !done.Stop() || err != nil {
		t.Fatalf("the search of the Sandbox's files (exit %d, %v) did not end within %v", code, err, testenv.WaitMedium)
	}
	// grep exits 2 when some file could not be read (a socket, one gone
	// meanwhile), whether or not others matched: the list says.
	return strings.Fields(out.String())
}
