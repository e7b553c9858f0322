package forward

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"testing"
	"time"
)

func TestForwardTarget(t *testing.T) {
	p := New(Options{URL: "https://*.ports.example.com"})
	const id = "0c9f074e-a843-418d-ac33-25c5f87e7797"
	tests := []struct {
		host string
		port int
	}{
		{"p8000-" + id + ".ports.example.com", 8000},
		{"P8000-" + strings.ToUpper(id) + ".PORTS.example.com", 8000}, // host names are case-blind
		{"p8000-" + id + ".ports.example.com:443", 0},
		{"p08000-" + id + ".ports.example.com", 0},
		{"p70000-" + id + ".ports.example.com", 0},
		{"p8000-" + id + ".evil.ports.example.com", 0},
		{"x.p8000-" + id + ".ports.example.com", 0},
		{"p8000-" + id + "x.ports.example.com", 0},
		{"ports.example.com", 0},
		{"kndl.example.com", 0},
	}
	for _, tt := range tests {
		session, port, ok := p.target(tt.host)
		if ok != (tt.port != 0) || port != tt.port || (ok && session != id) {
			t.Errorf("%s: got %s %d %v, want port %d", tt.host, session, port, ok, tt.port)
		}
	}
}

// TestForwardedAppsCantPlantCookies: a forward origin is same-site with
// the Hub, so what a forwarded app sets must stay on its own origin: a
// Set-Cookie with a Domain, or named like one of the Hub's cookies, is
// dropped from its answer, and the Hub's own never reach the app. The
// forward's grant cookie is __Host- over https.
func TestForwardedAppsCantPlantCookies(t *testing.T) {
	p := New(Options{URL: "https://*.ports.example.com", PublicURL: "https://kndl.example.com", Log: slog.New(slog.DiscardHandler)})
	const id = "0c9f074e-a843-418d-ac33-25c5f87e7797"
	host := forwardLabel(id, 8000) + ".ports.example.com"

	code := newSecret()
	p.grants.put(p.grants.codes, code, grant{session: id, port: 8000, expires: time.Now().Add(codeTTL)})
	rec := httptest.NewRecorder()
	p.Hosts(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "https://"+host+"/.kndl/forward?code="+code+"&next=/app", nil))
	c, err := http.ParseSetCookie(rec.Header().Get("Set-Cookie"))
	if err != nil || c.Name != "__Host-kndl_fwd" || !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly {
		t.Errorf("the forward's grant cookie: %+v %v, want __Host-kndl_fwd, Secure, host-only on /", c, err)
	}

	resp := &http.Response{Header: http.Header{"Set-Cookie": {
		"app=1; Path=/",
		"__Host-app=2; Path=/; Secure",
		"wide=3; Domain=example.com; Path=/",
		"dotted=4; domain=.ports.example.com",
		"kndl=kndlk_attacker; Path=/",
		"__Host-kndl=kndlk_attacker; Path=/; Secure",
		"__Secure-kndl_oauth=x; Secure",
		"KNDL_CLAIM=x",
		"__host-kndl_fwd=x; Path=/; Secure",
		"bad value=x",
	}}}
	if err := p.newProxy().ModifyResponse(resp); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(resp.Header.Values("Set-Cookie"), " | "), "app=1; Path=/ | __Host-app=2; Path=/; Secure"; got != want {
		t.Errorf("the app's Set-Cookie passed on: %q, want only its own host-only ones: %q", got, want)
	}

	in := httptest.NewRequest("GET", "https://"+host+"/", nil)
	in.Header.Set("Cookie", "app=1; __Host-kndl_fwd=grant; kndl=x; __Host-kndl=y")
	out := in.Clone(in.Context())
	p.newProxy().Rewrite(&httputil.ProxyRequest{In: in, Out: out})
	if got := out.Header.Get("Cookie"); got != "app=1" {
		t.Errorf("the app was sent the cookies %q, want only its own", got)
	}
}
