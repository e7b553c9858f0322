package security

import (
	"context"
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
// are cut off after a burst, a right token from that address included,
// while other addresses go on.
func TestFailedSignInsAndTokenGuessesAreRateLimitedPerAddress(t *testing.T) {
	e := newEnv(t)
	e.owner()
	cli, _ := e.store.CreateCLIToken(context.Background(), e.userOf("olivia").ID, "laptop")

	guesser := nextAddr()
	wrong, _ := auth.NewToken(auth.CLI)
	n := e.limited(nil, req{method: "GET", path: "/api/sessions", bearer: wrong, from: guesser})
	if n == 0 || n > 30 {
		t.Fatalf("wrong CLI tokens: cut off after %d, want within 30", n)
	}
	if code, _ := e.do(nil, req{method: "GET", path: "/api/sessions", bearer: cli, from: guesser}); code != http.StatusTooManyRequests {
		t.Fatalf("a right token from the cut-off address: %d, want 429 (it must not be checked)", code)
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
