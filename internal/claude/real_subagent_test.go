package claude_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// hooks is a plugin whose hooks POST each event to a server in the test,
// which records it and answers as answer says.
type hooks struct {
	mu     sync.Mutex
	events []map[string]any
	answer func(ev map[string]any) any // nil: no decision
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var ev map[string]any
	json.Unmarshal(b, &ev)
	h.mu.Lock()
	h.events = append(h.events, ev)
	var out any = map[string]any{}
	if a := h.answer(ev); a != nil {
		out = a
	}
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func (h *hooks) named(name string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, ev := range h.events {
		if ev["hook_event_name"] == name {
			out = append(out, ev)
		}
	}
	return out
}

// plugin writes a plugin sending events to url with an http hook each.
func plugin(t *testing.T, url string, events ...string) string {
	dir := filepath.Join(t.TempDir(), "hooks-to-test")
	hs := map[string]any{}
	for _, e := range events {
		hs[e] = []any{map[string]any{"hooks": []any{map[string]any{"type": "http", "url": url, "timeout": 60}}}}
	}
	b, _ := json.Marshal(map[string]any{"hooks": hs})
	for name, data := range map[string][]byte{
		".claude-plugin/plugin.json": []byte(`{"name":"hooks-to-test","version":"0.0.1","description":"test","author":{"name":"kndl"}}`),
		"hooks/hooks.json":           b,
	} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fileRecords are a transcript file's complete lines, decoded.
func fileRecords(t *testing.T, path string) []map[string]any {
	data, _ := os.ReadFile(path)
	var out []map[string]any
	for _, line := range strings.SplitAfter(string(data), "\n") {
		var r map[string]any
		if strings.HasSuffix(line, "\n") && json.Unmarshal([]byte(line), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// stopReason is what the test's hooks say stopped a subagent.
const stopReason = "Stopped by its Creator."

// stopAt is the index of the record of a hook's stop in a subagent's
// transcript (hook_stopped_continuation with the stop's reason), or -1.
func stopAt(t *testing.T, path string) int {
	return slices.IndexFunc(fileRecords(t, path), func(r map[string]any) bool {
		a, _ := r["attachment"].(map[string]any)
		return a["type"] == "hook_stopped_continuation" && a["message"] == stopReason
	})
}

// TestRealASubagentStopsAtItsToolCallsHook is how kndl stops one subagent
// (internal/runner's subagents.go), measured: a subagent's PreToolUse
// answered continue false with the tool denied ends it before the tool
// runs; its PostToolUse answered continue false ends it once the tool it
// was in has run to its end. Neither fires SubagentStop; each transcript
// holds hook_stopped_continuation and no answer after it; the main Turn's
// long command runs on meanwhile, to its end, and the next prompt is
// answered. SubagentStart names no
// tool call; the Agent call's PostToolUse names the subagent.
func TestRealASubagentStopsAtItsToolCallsHook(t *testing.T) {
	s := newSession(t)
	preLog, postLog := filepath.Join(s.Work, "pre.log"), filepath.Join(s.Work, "post.log")
	reason := stopReason
	h := &hooks{}
	var pres int
	var stops []int // the stopped hooks' places among the events
	h.answer = func(ev map[string]any) any {
		in, _ := ev["tool_input"].(map[string]any)
		cmd, _ := in["command"].(string)
		if ev["agent_id"] == nil || cmd == "" {
			return nil
		}
		switch {
		case ev["hook_event_name"] == "PreToolUse" && strings.Contains(cmd, preLog):
			if pres++; pres == 2 {
				stops = append(stops, len(h.events)-1)
				return map[string]any{"continue": false, "stopReason": reason, "hookSpecificOutput": map[string]any{
					"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason}}
			}
		case ev["hook_event_name"] == "PostToolUse" && strings.Contains(cmd, postLog):
			stops = append(stops, len(h.events)-1)
			return map[string]any{"continue": false, "stopReason": reason}
		}
		return nil
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	s.Launch.PluginDirs = []string{plugin(t, srv.URL, "PreToolUse", "PostToolUse", "SubagentStart", "SubagentStop", "Stop")}

	s.API.On(testkit.InSubagent("HELPER-PRE"), testkit.Bash("echo pre >> "+preLog).Slow(300*time.Millisecond, 0))
	s.API.On(testkit.InSubagent("HELPER-POST"), testkit.Bash("timeout 3 tail -f /dev/null; echo post >> "+postLog))
	s.API.On(testkit.PromptContains("start the helpers"), testkit.Agent("Stopped before a tool", "HELPER-PRE: step on").
		Then(testkit.Agent("Stopped after a tool", "HELPER-POST: step on")))
	s.API.On(testkit.ToolResultContains("Async agent launched"), testkit.Bash("echo main-start; timeout 8 tail -f /dev/null; echo main-done"))
	s.API.On(testkit.ToolResultContains("main-done"), testkit.Text("Main done."))
	s.API.On(testkit.PromptContains("are you still there"), testkit.Text("Still here."))
	s.API.On(testkit.PromptContains("<task-notification>"), testkit.Text("Noted."))
	s.Start(false)
	s.Send("start the helpers")
	s.waitReply(t, "Main done.")

	subs, _ := filepath.Glob(filepath.Join(strings.TrimSuffix(s.Transcript(), ".jsonl"), "subagents", "agent-*.jsonl"))
	if len(subs) != 2 {
		t.Fatalf("subagent transcripts %v, want 2", subs)
	}
	testenv.Eventually(t, testenv.WaitShort, "each subagent's transcript holds the hook's stop", func() bool {
		return !slices.ContainsFunc(subs, func(f string) bool { return stopAt(t, f) < 0 })
	})
	for _, f := range subs {
		recs := fileRecords(t, f)
		if i := slices.IndexFunc(recs[stopAt(t, f):], func(r map[string]any) bool { return r["type"] == "assistant" }); i >= 0 {
			t.Errorf("%s: Claude answered after the stop", f)
		}
	}
	for _, tt := range []struct{ log, want string }{{preLog, "pre\n"}, {postLog, "post\n"}} {
		if got, _ := os.ReadFile(tt.log); string(got) != tt.want {
			t.Errorf("%s: %q, want %q: the denied tool must not run, the one it was in must run to its end", tt.log, got, tt.want)
		}
	}
	calls := func(marker string) int {
		n := 0
		for _, r := range s.API.Turns() {
			if testkit.InSubagent(marker)(r) {
				n++
			}
		}
		return n
	}
	if pre, post := calls("HELPER-PRE"), calls("HELPER-POST"); pre != 2 || post != 1 {
		t.Errorf("model calls after the stop: the stopped-before one made %d, the stopped-after one %d; want 2 and 1", pre, post)
	}
	if n := len(h.named("SubagentStop")); n != 0 {
		t.Errorf("%d SubagentStop hooks, want none for a stopped subagent", n)
	}
	if got := slices.ContainsFunc(s.API.Turns(), func(r *testkit.Request) bool {
		return slices.ContainsFunc(r.LastUser().ToolResults(), func(b testkit.Block) bool {
			return !b.IsError && b.ResultText() == "main-start\nmain-done"
		})
	}); !got {
		t.Error("the main Turn's command did not run to its end")
	}
	h.mu.Lock()
	mainDone := slices.IndexFunc(h.events, func(ev map[string]any) bool {
		in, _ := ev["tool_input"].(map[string]any)
		cmd, _ := in["command"].(string)
		return ev["hook_event_name"] == "PostToolUse" && ev["agent_id"] == nil && strings.Contains(cmd, "main-done")
	})
	if len(stops) != 2 || stops[0] > mainDone || stops[1] > mainDone {
		t.Errorf("the stops came at events %v, the main command's end at %d: want both stopped while it ran", stops, mainDone)
	}
	h.mu.Unlock()

	// SubagentStart has the agent, not its call; the call's PostToolUse
	// has both.
	started := map[string]bool{}
	for _, ev := range h.named("SubagentStart") {
		if ev["tool_use_id"] != nil {
			t.Errorf("SubagentStart %v names a tool call now: pair by it", ev)
		}
		started[ev["agent_id"].(string)] = true
	}
	for _, ev := range h.named("PostToolUse") {
		if ev["tool_name"] != "Agent" {
			continue
		}
		resp, _ := ev["tool_response"].(map[string]any)
		if id, _ := resp["agentId"].(string); !started[id] || ev["tool_use_id"] == "" {
			t.Errorf("the Agent call's PostToolUse %v does not name a started subagent", ev)
		}
	}
	if len(started) != 2 {
		t.Errorf("SubagentStart for %v, want 2", started)
	}

	s.Send("are you still there?")
	s.waitReply(t, "Still here.")
}
