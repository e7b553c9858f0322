package mod

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// hookScript runs the mod's hook client as its hooks do, with event on
// stdin, and returns what it wrote on stdout and stderr.
func hookScript(t *testing.T, env map[string]string, event string) (out, errOut string) {
	t.Helper()
	bash := testenv.RequireCommand(t, "bash")
	dir := filepath.Join(t.TempDir(), "mod")
	if err := WriteCopy(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitMedium)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, filepath.Join(dir, "hub-link", "hooks", "hook.bash"))
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var o, e bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(event), &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("the hook exited with %v (a hook must never fail the Turn); stderr %q", err, e.String())
	}
	return o.String(), e.String()
}

// relayAnswering answers each hook event with answer once it has the
// Session token and the event, counting them; the first fail answers are
// the status given instead.
func relayAnswering(t *testing.T, event, answer string, fail int, status int) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		switch {
		case r.Method != http.MethodPost || r.URL.Path != "/mod/hook" || r.Header.Get("Authorization") != "Bearer kndls_tok" || string(b) != event:
			http.Error(w, "not the event: "+string(b), http.StatusBadRequest)
		case int(n) <= fail:
			http.Error(w, "kndl relay: Session not reconnected to the Hub yet; retry", status)
		default:
			io.WriteString(w, answer)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestTheHookScriptCarriesTheEventAndTheAnswer(t *testing.T) {
	event := `{"hook_event_name":"PermissionRequest","tool_input":{"q":"« ünïcode ✓ » \\" 100%"}}`
	big := `{"answer":"` + strings.Repeat("x", 64<<10) + `"}` // over one write of the relay: no Content-Length
	tests := []struct {
		name         string
		answer       string
		fail, status int
		wantOut      string
		wantErr      string
		wantCalls    int32
	}{
		{"an answer", `{"continue":true}`, 0, 0, `{"continue":true}`, "", 1},
		{"a long answer", big, 0, 0, big, "", 1},
		{"a restarted Runner not reconnected yet (503) is asked again", "{}", 2, http.StatusServiceUnavailable, "{}", "", 3},
		{"a refusal is said on stderr, and nothing decided", "{}", 1, http.StatusUnauthorized, "", "kndl hook: 401: kndl relay: Session not reconnected", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := relayAnswering(t, event, tt.answer, tt.fail, tt.status)
			out, errOut := hookScript(t, map[string]string{"KNDL_URL": srv.URL, "KNDL_MOD_TOKEN": "kndls_tok"}, event)
			if out != tt.wantOut || !strings.HasPrefix(errOut, tt.wantErr) || tt.wantErr == "" && errOut != "" || calls.Load() != tt.wantCalls {
				t.Fatalf("got stdout %q, stderr %q after %d calls; want stdout %q, stderr %q after %d", clipped(out), errOut, calls.Load(), clipped(tt.wantOut), tt.wantErr, tt.wantCalls)
			}
		})
	}
	t.Run("outside a Session", func(t *testing.T) {
		out, errOut := hookScript(t, nil, event)
		if out != "" || !strings.Contains(errOut, "KNDL_URL and KNDL_MOD_TOKEN are not set") {
			t.Fatalf("got stdout %q, stderr %q; want the way out on stderr", out, errOut)
		}
	})
}

// TestTheHookScriptAsksAgainAcrossARunnerRestart: a question held at the
// relay when its Runner goes away is asked again of the Runner that comes
// back on the same address, once it listens, and that one's answer is the
// hook's decision: the question is not lost.
func TestTheHookScriptAsksAgainAcrossARunnerRestart(t *testing.T) {
	asksAgainAcrossARunnerRestart(t, func(relayURL, event string) (string, string) {
		return hookScript(t, map[string]string{"KNDL_URL": relayURL, "KNDL_MOD_TOKEN": "kndls_tok"}, event)
	})
}

// asksAgainAcrossARunnerRestart checks that hook, carrying event to the
// relay at relayURL and returning what it answers Claude Code (and what it
// said on the side), asks a question again of a Runner that comes back.
func asksAgainAcrossARunnerRestart(t *testing.T, hook func(relayURL, event string) (answer, said string)) {
	event := `{"hook_event_name":"PermissionRequest","tool_name":"AskUserQuestion"}`
	held, gone := make(chan struct{}), make(chan struct{})
	before := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(held)
		<-gone                      // waits for a person, until the Runner goes
		panic(http.ErrAbortHandler) // its connection cut, with no answer
	}))
	addr := before.Listener.Addr().String()
	done := make(chan [2]string, 1)
	go func() {
		out, errOut := hook(before.URL, event)
		done <- [2]string{out, errOut}
	}()
	select {
	case <-held:
	case <-done:
		t.Fatal("the hook ended before the relay held it")
	}
	close(gone)
	before.Close() // the Runner is gone: connections are refused a while

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	var calls atomic.Int32
	after := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if b, _ := io.ReadAll(r.Body); string(b) != event || r.Header.Get("Authorization") != "Bearer kndls_tok" {
			http.Error(w, "not the event", http.StatusBadRequest)
			return
		}
		io.WriteString(w, `{"decision":"answered after the restart"}`)
	})}}
	after.Start()
	defer after.Close()
	var got [2]string
	select {
	case got = <-done:
	case <-time.After(testenv.WaitMedium):
		t.Fatal("the hook never asked the restarted relay")
	}
	if got[0] != `{"decision":"answered after the restart"}` || calls.Load() != 1 {
		t.Fatalf("got answer %q (%q), the restarted relay asked %d times; want its answer, asked once", got[0], got[1], calls.Load())
	}
}

func clipped(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
