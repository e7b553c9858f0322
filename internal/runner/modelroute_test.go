package runner

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/relay"
	"kndl.dev/kndl/internal/testkit"
)

// TestClaudeCodesModelCallsGoThroughTheRelayInBothTokenModes: with
// HUB_CLAUDE_TOKEN=relay and with sandbox alike, Claude Code's base URL is
// the relay's model route for its Session token, and the relay holds the
// Creator's token for the run: Claude Code's Messages call with what it
// holds reaches the model with the Creator's token, while a Files API
// upload and a Messages call with a foreign key, which the Sandbox would
// otherwise send straight to api.anthropic.com, are refused and reach
// nothing. Claude Code holds a placeholder in relay mode, the token itself
// in sandbox mode.
func TestClaudeCodesModelCallsGoThroughTheRelayInBothTokenModes(t *testing.T) {
	const creatorToken = "sk-ant-oat01-runner-test-creator-token-0123456789abcdefABCDEF"
	const foreignKey = "sk-ant-api03-foreign-0123456789abcdefABCDEF"
	for _, inSandbox := range []bool{false, true} {
		model := testkit.NewAnthropic(t, creatorToken)
		model.On(testkit.PromptContains("hello"), testkit.Text("hi"))
		rl, err := relay.New(relay.Options{HubURL: "http://127.0.0.1:9", ModelURL: model.URL, Logger: slog.New(slog.DiscardHandler),
			Hook: func(context.Context, string, []byte) ([]byte, error) { return nil, nil }})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(rl)
		t.Cleanup(srv.Close)
		token := rl.Issue("s1", netip.Addr{})
		var launch claude.Launch
		creds := protocol.SessionCredentials{ClaudeToken: creatorToken, ClaudeTokenInSandbox: inSandbox}
		if err := modelRoute(rl, &launch, "s1", token, srv.URL, creds); err != nil {
			t.Fatal(err)
		}
		if want := srv.URL + "/model/" + token; launch.ModelEndpoint != want {
			t.Fatalf("in sandbox %v: Claude Code's base URL is %q, want the relay's model route %q", inSandbox, launch.ModelEndpoint, want)
		}
		if (launch.OAuthToken == creatorToken) != inSandbox || !strings.HasPrefix(launch.OAuthToken, "sk-ant-oat01-") {
			t.Fatalf("in sandbox %v: Claude Code holds %q, want the token itself in sandbox mode alone, a placeholder otherwise", inSandbox, launch.OAuthToken)
		}
		post := func(path string, header http.Header, body string) int {
			req, _ := http.NewRequest("POST", launch.ModelEndpoint+path, strings.NewReader(body))
			for k, vs := range header {
				req.Header[k] = vs
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		const messages = `{"model":"claude-sonnet-5-5","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`
		tests := []struct {
			name, path string
			header     http.Header
			want       int
		}{
			{"a Files API upload with a foreign key", "/v1/files", http.Header{"X-Api-Key": {foreignKey}}, http.StatusNotFound},
			{"a Messages call with a foreign key", "/v1/messages?beta=true", http.Header{"X-Api-Key": {foreignKey}}, http.StatusForbidden},
			{"Claude Code's Messages call", "/v1/messages?beta=true", http.Header{"Authorization": {"Bearer " + launch.OAuthToken}}, http.StatusOK},
		}
		for _, tt := range tests {
			if got := post(tt.path, tt.header, messages); got != tt.want {
				t.Errorf("in sandbox %v, %s: got %d, want %d", inSandbox, tt.name, got, tt.want)
			}
		}
		if reqs := model.Requests(); len(reqs) != 1 || reqs[0].Path != "/v1/messages" || reqs[0].Header.Get("Authorization") != "Bearer "+creatorToken {
			t.Errorf("in sandbox %v: the model got %d requests, want Claude Code's call alone, with the Creator's token", inSandbox, len(reqs))
		}
	}
}
