package mod

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// DoorAddr is where the hook door listens, on a Sandbox's loopback: the
// mod's http hooks post there (UseDoor), and the Sandbox's init serves it
// (ServeDoor). Claude Code 2.1.328 sends an http hook to loopback and to
// public addresses only ("HTTP hook blocked: … is not a public address" for
// the relay's 10.174.0.1), so the door is what reaches the relay for it.
const DoorAddr = "127.0.0.1:7379"

// ServeDoor serves the hook door on ln until ctx ends, forwarding to the
// relay at relayAddr (host:port).
func ServeDoor(ctx context.Context, ln net.Listener, relayAddr string) error {
	srv := &http.Server{Handler: NewDoor("http://" + relayAddr), ReadHeaderTimeout: 10 * time.Second}
	context.AfterFunc(ctx, func() { srv.Close() })
	err := srv.Serve(ln)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// NewDoor is the hook door: it takes each hook event Claude Code posts
// itself (an http hook, which starts no process: BenchmarkHookCPU) and
// carries it to the relay at relayURL as hook.bash does, with the
// Authorization Claude Code sent, and answers with the relay's answer.
// Claude Code does not retry an http hook that fails, so the door asks again
// while the relay can't be reached (its Runner restarting) or a restarted
// Runner waits for the Hub (503), for hookRetryFor from the last time the
// relay held the event, as hook.bash does: a question held at the relay
// when its Runner goes is asked anew of the Runner that comes back.
//
// It forwards POST /mod/hook and nothing else, and adds no credential: the
// caller's own Authorization goes to the relay, which checks it, so the door
// lets nothing in the Sandbox do more than it could at the relay itself.
func NewDoor(relayURL string) http.Handler {
	// No proxy, whatever the environment says: the relay is reached directly.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/mod/hook" {
			http.Error(w, "kndl hook door: it takes the mod's hook events alone, POST /mod/hook", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxHookBytes))
		if err != nil {
			http.Error(w, fmt.Sprintf("kndl hook door: a hook event is at most %d bytes", MaxHookBytes), http.StatusRequestEntityTooLarge)
			return
		}
		status, header, answer, err := askRelay(req.Context(), client, relayURL, req.Header.Get("Authorization"), body)
		if err != nil {
			http.Error(w, "kndl hook door: "+err.Error(), http.StatusBadGateway)
			return
		}
		if ct := header.Get("Content-Type"); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(status)
		w.Write(answer)
	})
}

// askRelay posts one hook event to the relay, asking again while it is
// away or answers 503, and returns its answer.
func askRelay(ctx context.Context, client *http.Client, relayURL, authorization string, body []byte) (int, http.Header, []byte, error) {
	deadline := time.Now().Add(hookRetryFor)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, relayURL+"/mod/hook", bytes.NewReader(body))
		if err != nil {
			return 0, nil, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := client.Do(req)
		var why string
		switch {
		case err != nil:
			var op *net.OpError
			if !errors.As(err, &op) || op.Op != "dial" {
				// Cut off after the event went: the relay went away under
				// a held hook, and the Runner that comes back asks anew.
				deadline = time.Now().Add(hookRetryFor)
			}
			why = err.Error()
		case resp.StatusCode == http.StatusServiceUnavailable:
			// A restarted Runner has not reconnected the Session yet.
			resp.Body.Close()
			why = resp.Status
		default:
			answer, err := io.ReadAll(io.LimitReader(resp.Body, MaxHookBytes))
			resp.Body.Close()
			if err != nil {
				deadline, why = time.Now().Add(hookRetryFor), err.Error()
				break
			}
			return resp.StatusCode, resp.Header, answer, nil
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return 0, nil, nil, fmt.Errorf("the relay did not answer for %s: %s", hookRetryFor, why)
		}
		select {
		case <-ctx.Done():
			return 0, nil, nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// DoorURL is the hook door as a Sandbox's Claude Code reaches it.
const DoorURL = "http://" + DoorAddr

// commandOnly are the hook events Claude Code runs no http hook for
// (2.1.328: "HTTP hooks are not supported for SessionStart", and Setup):
// they keep their command hook, once a start.
var commandOnly = map[string]bool{"SessionStart": true}

// UseDoor rewrites the hooks of a mod copy (dir, as WriteCopy wrote it) as
// Claude Code's http hooks to the hook door at door (DoorURL in a
// Sandbox), each with the timeout its command hook has, but for the
// commandOnly events: for a Claude Code in a Sandbox whose init serves the
// door. Claude Code puts the Session token, from its own environment, in
// the Authorization header.
func UseDoor(dir, door string) error {
	path := filepath.Join(dir, "hub-link", "hooks", "hooks.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("mod hooks: %w", err)
	}
	var conf struct {
		Hooks map[string]json.RawMessage `json:"hooks"`
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		return fmt.Errorf("mod hooks: %w", err)
	}
	type httpHook struct {
		Type           string            `json:"type"`
		URL            string            `json:"url"`
		Headers        map[string]string `json:"headers"`
		AllowedEnvVars []string          `json:"allowedEnvVars"`
		Timeout        int               `json:"timeout"`
	}
	type group struct {
		Matcher string     `json:"matcher,omitempty"`
		Hooks   []httpHook `json:"hooks"`
	}
	out := map[string]any{}
	for event, raw := range conf.Hooks {
		if commandOnly[event] {
			out[event] = raw
			continue
		}
		var groups []struct {
			Matcher string `json:"matcher,omitempty"`
			Hooks   []struct {
				Timeout int `json:"timeout"`
			} `json:"hooks"`
		}
		if err := json.Unmarshal(raw, &groups); err != nil {
			return fmt.Errorf("mod hooks: %s: %w", event, err)
		}
		var viaDoor []group
		for _, g := range groups {
			ng := group{Matcher: g.Matcher}
			for _, h := range g.Hooks {
				ng.Hooks = append(ng.Hooks, httpHook{Type: "http", URL: door + "/mod/hook",
					Headers: map[string]string{"Authorization": "Bearer ${KNDL_MOD_TOKEN}"}, AllowedEnvVars: []string{"KNDL_MOD_TOKEN"}, Timeout: h.Timeout})
			}
			viaDoor = append(viaDoor, ng)
		}
		out[event] = viaDoor
	}
	b, err := json.MarshalIndent(map[string]any{"hooks": out}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
