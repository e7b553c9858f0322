package security

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/testenv"
)

// nonLoopbackIP returns an address of this machine beyond loopback.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	testenv.Lack(t, "an IPv4 address beyond loopback")
	return ""
}

// devLogin posts the sign-in page's dev login form as a browser on e.url
// would, to base, with extra headers; it returns status and body.
func devLogin(t *testing.T, e *env, base string, hdr http.Header) (int, string) {
	t.Helper()
	r, _ := http.NewRequest("POST", base+"/signin/dev", strings.NewReader("next=%2F"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", e.url)
	for k, v := range hdr {
		r.Header[k] = v
	}
	if h := hdr.Get("Host"); h != "" {
		r.Host = h
	}
	resp, err := noRedirect(nil).Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDevLoginAnswersOnlyLoopbackCallersOfALoopbackHub: dev login signs a
// browser in as the dev user, with access to every Repo, only when the Hub
// is bound to loopback and the caller is on loopback; otherwise the route
// answers exactly as one that doesn't exist.
func TestDevLoginAnswersOnlyLoopbackCallersOfALoopbackHub(t *testing.T) {
	dev := func(c *hub.Config) { c.DevLogin = true }
	e := newEnv(t, dev)
	_, notFound := e.do(nil, req{method: "POST", path: "/no/such/route"})

	code, _ := devLogin(t, e, e.url, nil)
	if code != http.StatusSeeOther {
		t.Fatalf("dev login on loopback: %d, want 303", code)
	}
	// Signed in this way, the dev user has access to every Repo, with no
	// GitHub App on it.
	jar, _ := cookiejar.New(nil)
	b := noRedirect(jar)
	if code, _ := e.do(b, req{method: "POST", path: "/signin/dev", origin: "self"}); code != http.StatusSeeOther {
		t.Fatalf("dev login: %d", code)
	}
	devUser, _ := e.store.Members.DevUser(context.Background())
	s := e.session(devUser, "nobody/anything")
	if code, _ := e.do(b, req{method: "GET", path: "/api/sessions/" + s.ID}); code != http.StatusOK {
		t.Fatalf("the dev user on a Session of any Repo: %d, want 200", code)
	}

	refused := func(what string, code int, body string) {
		t.Helper()
		if code != http.StatusNotFound || body != notFound {
			t.Errorf("%s: %d %q, want what a missing route answers: 404 %q", what, code, body, notFound)
		}
	}
	t.Run("through a proxy on loopback", func(t *testing.T) {
		c, body := devLogin(t, e, e.url, http.Header{"X-Forwarded-For": {"203.0.113.9"}})
		refused("X-Forwarded-For", c, body)
		c, body = devLogin(t, e, e.url, http.Header{"Forwarded": {"for=203.0.113.9"}})
		refused("Forwarded", c, body)
	})
	t.Run("under a name that is not loopback", func(t *testing.T) {
		c, body := devLogin(t, e, e.url, http.Header{"Host": {"kndl.example.com"}})
		refused("Host kndl.example.com", c, body)
	})
	t.Run("not turned on", func(t *testing.T) {
		off := newEnv(t)
		c, body := devLogin(t, off, off.url, nil)
		refused("without DevLogin", c, body)
	})
	t.Run("bound beyond loopback", func(t *testing.T) {
		wide := newEnv(t, dev, func(c *hub.Config) { c.Listen, c.Front.InsecureHTTP = "0.0.0.0:7380", true })
		c, body := devLogin(t, wide, wide.url, nil)
		refused("a Hub bound to 0.0.0.0", c, body)
		if _, page := wide.do(nil, req{method: "GET", path: "/signin"}); strings.Contains(page, "dev user") {
			t.Error("the sign-in page offers dev login on a Hub bound beyond loopback")
		}
	})
	t.Run("called from another address", func(t *testing.T) {
		ip := nonLoopbackIP(t)
		// The Hub says it is bound to loopback; the request comes from
		// this machine's other address, asking for a loopback name.
		far := newEnv(t, dev)
		srv := &http.Server{Handler: far.hub.Handler()}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		c, body := devLogin(t, far, "http://"+ln.Addr().String(), http.Header{"Host": {strings.TrimPrefix(far.url, "http://")}})
		refused("a caller at "+ip, c, body)
	})
}
