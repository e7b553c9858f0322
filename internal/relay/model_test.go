package relay

import (
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/testkit"
)

// foreignKey is an API key of someone else's account, which code in a
// Sandbox brought along.
const foreignKey = "sk-ant-api03-foreign-0123456789abcdefABCDEF"

// TestTheModelRouteForwardsOnlyClaudeCodesCallsWithTheSessionsOwnCredential:
// in both HUB_CLAUDE_TOKEN modes (Claude Code holding a placeholder, or the
// Creator's token itself) the model route forwards POST /v1/messages and
// /v1/messages/count_tokens, with no query or ?beta=true, carrying the
// run's own credential alone. A Files API upload with a foreign key, a
// Messages call with one (in X-Api-Key or as a Bearer token, alone or
// beside the run's own), any other path, method or query is refused in
// Anthropic's error shape, and none of them reaches the model.
func TestTheModelRouteForwardsOnlyClaudeCodesCallsWithTheSessionsOwnCredential(t *testing.T) {
	for _, mode := range []struct {
		name string
		held func() string // what Claude Code holds
	}{
		{"relay", func() string { return Placeholder(creatorToken) }},
		{"sandbox", func() string { return creatorToken }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			model := testkit.NewAnthropic(t, creatorToken)
			model.On(testkit.PromptContains("hello"), testkit.Text("hi"))
			srv, r := newRelay(t, "http://127.0.0.1:9", model.URL)
			tok, own := r.Issue("s1", netip.Addr{}), mode.held()
			if err := r.Hold("s1", creatorToken, own); err != nil {
				t.Fatal(err)
			}
			upload := "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"workspace.tar\"\r\n\r\nthe Workspace\r\n--b--\r\n"
			tests := []struct {
				name, method, path string
				header             http.Header
				body               string
				want               int
				wantType           string // the Anthropic error's type; empty when it passes
			}{
				{"a Files API upload with a foreign key", "POST", "/v1/files", http.Header{"X-Api-Key": {foreignKey}, "Anthropic-Beta": {"files-api-2025-04-14"}}, upload, 404, "not_found_error"},
				{"a Files API upload with the run's own credential", "POST", "/v1/files?beta=true", http.Header{"Authorization": {"Bearer " + own}}, upload, 404, "not_found_error"},
				{"a Messages call with a foreign key", "POST", "/v1/messages?beta=true", http.Header{"X-Api-Key": {foreignKey}}, messagesBody, 403, "permission_error"},
				{"a Messages call with a foreign Bearer token", "POST", "/v1/messages?beta=true", http.Header{"Authorization": {"Bearer " + foreignKey}}, messagesBody, 403, "permission_error"},
				{"the run's own beside a foreign key", "POST", "/v1/messages?beta=true", http.Header{"Authorization": {"Bearer " + own}, "X-Api-Key": {foreignKey}}, messagesBody, 403, "permission_error"},
				{"the run's own beside a foreign Bearer token", "POST", "/v1/messages?beta=true", http.Header{"Authorization": {"Bearer " + own, "Bearer " + foreignKey}}, messagesBody, 403, "permission_error"},
				{"the run's own not as a Bearer token", "POST", "/v1/messages?beta=true", http.Header{"Authorization": {own}}, messagesBody, 403, "permission_error"},
				{"no credential", "POST", "/v1/messages?beta=true", http.Header{}, messagesBody, 401, "authentication_error"},
				{"a Messages batch", "POST", "/v1/messages/batches", http.Header{"Authorization": {"Bearer " + own}}, messagesBody, 404, "not_found_error"},
				{"the models list", "GET", "/v1/models", http.Header{"Authorization": {"Bearer " + own}}, "", 404, "not_found_error"},
				{"a GET of the Messages API", "GET", "/v1/messages?beta=true", http.Header{"Authorization": {"Bearer " + own}}, "", 404, "not_found_error"},
				{"a file deleted", "DELETE", "/v1/files/file_011", http.Header{"Authorization": {"Bearer " + own}}, "", 404, "not_found_error"},
				{"the OAuth profile", "GET", "/api/oauth/profile", http.Header{"Authorization": {"Bearer " + own}}, "", 404, "not_found_error"},
				{"a path climbing out of the Messages API", "POST", "/v1/messages/../files", http.Header{"Authorization": {"Bearer " + own}}, upload, 404, "not_found_error"},
				{"an escaped climb", "POST", "/v1/messages/%2e%2e/files", http.Header{"Authorization": {"Bearer " + own}}, upload, 404, "not_found_error"},
				{"a trailing slash", "POST", "/v1/messages/", http.Header{"Authorization": {"Bearer " + own}}, messagesBody, 404, "not_found_error"},
				{"another query", "POST", "/v1/messages?beta=true&x=1", http.Header{"Authorization": {"Bearer " + own}}, messagesBody, 404, "not_found_error"},
				{"Claude Code's Messages call", "POST", "/v1/messages?beta=true", http.Header{"Authorization": {"Bearer " + own}}, messagesBody, 200, ""},
				{"a Messages call with no query", "POST", "/v1/messages", http.Header{"Authorization": {"Bearer " + own}}, messagesBody, 200, ""},
				{"token counting", "POST", "/v1/messages/count_tokens?beta=true", http.Header{"Authorization": {"Bearer " + own}}, messagesBody, 200, ""},
				{"the run's own as an API key", "POST", "/v1/messages?beta=true", http.Header{"X-Api-Key": {own}}, messagesBody, 200, ""},
			}
			passed := 0
			for _, tt := range tests {
				req, _ := http.NewRequest(tt.method, srv.URL+"/model/"+tok+tt.path, strings.NewReader(tt.body))
				for k, vs := range tt.header {
					req.Header[k] = vs
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tt.want {
					t.Errorf("%s: got %d %.200s, want %d", tt.name, resp.StatusCode, b, tt.want)
					continue
				}
				if tt.wantType == "" {
					passed++
					continue
				}
				var e struct {
					Type  string `json:"type"`
					Error struct{ Type, Message string }
				}
				if json.Unmarshal(b, &e) != nil || e.Type != "error" || e.Error.Type != tt.wantType || !strings.HasPrefix(e.Error.Message, "kndl relay: ") {
					t.Errorf("%s: got %s, want Anthropic's error shape with type %s and the relay's message", tt.name, b, tt.wantType)
				}
			}
			reqs := model.Requests()
			if len(reqs) != passed {
				t.Errorf("the model got %d requests, want only the %d forwarded", len(reqs), passed)
			}
			for _, m := range reqs {
				if m.Method != "POST" || (m.Path != "/v1/messages" && m.Path != "/v1/messages/count_tokens") ||
					m.Header.Get("Authorization") != "Bearer "+creatorToken || len(m.Header.Values("X-Api-Key")) != 0 {
					t.Errorf("the model got %s %s?%s with %v, want only Claude Code's calls with the Creator's token alone", m.Method, m.Path, m.RawQuery, m.Header)
				}
			}
		})
	}
}
