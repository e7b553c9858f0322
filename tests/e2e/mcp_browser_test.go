package e2e

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestTheMCPPageAddsInstallsAndSwitchesAnInstallation: from the MCP
// servers page a person adds a server with a header secret, installs it
// in a Repo, sets the Installation's value, turns it off for the Repo and
// on again, and moves the server to another URL; the Hub has each change.
func TestTheMCPPageAddsInstallsAndSwitchesAnInstallation(t *testing.T) {
	t.Parallel()
	s := Start(t)
	b := NewBrowser(t)
	s.SignInDev(b)
	up := testkit.NewMCPServer(t, "mcp-page-key-0c4f")
	var r api.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": s.Repo()}, &r)
	// Each change reloads the page: mark the page before it, and wait for
	// the new one to show sel.
	mark := func() { Eval[bool](b, `(window.stale = true)`) }
	reloaded := func(what, sel string) {
		t.Helper()
		b.Arrive(testenv.WaitShort, what, `!window.stale && document.querySelector(`+strconv.Quote(sel)+`)`)
	}
	click := func(sel string) {
		t.Helper()
		Eval[bool](b, `(window.confirm = () => true, document.querySelector(`+strconv.Quote(sel)+`).click(), true)`)
	}
	server := func() api.MCPServer {
		var ss []api.MCPServer
		s.Do(http.MethodGet, "/api/mcp/servers", nil, &ss)
		for _, m := range ss {
			if m.ID == "hub:docs" {
				return m
			}
		}
		return api.MCPServer{}
	}
	installation := func() api.Installation {
		var ins []api.Installation
		s.Do(http.MethodGet, "/api/mcp/installations?repo="+r.ID, nil, &ins)
		for _, in := range ins {
			if in.ID == "docs" {
				return in
			}
		}
		return api.Installation{}
	}
	page := s.URL + "/mcp?repo=" + r.ID
	b.Go(page, "#add-server")
	mark()
	b.do(chromedp.SendKeys(chromedp.CSS(`#add-server input[name=id]`), "hub:docs"),
		chromedp.SendKeys(chromedp.CSS(`#add-server input[name=name]`), "Docs"),
		chromedp.SendKeys(chromedp.CSS(`#add-server input[name=url]`), up.URL),
		chromedp.SendKeys(chromedp.CSS(`#add-server input[name=header]`), "api-key:Authorization:Bearer {value}"),
		chromedp.Click(chromedp.CSS(`#add-server button[type=submit]`)))
	reloaded("the page listing the server", `[data-action=move][data-id="hub:docs"]`)
	if m := server(); m.URL != up.URL || m.Auth != "headers" || len(m.Headers) != 1 || m.Headers[0].Key != "api-key" {
		t.Fatalf("the server added is %+v", m)
	}

	mark()
	Eval[bool](b, `(document.querySelector("#install select[name=repo]").value = `+strconv.Quote(r.ID)+`, true)`)
	b.do(chromedp.SendKeys(chromedp.CSS(`#install input[name=id]`), "docs"),
		chromedp.SendKeys(chromedp.CSS(`#install input[name=name]`), "Docs"),
		chromedp.Click(chromedp.CSS(`#install button[type=submit]`)))
	reloaded("the page listing the Installation", `form.secret[data-id="docs"]`)
	if in := installation(); len(in.Repos) != 1 || in.Repos[0] != r.ID || len(in.Secrets) != 1 || !in.Secrets[0].NeedsOne {
		t.Fatalf("the Installation made is %+v, want it in the Repo, needing its value", in)
	}

	mark()
	b.do(chromedp.SendKeys(chromedp.CSS(`form.secret[data-id="docs"] input[name=value]`), "mcp-page-key-0c4f"),
		chromedp.Click(chromedp.CSS(`form.secret[data-id="docs"] button[type=submit]`)))
	reloaded("the page with the Installation on", `[data-action=off][data-id="docs"]`)
	if in := installation(); len(in.Secrets) != 1 || in.Secrets[0].NeedsOne {
		t.Fatalf("the Installation after its value was set: %+v", in)
	}

	mark()
	click(`[data-action=off][data-id="docs"]`)
	reloaded("the page with the Installation off", `[data-action=on][data-id="docs"]`)
	if in := installation(); in.On == nil || in.On.On {
		t.Fatalf("the Installation after Turn off: %+v", in.On)
	}
	mark()
	click(`[data-action=on][data-id="docs"]`)
	reloaded("the page with the Installation on again", `[data-action=off][data-id="docs"]`)
	if in := installation(); in.On == nil || !in.On.On {
		t.Fatalf("the Installation after Turn on: %+v", in.On)
	}

	moved := up.URL + "/v2"
	Eval[bool](b, `(window.prompt = () => `+strconv.Quote(moved)+`, true)`)
	click(`[data-action=move][data-id="hub:docs"]`)
	testenv.Eventually(t, testenv.WaitShort, "the server moved", func() bool { return server().URL == moved })
}
