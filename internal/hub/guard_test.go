package hub

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestSignInConfigFromEnv(t *testing.T) {
	tests := []struct {
		env     map[string]string
		wantErr string
		check   func(Config) bool
	}{
		{map[string]string{}, "", func(c Config) bool {
			return c.GitHubURL == "https://github.com" && c.GitHubAPIURL == "https://api.github.com" && c.RepoAccessTTL == 5*time.Minute &&
				c.SigninMaxAge == 24*time.Hour && c.SigninIdle == 8*time.Hour
		}},
		{map[string]string{"GITHUB_URL": "https://ghe.example.com"}, "", func(c Config) bool { return c.GitHubAPIURL == "https://ghe.example.com/api/v3" }},
		{map[string]string{"HUB_REPO_ACCESS_TTL_MS": "60000", "HUB_SIGNIN_IDLE": "30m"}, "", func(c Config) bool {
			return c.RepoAccessTTL == time.Minute && c.SigninIdle == 30*time.Minute
		}},
		{map[string]string{"HUB_REPO_ACCESS_TTL_MS": "5m"}, "HUB_REPO_ACCESS_TTL_MS", nil},
		{map[string]string{"HUB_SIGNIN_MAX_AGE": "-1h"}, "HUB_SIGNIN_MAX_AGE", nil},
		{map[string]string{"GITHUB_APP_ID": "x"}, "GITHUB_APP_ID", nil},
		{map[string]string{}, "", func(c Config) bool { return !c.RedactAllShapes }},
		{map[string]string{"HUB_REDACT_SHAPES": "all"}, "", func(c Config) bool { return c.RedactAllShapes }},
		{map[string]string{"HUB_REDACT_SHAPES": "every"}, "HUB_REDACT_SHAPES", nil},
		{map[string]string{}, "", func(c Config) bool { return !c.ClaudeTokenInSandbox }},
		{map[string]string{"HUB_CLAUDE_TOKEN": "sandbox"}, "", func(c Config) bool { return c.ClaudeTokenInSandbox }},
		{map[string]string{"HUB_CLAUDE_TOKEN": "vm"}, "HUB_CLAUDE_TOKEN", nil},
		{map[string]string{"GITHUB_CLIENT_ID": "Iv1.x"}, "GITHUB_CLIENT_SECRET", nil},
		{map[string]string{"GITHUB_APP_ID": "12"}, "private key", nil},
		{map[string]string{"GITHUB_APP_ID": "12", "GITHUB_APP_PRIVATE_KEY_FILE": "/nonexistent/key.pem"}, "GITHUB_APP_PRIVATE_KEY_FILE", nil},
	}
	for _, tt := range tests {
		c := FromEnv(func(k string) string { return tt.env[k] }, t.TempDir())
		err := c.Check()
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%v: err %v, want one naming %s", tt.env, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tt.env, err)
		case tt.check != nil && err == nil && !tt.check(c):
			t.Errorf("%v: config %+v", tt.env, c)
		}
	}
}

// TestLocalPathKeepsSignInOnTheHub: where sign-in, dev sign-in and a
// forward origin send the browser next is a path on the same origin, or
// "/": every way a browser reads a Location as another host is refused.
func TestLocalPathKeepsSignInOnTheHub(t *testing.T) {
	tests := map[string]string{
		"/cli/login?code=ABCD-EFGH": "/cli/login?code=ABCD-EFGH",
		"/sessions/x?next=%2Fa&b=c": "/sessions/x?next=%2Fa&b=c",
		"/":                         "/",
		"":                          "/",
		"https://evil.example/":     "/",
		"//evil.example/":           "/",
		"///evil.example/":          "/",
		"/\\evil.example":           "/",
		"\\/evil.example":           "/",
		"/\t/evil.example":          "/",
		"/\n/evil.example":          "/",
		"/\r/evil.example":          "/",
		"/\x00/evil.example":        "/",
		"/\x7f/evil.example":        "/",
		"\t//evil.example":          "/",
		" //evil.example":           "/",
		"/ /evil.example":           "/",
		"/\u00a0/evil.example":      "/",
		"/\uff0fevil.example":       "/",
		"%2F%2Fevil.example":        "/",
		"/%2Fevil.example":          "/",
		"/%09/evil.example":         "/",
		"/%0a/evil.example":         "/",
		"/%5Cevil.example":          "/",
		"/%zz":                      "/",
		"javascript:alert(1)":       "/",
		"evil.example":              "/",
		"HTTPS://evil.example":      "/",
	}
	for in, want := range tests {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOriginOfDropsDefaultPorts(t *testing.T) {
	tests := map[string]string{
		"https://Kndl.Example.com:443/x": "https://kndl.example.com",
		"http://127.0.0.1:7380":          "http://127.0.0.1:7380",
		"http://example.com:80":          "http://example.com",
		"https://example.com:8443":       "https://example.com:8443",
	}
	for in, want := range tests {
		u, _ := url.Parse(in)
		if got := originOf(u); got != want {
			t.Errorf("originOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTheLimiterCountsIPv6By64AndForgetsTheOldestWhenFull: the addresses
// of one IPv6 /64 share a bucket (an IPv4-mapped one counts as its IPv4),
// and a full table makes room by forgetting the address spent longest ago,
// never by not counting the new one.
func TestTheLimiterCountsIPv6By64AndForgetsTheOldestWhenFull(t *testing.T) {
	l := newLimiter(2, time.Hour)
	l.take("2001:db8:1:2::1")
	l.take("2001:db8:1:2:ffff::9")
	if !l.blocked("2001:db8:1:2::77") {
		t.Error("another address of a spent /64 is not limited")
	}
	if l.blocked("2001:db8:1:3::1") {
		t.Error("the next /64 is limited")
	}
	l.take("::ffff:192.0.2.1")
	l.take("192.0.2.1")
	if !l.blocked("192.0.2.1") {
		t.Error("an IPv4-mapped address counts apart from its IPv4")
	}

	l = newLimiter(1, time.Hour)
	l.cap = 3
	for _, a := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		l.take(a)
	}
	l.take("192.0.2.1") // refused, and so the last one spent
	for i := range 2 {
		fresh := fmt.Sprintf("198.51.100.%d", i)
		if l.take(fresh); !l.blocked(fresh) {
			t.Fatalf("with the table full, %s was not counted", fresh)
		}
	}
	if got := len(l.m); got != 3 {
		t.Errorf("the table holds %d addresses, want its cap of 3", got)
	}
	if l.blocked("192.0.2.2") || l.blocked("192.0.2.3") {
		t.Error("the addresses spent longest ago are still remembered")
	}
	if !l.blocked("192.0.2.1") {
		t.Error("the address that failed last was forgotten")
	}
}
