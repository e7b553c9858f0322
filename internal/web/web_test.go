package web

import (
	"html"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestEveryPageRendersWithItsPolicy(t *testing.T) {
	for _, p := range []Page{SignIn, Refused, Setup, Invited, Message, CLI} {
		w := httptest.NewRecorder()
		if err := Render(w, 200, p, &Nav{Name: "n"}, nil); err != nil {
			t.Errorf("%s: %v", p.name, err)
			continue
		}
		if !strings.Contains(w.Body.String(), "<title>"+html.EscapeString(p.title)) || !strings.Contains(w.Header().Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("%s: title or policy missing", p.name)
		}
	}
}

func TestStaticServesFilesNotListings(t *testing.T) {
	tests := map[string]int{"/static/claim.js": 200, "/static/style.css": 200, "/static/vendor/xterm/xterm.mjs": 200, "/static/": 404, "/static/nope.js": 404}
	for path, want := range tests {
		w := httptest.NewRecorder()
		Static().ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != want {
			t.Errorf("GET %s: %d, want %d", path, w.Code, want)
		}
	}
}

func TestAppPagesRenderWithTheirNavigation(t *testing.T) {
	tests := []struct {
		p    Page
		data any
	}{
		{Home, map[string]any{"Repos": nil, "Blank": map[string]any{}, "BlankRow": map[string]any{}}},
		{Session, map[string]any{"ID": "s1", "IsCreator": true, "Forward": true, "State": "failed"}},
		{Runners, map[string]any{"HubURL": "http://x"}},
		{Account, map[string]any{"TokenSet": false}},
		{Members, map[string]any{"Owner": true}},
		{Audit, map[string]any{"Chain": map[string]any{"Entries": 1, "HeadSeq": 1}, "Entries": []map[string]any{{"Seq": "1", "Action": "invite.made"}}}},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		if err := Render(w, 200, tt.p, &Nav{Name: "<b>olivia</b>", Owner: true}, tt.data); err != nil {
			t.Errorf("%s: %v", tt.p.name, err)
			continue
		}
		body := w.Body.String()
		if !strings.Contains(body, "&lt;b&gt;olivia&lt;/b&gt;") || strings.Contains(body, "<b>olivia") {
			t.Errorf("%s: the name is not escaped: %s", tt.p.name, body)
		}
		if tt.p.script != "" && !strings.Contains(body, `src="/static/`+tt.p.script+`"`) {
			t.Errorf("%s: script %s missing", tt.p.name, tt.p.script)
		}
	}
}
