// Package web is the Hub's web UI: server-rendered html/template pages and
// the small ES modules and styles they load, embedded in the binary (no
// build step). Every page carries a Content-Security-Policy without inline
// script, so markup holds no code. Only internal/hub imports it.
package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Page is one page: its title, the ES module it loads (a file in static/,
// or ""), and the template that renders its body. An app page is one a
// signed-in person uses: it has the navigation and the whole width.
type Page struct {
	name   string
	title  string
	script string
	app    bool
}

// The pages.
var (
	SignIn  = Page{"signin", "Sign in", "", false}
	Refused = Page{"refused", "Invite-only", "", false}
	Setup   = Page{"claim", "Set up this Hub", "claim.js", false}
	Invited = Page{"claim", "You're invited", "claim.js", false}
	Message = Page{"message", "kndl", "", false}
	CLI     = Page{"cli", "Sign in the kndl CLI", "", false}
	Home    = Page{"home", "Sessions", "home.js", true}
	Session = Page{"session", "Session", "session.js", true}
	Runners = Page{"runners", "Runners", "runners.js", true}
	Account = Page{"account", "Account", "account.js", true}
	Members = Page{"members", "Members", "members.js", true}
	Audit   = Page{"audit", "Audit log", "", true}
	MCP     = Page{"mcp", "MCP servers", "mcp.js", true}
	Repo    = Page{"repo", "Repo", "repo.js", true}
	Usage   = Page{"usage", "Usage", "", true}
	// Attempts is an attempt set, its attempts ranked side by side.
	Attempts = Page{"attempts", "Attempts", "attempts.js", true}
)

// Nav is who is signed in, for an app page's navigation.
type Nav struct {
	// ID is the person's user id, for the scripts to tell their own
	// Sessions (waiting.js).
	ID    string
	Name  string
	Owner bool
	// Audit shows the audit log's link: the Owner's alone.
	Audit bool
}

// WithTitle returns the page under another title.
func (p Page) WithTitle(title string) Page { p.title = title; return p }

// pages are parsed at the first page a Hub renders, not at every start of
// the binary: kndl's helpers in a Sandbox run the same binary, and the
// parsed templates are a quarter of the heap it would hold idle.
var pages = sync.OnceValue(func() map[string]*template.Template {
	layout := template.Must(template.ParseFS(templateFS, "templates/layout.html"))
	names, _ := fs.Glob(templateFS, "templates/*.html")
	out := map[string]*template.Template{}
	for _, n := range names {
		name := path.Base(n)
		name = name[:len(name)-len(".html")]
		if name == "layout" {
			continue
		}
		out[name] = template.Must(template.Must(layout.Clone()).ParseFS(templateFS, n))
	}
	return out
})

// SetHeaders sets the headers every page and static file carries: a policy
// that runs only the Hub's own script files (none inline, no eval), never in
// a frame, and sends no Referer to another origin. (With no-referrer, a
// browser sends Origin: null on the Hub's own form posts, sign-out and CLI
// approval among them, and the Hub refuses them as cross-origin.)
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "+
		"base-uri 'none'; form-action 'self'; object-src 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
}

// Render writes a page with status. data is what its body template reads;
// nav, for an app page, who is signed in.
func Render(w http.ResponseWriter, status int, p Page, nav *Nav, data any) error {
	t := pages()[p.name]
	if t == nil {
		return fmt.Errorf("no page %q", p.name)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", struct {
		Title, Script, Name string
		App                 bool
		Nav                 *Nav
		Data                any
	}{p.title, p.script, p.name, p.app, nav, data}); err != nil {
		return fmt.Errorf("render page %s: %w", p.name, err)
	}
	SetHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// Static serves the embedded static files; mount it at /static/.
func Static() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetHeaders(w.Header())
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no listings
			return
		}
		files.ServeHTTP(w, r)
	})
}
