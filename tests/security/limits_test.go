package security

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/auth"
)

// limited sends r (from its address) up to 100 times and reports after how
// many attempts the Hub answered 429.
func (e *env) limited(c *http.Client, r req) int {
	e.t.Helper()
	for i := 1; i <= 100; i++ {
		if code, _ := e.do(c, r); code == http.StatusTooManyRequests {
			return i
		}
	}
	return 0
}

// TestFailedSignInsAndTokenGuessesAreRateLimitedPerAddress: wrong tokens,
// failed GitHub sign-ins, refusals and wrong device codes from one address
// are cut off after a burst, while other addresses go on. Only failures
// count and only failures are refused: a right CLI token, Runner token or
// sign-in cookie from the cut-off address still gets in, so junk from a
// shared address locks out nobody who holds a credential.
func TestFailedSignInsAndTokenGuessesAreRateLimitedPerAddress(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	cli, _ := e.store.Signins.CreateCLIToken(context.Background(), e.userOf("olivia").ID, "laptop")
	_, runner, _ := e.store.Runners.CreateRunner(context.Background(), "box", e.userOf("olivia").ID)

	guesser := nextAddr()
	wrong, _ := auth.NewToken(auth.CLI)
	n := e.limited(nil, req{method: "GET", path: "/api/sessions", bearer: wrong, from: guesser})
	if n == 0 || n > 30 {
		t.Fatalf("wrong CLI tokens: cut off after %d, want within 30", n)
	}
	for _, right := range []req{
		{method: "GET", path: "/api/sessions", bearer: cli},
		{method: "GET", path: "/api/sessions", cookie: e.cookieOf(owner)},
		{method: "GET", path: "/runner/connect", bearer: runner},
	} {
		right.from = guesser
		if code, body := e.do(nil, right); code == http.StatusTooManyRequests || code == http.StatusUnauthorized {
			t.Errorf("a right credential from the cut-off address (%s %s): %d %s, want it let in", right.method, right.path, code, body)
		}
	}
	if code, _ := e.do(nil, req{method: "GET", path: "/api/sessions", bearer: wrong, from: guesser}); code != http.StatusTooManyRequests {
		t.Fatalf("a wrong token after the right ones, from the cut-off address: %d, want 429", code)
	}
	if code, _ := e.do(nil, req{method: "GET", path: "/api/sessions", bearer: cli, from: nextAddr()}); code != http.StatusOK {
		t.Fatalf("a right token from another address: %d, want 200", code)
	}

	tests := []struct {
		name string
		r    func() req
		c    func() *http.Client
	}{
		{"wrong sign-in cookies", func() req {
			c, _ := auth.NewToken(auth.Cookie)
			return req{method: "GET", path: "/api/sessions", cookie: c}
		}, nil},
		{"sign-ins coming back with a wrong state", func() req {
			return req{method: "GET", path: "/signin/github/callback?state=x&code=y"}
		}, nil},
		{"wrong device codes", func() req {
			return req{method: "POST", path: "/api/cli/login/poll", body: `{"device_code":"guess"}`}
		}, nil},
		{"people refused at sign-in", func() req {
			return req{method: "GET", path: "/signin/github"}
		}, func() *http.Client { return e.browser("stranger").Client }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := nextAddr()
			var c *http.Client
			if tt.c != nil {
				c = tt.c()
			}
			r := tt.r()
			r.from = from
			if n := e.limited(c, r); n == 0 || n > 30 {
				t.Fatalf("cut off after %d, want within 30", n)
			}
		})
	}

	// A CLI login's right device code from an address cut off for wrong
	// ones is answered.
	t.Run("a right device code from a cut-off address", func(t *testing.T) {
		from := nextAddr()
		code, body := e.do(nil, req{method: "POST", path: "/api/cli/login", from: from,
			body: `{"token_sha256":"` + strings.Repeat("ab", 32) + `","machine":"laptop"}`})
		var start struct {
			DeviceCode string `json:"device_code"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &start) != nil {
			t.Fatalf("start a CLI login: %d %s", code, body)
		}
		if n := e.limited(nil, req{method: "POST", path: "/api/cli/login/poll", body: `{"device_code":"guess"}`, from: from}); n == 0 {
			t.Fatal("wrong device codes were never cut off")
		}
		if code, body := e.do(nil, req{method: "POST", path: "/api/cli/login/poll", body: `{"device_code":"` + start.DeviceCode + `"}`, from: from}); code != http.StatusOK {
			t.Fatalf("the right device code: %d %s, want 200", code, body)
		}
	})

	// A peer beyond loopback can't pick its own address with
	// X-Forwarded-For: only a proxy on the Hub's loopback is believed.
	t.Run("forwarded addresses from afar", func(t *testing.T) {
		ip := nonLoopbackIP(t)
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: e.hub.Handler()}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		for i := 1; i <= 100; i++ {
			r, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/api/sessions", nil)
			r.Header.Set("Authorization", "Bearer "+wrong)
			r.Header.Set("X-Forwarded-For", nextAddr())
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				if i > 30 {
					t.Fatalf("cut off only after %d", i)
				}
				if ra := resp.Header.Get("Retry-After"); ra == "" || strings.TrimSpace(ra) == "0" {
					t.Errorf("429 without a Retry-After")
				}
				return
			}
		}
		t.Fatal("a far peer rotating X-Forwarded-For was never cut off")
	})
}

// TestJunkGitHubCallbacksNeverBlockAValidSignInFromTheSameAddress: an
// outsider who shares an address with the team (a NAT, a proxy) and sends
// junk sign-in callbacks is cut off, but a Member's real trip to GitHub
// and back from that address still signs them in.
func TestJunkGitHubCallbacksNeverBlockAValidSignInFromTheSameAddress(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	e.member(owner, "bob")
	shared := nextAddr()
	junk := req{method: "GET", path: "/signin/github/callback?state=x&code=y", from: shared}
	for range 30 {
		e.do(nil, junk)
	}
	if code, _ := e.do(nil, junk); code != http.StatusTooManyRequests {
		t.Fatalf("a junk callback past the limit: %d, want 429", code)
	}
	again := &browser{Client: e.gh.NewBrowser("bob"), login: "bob"} // signed in at GitHub, not yet at the Hub
	if code, body := e.do(again.Client, req{method: "GET", path: "/signin/github", from: shared}); code != http.StatusOK || e.cookieOf(again) == "" {
		t.Fatalf("bob signs in from the address junk came from: %d %.300s, want signed in", code, body)
	}
	if code, _ := e.do(nil, junk); code != http.StatusTooManyRequests {
		t.Fatalf("a junk callback after bob's sign-in: %d, want 429", code)
	}
}

// TestAStoreThatCannotAnswerIsNotAWrongCredential: when the store fails a
// credential's lookup (a standby taking over a load, its PostgreSQL
// refusing connections), a right CLI token, Runner token or sign-in cookie
// is neither refused as wrong (401, which ends a Runner's pairing) nor
// counted against its address, which would cut off everyone there.
func TestAStoreThatCannotAnswerIsNotAWrongCredential(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	cli, _ := e.store.Signins.CreateCLIToken(context.Background(), e.userOf("olivia").ID, "laptop")
	_, runner, _ := e.store.Runners.CreateRunner(context.Background(), "box", e.userOf("olivia").ID)
	cookie := e.cookieOf(owner)
	e.store.Close()
	from := nextAddr()
	for i := range 30 {
		for _, r := range []req{
			{method: "GET", path: "/api/sessions", bearer: cli},
			{method: "GET", path: "/api/sessions", cookie: cookie},
			{method: "GET", path: "/runner/connect", bearer: runner},
		} {
			r.from = from
			if code, body := e.do(nil, r); code == http.StatusUnauthorized || code == http.StatusTooManyRequests {
				t.Fatalf("try %d, %s %s with a right credential and the store closed: got %d %s, want neither 401 nor 429", i+1, r.method, r.path, code, body)
			}
		}
	}
}
