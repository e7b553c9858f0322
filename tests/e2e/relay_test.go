package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestInRelayModeTheModelSeesTheCreatorsTokenAndClaudeCodeAPlaceholder:
// with HUB_CLAUDE_TOKEN=relay (the default), a Turn with Bash runs, every
// model request reaches the model with the Creator's token though Claude
// Code holds only a placeholder, and sends it to the relay's model route;
// the placeholder sent to the model directly is refused as an unknown
// token. Slept and woken, the Session goes on with a new placeholder.
func TestInRelayModeTheModelSeesTheCreatorsTokenAndClaudeCodeAPlaceholder(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Model.On(testkit.PromptContains("run through the relay"), testkit.Bash("echo via-the-relay"))
	s.Model.On(testkit.ToolResultContains("via-the-relay"), testkit.Text("Ran through the relay."))
	v := s.NewSession(s.Repo(), "run through the relay")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the answer after the tool", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Ran through the relay."
	})
	s.turnEnds(v.ID, 1)
	everyRequestHadTheCreatorsToken(t, s.Model.Requests())

	first := claudeAuth(t, s, v.ID)
	if resp := postMessages(t, s.Model.URL, first); resp != http.StatusUnauthorized {
		t.Fatalf("the placeholder sent to the model directly: %d, want 401", resp)
	}
	if last := s.Model.Requests()[len(s.Model.Requests())-1]; last.Status != http.StatusUnauthorized {
		t.Fatalf("the model answered the placeholder %d, want 401", last.Status)
	}
	seen := len(s.Model.Requests())

	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil); code != http.StatusNoContent {
		t.Fatalf("sleep: %d", code)
	}
	s.waitState(v.ID, api.Asleep)
	s.Model.On(testkit.PromptContains("again after the wake"), testkit.Bash("echo second-run-output"))
	s.Model.On(testkit.ToolResultContains("second-run-output"), testkit.Text("Ran again."))
	s.prompt(v.ID, "again after the wake")
	s.WaitEvent(v.ID, testenv.WaitMedium, "the woken Session's answer", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Ran again."
	})
	everyRequestHadTheCreatorsToken(t, s.Model.Requests()[seen:])
	if second := claudeAuth(t, s, v.ID); second.placeholder == first.placeholder {
		t.Fatal("the woken Claude Code holds the same placeholder: want a new one each run")
	}
}

func everyRequestHadTheCreatorsToken(t *testing.T, reqs []*testkit.Request) {
	t.Helper()
	if len(reqs) < 2 {
		t.Fatalf("the model saw %d requests, want the prompt's and the tool result's", len(reqs))
	}
	for _, r := range reqs {
		if r.Header.Get("Authorization") != "Bearer "+claudeToken || r.Status != http.StatusOK {
			t.Errorf("the model got %s %s answered %d without the Creator's token", r.Method, r.Path, r.Status)
		}
	}
}

// claudeCreds is what Claude Code holds to reach the model.
type claudeCreds struct{ placeholder, baseURL string }

// claudeAuth reads the placeholder and base URL from a Session's Claude
// Code's environment, and checks them: a placeholder of the token's shape,
// and the relay's model route for its Session token.
func claudeAuth(t *testing.T, s *System, sessionID string) claudeCreds {
	t.Helper()
	env, err := claudeEnviron(t, s, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	var a claudeCreds
	for _, kv := range strings.Split(string(env), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "CLAUDE_CODE_OAUTH_TOKEN":
			a.placeholder = v
		case "ANTHROPIC_BASE_URL":
			a.baseURL = v
		}
	}
	tok := string(sessionToken.Find(env))
	if !isPlaceholder(a.placeholder) {
		t.Fatalf("Claude Code holds %q, want a placeholder of the Creator's token's shape", a.placeholder)
	}
	if a.baseURL != s.RelayURL()+"/model/"+tok {
		t.Fatalf("ANTHROPIC_BASE_URL is %q, want the relay's model route for the Session token", a.baseURL)
	}
	return a
}

// postMessages sends a Messages request to base with bearer, as Claude
// Code would, and returns the status.
func postMessages(t *testing.T, base string, a claudeCreds) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages?beta=true",
		strings.NewReader(`{"model":"claude-sonnet-5-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+a.placeholder)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode == http.StatusUnauthorized && !strings.Contains(string(b), "authentication_error") {
		t.Fatalf("the model's refusal %s: want an authentication_error", b)
	}
	return resp.StatusCode
}

// isPlaceholder reports whether p has the shape of the Creator's token
// (its prefix, and at least its length) but is not it.
func isPlaceholder(p string) bool {
	return p != claudeToken && strings.HasPrefix(p, "sk-ant-oat01-") && len(p) >= len(claudeToken)
}
