package security

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// recorder keeps every Set-Cookie a browser is sent.
type recorder struct {
	next http.RoundTripper
	set  []*http.Cookie
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		r.set = append(r.set, resp.Cookies()...)
	}
	return resp, err
}

func findCookie(cs []*http.Cookie, name string) *http.Cookie {
	for _, c := range cs {
		if c.Name == name && c.Value != "" {
			return c
		}
	}
	return nil
}

// checkSigninCookie checks a sign-in cookie's attributes and value.
func checkSigninCookie(t *testing.T, c *http.Cookie, secure bool) {
	t.Helper()
	if c == nil {
		t.Fatal("no sign-in cookie was set")
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Domain != "" || c.Path != "/" || c.Secure != secure {
		t.Errorf("cookie %s: HttpOnly %v SameSite %v Domain %q Path %q Secure %v; want HttpOnly, Lax, host-only, /, Secure %v",
			c.Name, c.HttpOnly, c.SameSite, c.Domain, c.Path, c.Secure, secure)
	}
	// 256 random bits: 43 characters of unpadded base64 after the prefix.
	if auth.KindOf(c.Value) != auth.Cookie || len(c.Value) != len("kndlk_")+43 {
		t.Errorf("cookie value %q: want kndlk_ and 256 bits", c.Value)
	}
}

// checkTripCookie checks a cookie carrying a sign-in to GitHub and back.
func checkTripCookie(t *testing.T, c *http.Cookie, name string, secure bool) {
	t.Helper()
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Domain != "" || c.Path != "/" || c.Secure != secure || c.MaxAge <= 0 || c.MaxAge > 600 {
		t.Errorf("trip cookie %s = %+v: want HttpOnly, Lax, host-only, on /, Secure %v, for at most 10 minutes", name, c, secure)
	}
}

// TestSignInCookieIsHttpOnlyLaxHostOnlyAndSecureBeyondLoopback checks the
// sign-in cookie, and the two carrying a sign-in to GitHub and back, on a
// loopback Hub over HTTP (not Secure) and on one whose HUB_PUBLIC_URL is
// https (Secure, and __Host- so browsers take them only host-only: nothing
// on a neighbouring host of the same site, such as a forwarded app, can
// plant one).
func TestSignInCookieIsHttpOnlyLaxHostOnlyAndSecureBeyondLoopback(t *testing.T) {
	t.Run("loopback over http", func(t *testing.T) {
		e := newEnv(t)
		link, _ := e.hub.SetupLink(context.Background())
		b := e.browser("olivia")
		rec := &recorder{next: http.DefaultTransport}
		b.Transport = rec
		e.claim(b, fragment(t, link))
		if code, _ := e.signIn(b); code != http.StatusOK {
			t.Fatalf("sign-in: %d", code)
		}
		checkSigninCookie(t, findCookie(rec.set, "kndl"), false)
		for _, name := range []string{"kndl_oauth", "kndl_claim"} {
			checkTripCookie(t, findCookie(rec.set, name), name, false)
		}
	})
	t.Run("https", func(t *testing.T) {
		const public = "https://kndl.example.com"
		e := newEnv(t, func(c *hub.Config) { c.PublicURL = public })
		link, _ := e.hub.SetupLink(context.Background())
		e.gh.AddUser("olivia")
		client := noRedirect(nil)
		send := func(method, u string, cookies []*http.Cookie, hdr http.Header, body string) *http.Response {
			t.Helper()
			r, _ := http.NewRequest(method, strings.Replace(u, public, e.url, 1), strings.NewReader(body))
			for k, v := range hdr {
				r.Header[k] = v
			}
			for _, c := range cookies {
				r.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
			}
			resp, err := client.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		claim := send("POST", e.url+"/signin/claim", nil, http.Header{"Origin": {public}, "Content-Type": {"application/json"}},
			`{"secret":"`+fragment(t, link)+`"}`)
		start := send("GET", e.url+"/signin/github", nil, nil, "")
		trip := append(claim.Cookies(), start.Cookies()...)
		for _, name := range []string{"kndl_oauth", "kndl_claim"} {
			checkTripCookie(t, findCookie(trip, "__Host-"+name), "__Host-"+name, true)
		}
		// GitHub, with its own cookie, sends the browser back to the
		// public URL, which this test serves at e.url.
		authz := send("GET", start.Header.Get("Location"), []*http.Cookie{{Name: "fake_github_login", Value: "olivia"}}, nil, "")
		back := authz.Header.Get("Location")
		if !strings.HasPrefix(back, public+"/signin/github/callback?") {
			t.Fatalf("GitHub sent the browser to %q", back)
		}
		done := send("GET", back, trip, nil, "")
		if done.StatusCode != http.StatusSeeOther {
			t.Fatalf("callback: %d", done.StatusCode)
		}
		checkSigninCookie(t, findCookie(done.Cookies(), "__Host-kndl"), true)
	})
}

// TestCrossOriginRequestsWithAValidCookieAreRefused: a signed-in browser's
// cookie changes nothing, and opens no WebSocket, unless the request comes
// from HUB_PUBLIC_URL's origin.
func TestCrossOriginRequestsWithAValidCookieAreRefused(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	bob := e.member(owner, "bob")
	cookie := e.cookieOf(owner)
	before := e.snapshot()
	for _, origin := range []string{"", "https://evil.example", "null", "http://127.0.0.1:1", strings.Replace(e.url, "http://", "https://", 1)} {
		r := req{method: "POST", path: "/api/invites", body: `{"github_login":"dave"}`, cookie: cookie, origin: origin}
		if code, body := e.do(nil, r); code != http.StatusForbidden {
			t.Errorf("POST with Origin %q: %d %s, want 403", origin, code, body)
		}
		del := req{method: "DELETE", path: "/api/members/" + e.userOf("bob").ID, cookie: cookie, origin: origin}
		if code, _ := e.do(nil, del); code != http.StatusForbidden {
			t.Errorf("DELETE with Origin %q: %d, want 403", origin, code)
		}
	}
	if after := e.snapshot(); after != before {
		t.Fatalf("cross-origin requests changed members or invites:\n%s\n->\n%s", before, after)
	}
	if code, body := e.do(nil, req{method: "POST", path: "/api/invites", body: `{"github_login":"dave"}`, cookie: cookie, origin: "self"}); code != http.StatusCreated {
		t.Fatalf("same-origin POST: %d %s", code, body)
	}

	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "bob", true)
	s := e.session(e.userOf("bob"), "acme/app")
	dial := func(origin string) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitShort)
		defer cancel()
		ws, resp, err := websocket.Dial(ctx, e.wsURL("/api/sessions/"+s.ID+"/watch"), &websocket.DialOptions{
			HTTPHeader: http.Header{"Cookie": {"kndl=" + e.cookieOf(bob)}, "Origin": {origin}}})
		if err == nil {
			ws.CloseNow()
		}
		return resp, err
	}
	if resp, err := dial("https://evil.example"); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a WebSocket from another origin: err %v", err)
	}
	if _, err := dial(e.url); err != nil {
		t.Fatalf("a WebSocket from the Hub's origin: %v", err)
	}
	// A CLI token is no ambient credential: no origin applies.
	cli, _ := e.store.Signins.CreateCLIToken(context.Background(), e.userOf("olivia").ID, "laptop")
	if code, body := e.do(nil, req{method: "POST", path: "/api/invites", body: `{"github_login":"erin"}`, bearer: cli, origin: "https://evil.example"}); code != http.StatusCreated {
		t.Fatalf("a CLI token with a foreign Origin: %d %s", code, body)
	}
}

// watch opens a Session's live WebSocket with hdr and returns a channel
// that is closed when the Hub closes it.
func (e *env) watch(id string, hdr http.Header) <-chan struct{} {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitShort)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.wsURL("/api/sessions/"+id+"/watch"), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		e.t.Fatalf("watch: %v", err)
	}
	e.t.Cleanup(func() { ws.CloseNow() })
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for {
			if _, _, err := ws.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	return closed
}

// closesWithin fails unless closed is closed within d.
func closesWithin(t *testing.T, closed <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(d):
		t.Fatalf("%s stayed open for %v", what, d)
	}
}

// TestSignOutEndsTheSessionAtOnce: signing out ends the sign-in on the Hub
// at once, and closes the WebSockets it opened.
func TestSignOutEndsTheSessionAtOnce(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "olivia", true)
	s := e.session(e.userOf("olivia"), "acme/app")
	cookie := e.cookieOf(owner)
	closed := e.watch(s.ID, http.Header{"Cookie": {"kndl=" + cookie}, "Origin": {e.url}})
	if code, _ := e.do(owner.Client, req{method: "POST", path: "/signout", origin: "self"}); code != http.StatusOK {
		t.Fatalf("sign out: %d", code)
	}
	closesWithin(t, closed, time.Second, "a WebSocket of a signed-out browser")
	if code, _ := e.do(nil, req{method: "GET", path: "/api/members", cookie: cookie}); code != http.StatusUnauthorized {
		t.Fatalf("the signed-out cookie: %d, want 401", code)
	}
}

// TestSignInsExpireAfterTheirIdleAndAbsoluteLifetimes: a sign-in unused for
// HUB_SIGNIN_IDLE ends, use keeps it alive, and none outlives
// HUB_SIGNIN_MAX_AGE however much it is used.
func TestSignInsExpireAfterTheirIdleAndAbsoluteLifetimes(t *testing.T) {
	use := func(e *env, cookie string) int {
		code, _ := e.do(nil, req{method: "GET", path: "/api/members", cookie: cookie})
		return code
	}
	t.Run("idle", func(t *testing.T) {
		const idle = 600 * time.Millisecond
		e := newEnv(t, func(c *hub.Config) { c.SigninIdle = idle })
		cookie := e.cookieOf(e.owner())
		// Used more often than the idle lifetime, for longer than it.
		tick := time.NewTicker(idle / 6)
		defer tick.Stop()
		for end := time.Now().Add(2 * idle); time.Now().Before(end); <-tick.C {
			if code := use(e, cookie); code != http.StatusOK {
				t.Fatalf("a sign-in in use: %d, want 200", code)
			}
		}
		unused := time.Now()
		testenv.Eventually(t, testenv.WaitShort, "the unused sign-in ends", func() bool {
			live, _ := e.store.Signins.SigninLive(context.Background(), auth.Hash(cookie), store.Lifetimes{Max: e.cfg.SigninMaxAge, Idle: e.cfg.SigninIdle})
			return !live
		})
		if since := time.Since(unused); since < idle*8/10 {
			t.Fatalf("the sign-in ended %v after its last use, before its idle lifetime %v", since, idle)
		}
		if code := use(e, cookie); code != http.StatusUnauthorized {
			t.Fatalf("an idle sign-in: %d, want 401", code)
		}
	})
	t.Run("absolute", func(t *testing.T) {
		const maxAge = time.Second
		e := newEnv(t, func(c *hub.Config) { c.SigninMaxAge = maxAge })
		start := time.Now()
		cookie := e.cookieOf(e.owner())
		testenv.Eventually(t, testenv.WaitShort, "the sign-in ends at its absolute lifetime", func() bool {
			return use(e, cookie) == http.StatusUnauthorized
		})
		if since := time.Since(start); since < maxAge {
			t.Fatalf("the sign-in ended after %v, before its lifetime %v", since, maxAge)
		}
	})
}
