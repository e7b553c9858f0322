package relay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type seen struct {
	path, auth string
}

func upstreamServer(t *testing.T, got chan<- seen) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.Path, r.Header.Get("Authorization")}
		if strings.HasSuffix(r.URL.Path, "/stream") {
			// Two events with a pause: the relay must pass the first on at once.
			fmt.Fprint(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond)
			fmt.Fprint(w, "data: two\n\n")
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// hookEvent is one hook event the relay handed the Runner.
type hookEvent struct {
	session, body string
}

func newRelay(t *testing.T, hub, model string) (*httptest.Server, *Relay) {
	srv, r, _ := newRelayHooks(t, hub, model)
	return srv, r
}

// newRelayHooks is newRelay with the hook events it hands the Runner.
func newRelayHooks(t *testing.T, hub, model string) (*httptest.Server, *Relay, <-chan hookEvent) {
	hooks := make(chan hookEvent, 10)
	r, err := New(Options{HubURL: hub, ModelURL: model, Logger: slog.New(slog.DiscardHandler),
		Hook: func(_ context.Context, id string, body []byte) ([]byte, error) {
			hooks <- hookEvent{id, string(body)}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, r, hooks
}

func do(t *testing.T, method, url, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader("{}"))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestSessionTokenIsSwappedForModToken(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	srv, r := newRelay(t, hub.URL, "")
	tok := r.Issue("s1")
	r.SetModToken("s1", "kndlm_secret")

	resp := do(t, "POST", srv.URL+"/mod/other", tok)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	s := <-got
	if s.path != "/mod/other" || s.auth != "Bearer kndlm_secret" {
		t.Fatalf("hub saw %+v, want /mod/other with the mod token", s)
	}
}

// TestHookEventsGoToTheRunner: a hook event is handed to the Runner for
// the Session its token names, exactly as sent, and never reaches the Hub;
// a restarted Runner's relay answers 503 until the Hub took the Session
// back, and one over the limit is refused.
func TestHookEventsGoToTheRunner(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	srv, r, hooks := newRelayHooks(t, hub.URL, "")
	tok := r.Issue("s1")
	if resp := do(t, "POST", srv.URL+"/mod/hook", tok); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("before the Hub took it back: %d, want 503", resp.StatusCode)
	}
	r.SetModToken("s1", "kndlm_secret")
	resp := do(t, "POST", srv.URL+"/mod/hook", tok)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "{}" {
		t.Fatalf("answer %d %q, want 200 {}", resp.StatusCode, b)
	}
	if h := <-hooks; h.session != "s1" || h.body != "{}" {
		t.Fatalf("the Runner got %+v, want s1's event as sent", h)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/mod/hook", strings.NewReader(strings.Repeat("x", MaxHookBytes+1)))
	req.Header.Set("Authorization", "Bearer "+tok)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an oversized event: %v %v, want 413", resp.Status, err)
	}
	select {
	case s := <-got:
		t.Fatalf("the Hub saw %+v", s)
	case h := <-hooks:
		t.Fatalf("the Runner got an oversized event of %d bytes", len(h.body))
	default:
	}
}

func TestRefusals(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	srv, r := newRelay(t, hub.URL, "")
	old := r.Issue("s1")
	cur := r.Issue("s1") // a new run revokes the old token
	r.SetModToken("s1", "kndlm_x")
	gone := r.Issue("s2")
	r.Revoke("s2")
	tests := []struct {
		name, path, token string
		want              int
	}{
		{"no token", "/mod/hook", "", 401},
		{"wrong token", "/mod/hook", "kndls_nope", 401},
		{"previous run's token", "/mod/hook", old, 401},
		{"revoked token", "/mod/hook", gone, 401},
		{"mod token itself", "/mod/hook", "kndlm_x", 401},
		{"anything else", "/api/sessions", cur, 404},
		{"no model endpoint set", "/model/" + cur + "/v1/messages", cur, 404},
		{"root", "/", cur, 404},
	}
	for _, tt := range tests {
		if resp := do(t, "POST", srv.URL+tt.path, tt.token); resp.StatusCode != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
	}
	select {
	case s := <-got:
		t.Fatalf("a refused request reached the hub: %+v", s)
	default:
	}
}

func TestAdoptedTokenWaitsForModToken(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	srv, r := newRelay(t, hub.URL, "")
	r.Adopt("s1", "kndls_readback")
	if resp := do(t, "POST", srv.URL+"/mod/hook", "kndls_readback"); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("before the mod token: status %d, want 503 with Retry-After", resp.StatusCode)
	}
	r.SetModToken("s1", "kndlm_new")
	if resp := do(t, "POST", srv.URL+"/mod/hook", "kndls_readback"); resp.StatusCode != 200 {
		t.Fatalf("after the mod token: status %d, want 200", resp.StatusCode)
	}
}

func TestModelRouteForwardsUnchangedAndStreams(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	model := upstreamServer(t, got)
	srv, r := newRelay(t, hub.URL, model.URL+"/base")
	tok := r.Issue("s1")
	if resp := do(t, "POST", srv.URL+"/model/kndls_wrong/v1/messages", "sk-ant-oat-x"); resp.StatusCode != 401 {
		t.Fatalf("wrong session token on the model route: %d, want 401", resp.StatusCode)
	}
	start := time.Now()
	resp := do(t, "POST", srv.URL+"/model/"+tok+"/v1/stream", "sk-ant-oat-x")
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if line != "data: one\n" || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("first event %q after %v: the stream was held back", line, time.Since(start))
	}
	s := <-got
	if s.path != "/base/v1/stream" || s.auth != "Bearer sk-ant-oat-x" {
		t.Fatalf("model endpoint saw %+v, want the request unchanged under /base", s)
	}
}
