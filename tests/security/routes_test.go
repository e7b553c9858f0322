package security

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/auth"
)

// TestEveryRouteNeedsItsCredential enumerates every registered route and
// checks that a request without its credential, with a wrong one, or with a
// live credential of another kind (a sign-in cookie and the metrics token
// included) gets 401.
func TestEveryRouteNeedsItsCredential(t *testing.T) {
	e := newEnv(t)
	live := e.liveCredentials()
	metricsTok, err := e.store.Signins.CreateMetricsToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	live[auth.Metrics] = metricsTok

	param := regexp.MustCompile(`\{[^}]+\}`)
	checked := 0
	for _, rt := range e.hub.Routes() {
		if rt.Creds[0] == auth.Public {
			continue
		}
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = param.ReplaceAllString(strings.ReplaceAll(path, "{$}", ""), "x")
		t.Run(rt.Pattern, func(t *testing.T) {
			try := func(what string, r req) {
				t.Helper()
				r.method, r.path, r.body, r.origin, r.from = method, path, "{}", "self", nextAddr()
				if code, body := e.do(nil, r); code != http.StatusUnauthorized {
					t.Errorf("%s: status %d, want 401 (%.80s)", what, code, body)
				}
			}
			try("no credential", req{})
			try("a malformed bearer", req{bearer: "not-a-token"})
			for k, tok := range live {
				if slices.Contains(rt.Creds, k) {
					// The right kind, but not a live one.
					wrong, _ := auth.NewToken(k)
					if k == auth.Cookie {
						try("an unknown sign-in cookie", req{cookie: wrong})
						try("a live sign-in cookie as a bearer token", req{bearer: tok})
					} else {
						try("an unknown "+k.String()+" token", req{bearer: wrong})
					}
					continue
				}
				if k == auth.Cookie {
					try("a live sign-in cookie", req{cookie: tok})
				}
				try("a live "+k.String()+" token", req{bearer: tok})
			}
		})
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d routes take a credential: the route table is not what this test enumerates", checked)
	}
}

// TestOnlySignInHealthAndStaticFilesArePublic checks that the routes taking
// no credential are exactly sign-in, /health and the web UI's files.
func TestOnlySignInHealthAndStaticFilesArePublic(t *testing.T) {
	e := newEnv(t)
	want := []string{
		"GET /health", "GET /static/{file...}",
		"GET /signin", "GET /signin/github", "GET /signin/github/callback", "POST /signin/claim", "POST /signin/dev",
		"GET /setup", "GET /invite", "POST /api/cli/login", "POST /api/cli/login/poll",
	}
	var got []string
	for _, rt := range e.hub.Routes() {
		if slices.Contains(rt.Creds, auth.Public) {
			got = append(got, rt.Pattern)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("public routes:\n got %v\nwant %v", got, want)
	}
}
