package security

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/auth"
)

// TestMetricsTakeOnlyTheMetricsToken: /metrics answers 401, with no
// metrics, to a request without a credential, with a metrics token never
// made, replaced or revoked, or with a live credential of any other kind
// (sign-in cookie, CLI, Runner, mod or Session token); the live metrics
// token reads it, and the store keeps only its SHA-256.
func TestMetricsTakeOnlyTheMetricsToken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	live := e.liveCredentials()
	neverMade, _ := auth.NewToken(auth.Metrics)
	replaced, err := e.store.Signins.CreateMetricsToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	metricsTok, err := e.store.Signins.CreateMetricsToken(ctx)
	if err != nil {
		t.Fatal(err)
	}

	refused := func(what string, r req) {
		t.Helper()
		r.method, r.path, r.from = "GET", "/metrics", nextAddr()
		code, body := e.do(nil, r)
		if code != http.StatusUnauthorized || strings.Contains(body, "kndl_") {
			t.Errorf("%s: %d %.120s, want 401 and no metrics", what, code, body)
		}
	}
	refused("no credential", req{})
	refused("a malformed bearer", req{bearer: "not-a-token"})
	refused("a metrics token never made", req{bearer: neverMade})
	refused("a metrics token replaced by a newer one", req{bearer: replaced})
	refused("a live sign-in cookie", req{cookie: live[auth.Cookie]})
	for k, tok := range live {
		refused("a live "+k.String()+" token as a bearer", req{bearer: tok})
	}

	code, body := e.do(nil, req{method: "GET", path: "/metrics", bearer: metricsTok})
	if code != http.StatusOK || !strings.Contains(body, `kndl_sessions{state="active"} 1`) {
		t.Fatalf("the live metrics token: %d %.300s, want 200 and the metrics", code, body)
	}
	if e.stored(metricsTok) || !e.stored(string(auth.Hash(metricsTok))) {
		t.Error("the store holds the metrics token in the clear, or no SHA-256 of it")
	}

	if err := e.store.Signins.RevokeMetricsToken(ctx); err != nil {
		t.Fatal(err)
	}
	refused("a revoked metrics token", req{bearer: metricsTok})
}
