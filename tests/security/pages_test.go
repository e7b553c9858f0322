package security

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var (
	scriptTag = regexp.MustCompile(`(?i)<script\b[^>]*>`)
	handler   = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
)

// TestPagesRunOnlyTheHubsOwnScriptFiles: every page and static file is sent
// with a Content-Security-Policy that runs script only from the Hub's own
// files, never inline or through eval, and never in a frame; and no page
// holds inline script or event handlers.
func TestPagesRunOnlyTheHubsOwnScriptFiles(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	stranger := e.browser("stranger")
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "olivia", true)
	s := e.session(e.userOf("olivia"), "acme/app")
	pages := []struct {
		name string
		c    *http.Client
		r    req
	}{
		{"sign-in", nil, req{method: "GET", path: "/signin"}},
		{"setup", nil, req{method: "GET", path: "/setup"}},
		{"invite", nil, req{method: "GET", path: "/invite"}},
		{"invite-only refusal", stranger.Client, req{method: "GET", path: "/signin/github"}},
		{"expired sign-in", nil, req{method: "GET", path: "/signin/github/callback?state=x&code=y"}},
		{"home", owner.Client, req{method: "GET", path: "/"}},
		{"session view", owner.Client, req{method: "GET", path: "/sessions/" + s.ID}},
		{"runners", owner.Client, req{method: "GET", path: "/runners"}},
		{"account", owner.Client, req{method: "GET", path: "/account"}},
		{"members", owner.Client, req{method: "GET", path: "/members"}},
		{"audit log", owner.Client, req{method: "GET", path: "/audit"}},
		{"MCP servers", owner.Client, req{method: "GET", path: "/mcp"}},
		{"CLI approval", owner.Client, req{method: "GET", path: "/cli/login"}},
		{"script", nil, req{method: "GET", path: "/static/claim.js"}},
		{"session script", nil, req{method: "GET", path: "/static/session.js"}},
		{"xterm.js", nil, req{method: "GET", path: "/static/vendor/xterm/xterm.mjs"}},
		{"style", nil, req{method: "GET", path: "/static/style.css"}},
	}
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			resp := e.send(p.c, p.r)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body := string(b)
			csp := resp.Header.Get("Content-Security-Policy")
			for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %s", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-") {
				t.Errorf("CSP %q allows unsafe script", csp)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "same-origin" {
				t.Errorf("headers %v: want nosniff and same-origin", resp.Header)
			}
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				return
			}
			for _, tag := range scriptTag.FindAllString(body, -1) {
				if !strings.Contains(tag, ` src="/static/`) {
					t.Errorf("inline or foreign script: %s", tag)
				}
			}
			if h := handler.FindString(body); h != "" || strings.Contains(body, "javascript:") {
				t.Errorf("markup holds code: %q", h)
			}
		})
	}
}
