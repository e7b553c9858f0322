package mod

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// doorPost posts event to a hook door in front of the relay at relayURL,
// as Claude Code's http hook does, and returns the door's answer.
func doorPost(t *testing.T, relayURL, method, path, authorization, event string) (int, string) {
	t.Helper()
	door := httptest.NewServer(NewDoor(relayURL))
	defer door.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitMedium)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, door.URL+path, strings.NewReader(event))
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post to the door: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTheDoorCarriesTheEventAndTheAnswer(t *testing.T) {
	event := `{"hook_event_name":"PermissionRequest","tool_input":{"q":"« ünïcode ✓ » \\" 100%"}}`
	big := `{"answer":"` + strings.Repeat("x", 64<<10) + `"}`
	tests := []struct {
		name         string
		answer       string
		fail, status int
		wantStatus   int
		wantOut      string
		wantCalls    int32
	}{
		{"an answer", `{"continue":true}`, 0, 0, 200, `{"continue":true}`, 1},
		{"a long answer", big, 0, 0, 200, big, 1},
		{"a restarted Runner not reconnected yet (503) is asked again", "{}", 2, http.StatusServiceUnavailable, 200, "{}", 3},
		{"a refusal is passed on, and nothing decided", "{}", 1, http.StatusUnauthorized, http.StatusUnauthorized, "kndl relay: Session not reconnected to the Hub yet; retry\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := relayAnswering(t, event, tt.answer, tt.fail, tt.status)
			status, out := doorPost(t, srv.URL, http.MethodPost, "/mod/hook", "Bearer kndls_tok", event)
			if status != tt.wantStatus || out != tt.wantOut || calls.Load() != tt.wantCalls {
				t.Fatalf("got %d %q after %d calls; want %d %q after %d", status, clipped(out), calls.Load(), tt.wantStatus, clipped(tt.wantOut), tt.wantCalls)
			}
		})
	}
}

// TestTheDoorAsksAgainAcrossARunnerRestart: Claude Code's http hook is
// never retried; the door asks a question held at the relay again of the
// Runner that comes back, and answers with its answer.
func TestTheDoorAsksAgainAcrossARunnerRestart(t *testing.T) {
	asksAgainAcrossARunnerRestart(t, func(relayURL, event string) (string, string) {
		status, out := doorPost(t, relayURL, http.MethodPost, "/mod/hook", "Bearer kndls_tok", event)
		if status != http.StatusOK {
			return "", out
		}
		return out, ""
	})
}

// TestTheDoorForwardsOnlyHookEventsWithTheCallersOwnToken: the door adds
// no credential and reaches nothing but the relay's /mod/hook: what it
// forwards carries the caller's own Authorization or none, and any other
// method or path is refused without asking the relay.
func TestTheDoorForwardsOnlyHookEventsWithTheCallersOwnToken(t *testing.T) {
	var got []string
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		io.WriteString(w, "{}")
	}))
	defer relay.Close()
	tests := []struct {
		method, path, auth string
		wantStatus         int
		wantRelay          string
	}{
		{"POST", "/mod/hook", "Bearer kndls_tok", 200, "POST /mod/hook Bearer kndls_tok"},
		{"POST", "/mod/hook", "", 200, "POST /mod/hook "},
		{"GET", "/mod/hook", "Bearer kndls_tok", 404, ""},
		{"POST", "/mod/session", "Bearer kndls_tok", 404, ""},
		{"POST", "/gateway/x", "Bearer kndls_tok", 404, ""},
		{"POST", "/model/kndls_tok/v1/messages", "", 404, ""},
	}
	for _, tt := range tests {
		got = nil
		status, _ := doorPost(t, relay.URL, tt.method, tt.path, tt.auth, "{}")
		if status != tt.wantStatus || strings.Join(got, ",") != tt.wantRelay {
			t.Errorf("%s %s with %q: got %d, the relay asked %q; want %d, %q", tt.method, tt.path, tt.auth, status, got, tt.wantStatus, tt.wantRelay)
		}
	}
}

// TestUseDoorMakesEachHookAnHTTPHookToTheDoor: every hook of the mod but
// SessionStart's, which Claude Code runs only as a command, becomes an
// http hook to the door with the Session token from Claude Code's
// environment, keeping its event, matcher and timeout.
func TestUseDoorMakesEachHookAnHTTPHookToTheDoor(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mod")
	if err := WriteCopy(dir); err != nil {
		t.Fatal(err)
	}
	type hook struct {
		Type           string            `json:"type"`
		URL            string            `json:"url"`
		Headers        map[string]string `json:"headers"`
		AllowedEnvVars []string          `json:"allowedEnvVars"`
		Timeout        int               `json:"timeout"`
	}
	read := func() map[string][]struct {
		Matcher string `json:"matcher"`
		Hooks   []hook `json:"hooks"`
	} {
		var conf struct {
			Hooks map[string][]struct {
				Matcher string `json:"matcher"`
				Hooks   []hook `json:"hooks"`
			} `json:"hooks"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "hub-link", "hooks", "hooks.json"))
		if err != nil || json.Unmarshal(b, &conf) != nil {
			t.Fatalf("read hooks.json: %v", err)
		}
		return conf.Hooks
	}
	before := read()
	if err := UseDoor(dir, DoorURL); err != nil {
		t.Fatal(err)
	}
	after := read()
	if len(after) != len(before) || len(after) < 12 {
		t.Fatalf("got %d events, want the %d of the command hooks", len(after), len(before))
	}
	for event, groups := range before {
		if event == "SessionStart" {
			if h := after[event]; len(h) != 1 || len(h[0].Hooks) != 1 || h[0].Hooks[0].Type != "command" || h[0].Hooks[0].Timeout != groups[0].Hooks[0].Timeout {
				t.Fatalf("SessionStart: got %+v, want its command hook as it was", h)
			}
			continue
		}
		if len(after[event]) != len(groups) {
			t.Fatalf("%s: got %d groups, want %d", event, len(after[event]), len(groups))
		}
		for i, g := range groups {
			h := after[event][i]
			if h.Matcher != g.Matcher || len(h.Hooks) != 1 {
				t.Fatalf("%s: got %+v, want one hook, matcher %q", event, h, g.Matcher)
			}
			x := h.Hooks[0]
			if x.Type != "http" || x.URL != "http://127.0.0.1:7379/mod/hook" || x.Headers["Authorization"] != "Bearer ${KNDL_MOD_TOKEN}" ||
				len(x.AllowedEnvVars) != 1 || x.AllowedEnvVars[0] != "KNDL_MOD_TOKEN" || x.Timeout != g.Hooks[0].Timeout {
				t.Fatalf("%s: got %+v, want an http hook to the door with the token, timeout %d", event, x, g.Hooks[0].Timeout)
			}
		}
	}
}

// TestTheDoorAsksAgainWhileTheRelayIsAway: a hook event that finds the
// relay's address refusing connections (its Runner restarting) reaches the
// relay that listens there a second later.
func TestTheDoorAsksAgainWhileTheRelayIsAway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // away: connections are refused
	var calls atomic.Int32
	relay := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, `{"back":true}`)
	})}
	defer relay.Close()
	// The Runner comes back a second later; the door asks every half second.
	back := time.AfterFunc(time.Second, func() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen again on %s: %v", addr, err)
			return
		}
		go relay.Serve(ln)
	})
	defer back.Stop()
	status, out := doorPost(t, "http://"+addr, http.MethodPost, "/mod/hook", "Bearer kndls_tok", `{"hook_event_name":"SubagentStart"}`)
	if status != http.StatusOK || out != `{"back":true}` || calls.Load() != 1 {
		t.Fatalf("got %d %q after %d calls; want the relay's answer once it was back, asked once", status, out, calls.Load())
	}
}
