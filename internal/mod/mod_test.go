package mod

import (
	"bytes"
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

func TestWriteCopyHasEveryPlugin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "copy")
	if err := WriteCopy(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range Plugins {
		b, err := os.ReadFile(filepath.Join(dir, p, ".claude-plugin", "plugin.json"))
		if err != nil {
			t.Fatalf("plugin %s: %v", p, err)
		}
		var m struct{ Name string }
		if err := json.Unmarshal(b, &m); err != nil || m.Name != p {
			t.Errorf("plugin.json of %s names %q (%v)", p, m.Name, err)
		}
	}
	var hooks struct {
		Hooks map[string][]struct {
			Hooks []struct{ Type, Command string }
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "hub-link", "hooks", "hooks.json"))
	if err := json.Unmarshal(b, &hooks); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"SessionStart", "UserPromptSubmit", "Stop", "StopFailure", "SubagentStart", "SubagentStop", "Notification", "PermissionRequest"} {
		hs := hooks.Hooks[ev]
		if want := `bash "${CLAUDE_PLUGIN_ROOT}/hooks/hook.bash"`; len(hs) != 1 || hs[0].Hooks[0].Command != want {
			t.Errorf("hook for %s = %+v, want %s", ev, hs, want)
		}
	}
	if err := WriteCopy(dir); err == nil {
		t.Fatal("WriteCopy over an existing copy succeeded; a copy must be fresh")
	}
}

// TestTheGatewayPluginHoldsNoSecret: each Installation is an http MCP
// server at the relay's /gateway/<id>, its token taken from Claude Code's
// environment as it starts, never written down.
func TestTheGatewayPluginHoldsNoSecret(t *testing.T) {
	dir := t.TempDir()
	if err := WriteGateway(dir, []string{"docs", "tracker"}); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Type, URL string
			Headers   map[string]string
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, GatewayPlugin, ".mcp.json"))
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"docs", "tracker"} {
		s := cfg.MCPServers[id]
		if s.Type != "http" || s.URL != "${KNDL_URL}/gateway/"+id || len(s.Headers) != 1 || s.Headers["Authorization"] != "Bearer ${KNDL_MOD_TOKEN}" {
			t.Errorf("server %s = %+v", id, s)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, GatewayPlugin, ".claude-plugin", "plugin.json")); err != nil {
		t.Fatal(err)
	}
}

func TestHookCarriesEventWithSessionToken(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // a restarted Runner, not reconnected yet
			return
		}
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/mod/hook" || r.Header.Get("Authorization") != "Bearer kndls_tok" || string(b) != `{"hook_event_name":"Stop"}` {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		io.WriteString(w, `{"continue":true}`)
	}))
	defer srv.Close()
	env := map[string]string{"KNDL_URL": srv.URL, "KNDL_MOD_TOKEN": "kndls_tok"}
	var out, errOut bytes.Buffer
	Hook(context.Background(), func(k string) string { return env[k] }, strings.NewReader(`{"hook_event_name":"Stop"}`), &out, &errOut)
	if out.String() != `{"continue":true}` || calls.Load() != 2 {
		t.Fatalf("out %q, stderr %q after %d calls; want the Hub's answer after a retry", out.String(), errOut.String(), calls.Load())
	}
}

// TestHookWaitsForARelayThatIsDown: a hook fired while its Runner
// restarts reaches the relay once it listens again.
func TestHookWaitsForARelayThatIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: connections are refused
	env := map[string]string{"KNDL_URL": "http://" + addr, "KNDL_MOD_TOKEN": "kndls_tok"}
	done := make(chan string)
	go func() {
		var out, errOut bytes.Buffer
		Hook(context.Background(), func(k string) string { return env[k] }, strings.NewReader(`{"hook_event_name":"Stop"}`), &out, &errOut)
		done <- out.String() + errOut.String()
	}()
	time.Sleep(700 * time.Millisecond) // the Runner is away for a while
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })}
	go srv.Serve(ln)
	defer srv.Close()
	select {
	case got := <-done:
		if got != "{}" {
			t.Fatalf("the hook said %q, want the relay's answer", got)
		}
	case <-time.After(testenv.WaitShort):
		t.Fatal("the hook never reached the relay once it was back")
	}
}
