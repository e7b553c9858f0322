package relay

import (
	"io"
	"net/http"
	"net/netip"
	"testing"
)

// TestAPoolRunHoldsNoCreatorsTokenAndIsHandedToOneSessionOnce: a warm pool
// Sandbox's token reaches nothing but the answer to its hooks, and its
// model calls wait, until it is handed to a Session; then it is that
// Session's alone, and no second Session can take it.
func TestAPoolRunHoldsNoCreatorsTokenAndIsHandedToOneSessionOnce(t *testing.T) {
	got := make(chan seen, 10)
	upstream := upstreamServer(t, got)
	srv, r, hooks := newRelayHooks(t, upstream.URL, upstream.URL)
	placeholder := Placeholder("")
	tok := r.Pool("p1", netip.Addr{}, placeholder)

	resp := do(t, "POST", srv.URL+"/mod/hook", tok)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(b) != "{}" {
		t.Fatalf("a pool run's hook: got %d %q, want 200 {}", resp.StatusCode, b)
	}
	for _, path := range []string{"/mod/other", "/gateway/inst/mcp"} {
		if resp := do(t, "POST", srv.URL+path, tok); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("a pool run's %s: got %d, want 503", path, resp.StatusCode)
		}
	}
	if resp := doModel(t, srv.URL, tok, placeholder); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a pool run's model call: got %d, want 503 (no Creator's token)", resp.StatusCode)
	}
	select {
	case h := <-hooks:
		t.Fatalf("the Runner got a pool run's hook: %+v", h)
	case s := <-got:
		t.Fatalf("upstream saw a pool run's request: %+v", s)
	default:
	}

	if err := r.Hand("p1", "s1"); err != nil {
		t.Fatalf("Hand to s1: %v", err)
	}
	if err := r.Hand("p1", "s2"); err == nil {
		t.Fatal("Hand of the same pool run to s2: got nil, want an error")
	}
	if err := r.SetModToken("s1", "kndlm_s1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Hold("s1", creatorToken, placeholder); err != nil {
		t.Fatal(err)
	}
	if resp := doModel(t, srv.URL, tok, placeholder); resp.StatusCode != http.StatusOK {
		t.Fatalf("the handed run's model call: got %d, want 200", resp.StatusCode)
	}
	if s := <-got; s.auth != "Bearer "+creatorToken {
		t.Fatalf("the model saw %q, want the Creator's token", s.auth)
	}
	do(t, "POST", srv.URL+"/mod/hook", tok)
	if h := <-hooks; h.session != "s1" {
		t.Fatalf("the handed run's hook went to %q, want s1", h.session)
	}
}
