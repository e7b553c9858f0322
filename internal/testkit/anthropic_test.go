package testkit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// event is one server-sent event, its data decoded.
type event struct {
	name string
	data map[string]any
}

// call posts a Messages request as Claude Code does and returns the answer's
// status and its events (streaming) or its JSON body.
func call(t *testing.T, a *Anthropic, token string, body string) (int, []event, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", a.URL+"/v1/messages?beta=true", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, nil, v
	}
	var events []event
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		} else if d, ok := strings.CutPrefix(line, "data: "); ok {
			var v map[string]any
			if err := json.Unmarshal([]byte(d), &v); err != nil {
				t.Fatalf("event %s data %q: %v", name, d, err)
			}
			events = append(events, event{name, v})
		}
	}
	return resp.StatusCode, events, nil
}

func request(stream bool, messages string) string {
	return `{"model":"claude-sonnet-5-5","max_tokens":100,"stream":` + map[bool]string{true: "true", false: "false"}[stream] +
		`,"messages":` + messages + `}`
}

const prompt = `[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"please make the file"}]},` +
	`{"role":"system","content":[{"type":"text","text":"# Environment"}]}]`

func TestAnthropicStreamsLikeTheAPI(t *testing.T) {
	a := NewAnthropic(t, "tok")
	a.On(PromptContains("make the file"), Text("Making it now, as asked, right away.").Then(Bash("touch /tmp/f")))
	status, events, _ := call(t, a, "tok", request(true, prompt))
	if status != 200 {
		t.Fatalf("status: got %d, want 200", status)
	}
	var names []string
	for _, e := range events {
		names = append(names, e.name)
		if e.data["type"] != e.name {
			t.Errorf("event %s carries type %v, want the same", e.name, e.data["type"])
		}
	}
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("events:\ngot  %s\nwant %s", got, want)
	}
	var text, partial string
	for _, e := range events {
		if e.name != "content_block_delta" {
			continue
		}
		d := e.data["delta"].(map[string]any)
		switch d["type"] {
		case "text_delta":
			text += d["text"].(string)
		case "input_json_delta":
			partial += d["partial_json"].(string)
		}
	}
	if text != "Making it now, as asked, right away." {
		t.Errorf("text deltas: got %q", text)
	}
	var input map[string]any
	if err := json.Unmarshal([]byte(partial), &input); err != nil || input["command"] != "touch /tmp/f" {
		t.Errorf("input_json_delta pieces: got %q (%v), want the Bash input", partial, err)
	}
	msg := events[0].data["message"].(map[string]any)
	if msg["model"] != "claude-sonnet-5-5" || msg["role"] != "assistant" || !strings.HasPrefix(msg["id"].(string), "msg_") {
		t.Errorf("message_start: got %v", msg)
	}
	tool := events[7].data["content_block"].(map[string]any)
	if tool["type"] != "tool_use" || tool["name"] != "Bash" || !strings.HasPrefix(tool["id"].(string), "toolu_") {
		t.Errorf("tool_use block start: got %v", tool)
	}
	delta := events[12].data["delta"].(map[string]any)
	if delta["stop_reason"] != "tool_use" || events[12].data["usage"].(map[string]any)["output_tokens"].(float64) < 1 {
		t.Errorf("message_delta: got %v", events[12].data)
	}
}

func TestAnthropicStreamsThinking(t *testing.T) {
	a := NewAnthropic(t, "")
	a.On(PromptContains("make the file"), Thinking("First, think it over.").Then(Text("Done.")))
	_, events, _ := call(t, a, "anything", request(true, prompt))
	var thought, sig string
	for _, e := range events {
		switch e.name {
		case "content_block_start":
			if b := e.data["content_block"].(map[string]any); e.data["index"].(float64) == 0 &&
				(b["type"] != "thinking" || b["thinking"] != "" || b["signature"] != "") {
				t.Errorf("first block start: got %v, want an empty thinking block", b)
			}
		case "content_block_delta":
			d := e.data["delta"].(map[string]any)
			switch d["type"] {
			case "thinking_delta":
				thought += d["thinking"].(string)
			case "signature_delta":
				sig = d["signature"].(string)
			}
		}
	}
	if thought != "First, think it over." || sig == "" {
		t.Errorf("thinking deltas: got %q, signature %q; want the thinking, then a signature", thought, sig)
	}
	_, _, body := call(t, a, "anything", request(false, prompt))
	block := body["content"].([]any)[0].(map[string]any)
	if block["type"] != "thinking" || block["thinking"] != "First, think it over." || block["signature"] == "" {
		t.Errorf("whole message's first block: got %v, want the thinking block with a signature", block)
	}
}

func TestAnthropicAnswersWithoutStreaming(t *testing.T) {
	a := NewAnthropic(t, "")
	a.On(PromptContains("make the file"), Text("Done."))
	status, _, body := call(t, a, "anything", request(false, prompt))
	content := body["content"].([]any)
	if status != 200 || body["type"] != "message" || body["stop_reason"] != "end_turn" || len(content) != 1 ||
		content[0].(map[string]any)["text"] != "Done." {
		t.Errorf("got %d %v, want a whole message saying Done.", status, body)
	}
}

func TestAnthropicMatchesAndRecords(t *testing.T) {
	a := NewAnthropic(t, "tok")
	a.On(InSubagent("SUBAGENT:"), Text("In the subagent."))
	a.On(PromptContains("make the file"), Bash("touch /tmp/f"))
	a.On(ToolResultContains("No such file"), Text("It failed."))
	a.On(AfterToolResult(), Text("It worked."))
	toolResult := func(content string) string {
		return `[{"role":"user","content":"please make the file"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"touch /tmp/f"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + content + `}]}]`
	}
	tests := []struct {
		name, messages, want string
		unscripted           bool
	}{
		{"prompt as blocks, system message after it", prompt, "touch /tmp/f", false},
		{"prompt as a string", `[{"role":"user","content":"please make the file"}]`, "touch /tmp/f", false},
		{"tool result as a string", toolResult(`"done"`), "It worked.", false},
		{"tool result as blocks", toolResult(`[{"type":"text","text":"ls: No such file"}]`), "It failed.", false},
		{"a subagent's call, its task prompt first", `[{"role":"user","content":[{"type":"text","text":"<system-reminder>r</system-reminder>"},{"type":"text","text":"SUBAGENT: make the file"}]},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"No such file"}]}]`,
			"In the subagent.", false},
		{"unscripted", `[{"role":"user","content":"something else"}]`, `testkit: no scripted reply for this request; last user message: user "something else"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, body := call(t, a, "tok", request(false, tt.messages))
			got := fmt.Sprint(body["content"])
			if !strings.Contains(got, tt.want) {
				t.Errorf("got %s, want it to hold %q", got, tt.want)
			}
			reqs := a.Requests()
			last := reqs[len(reqs)-1]
			if last.Unscripted != tt.unscripted || last.Status != 200 || last.Header.Get("Authorization") != "Bearer tok" ||
				string(last.Body) != request(false, tt.messages) || last.RawQuery != "beta=true" {
				t.Errorf("recorded %+v, want the request whole", last)
			}
		})
	}
	if n := len(a.Turns()); n != len(tests) {
		t.Errorf("Turns: got %d, want %d", n, len(tests))
	}
}

func TestAnthropicRefusesAndRecordsTheRest(t *testing.T) {
	a := NewAnthropic(t, "tok")
	a.On(PromptContains("overload"), Fail(529, "overloaded_error", "Overloaded"))
	status, _, body := call(t, a, "wrong", request(true, prompt))
	if status != 401 || body["error"].(map[string]any)["type"] != "authentication_error" {
		t.Errorf("wrong token: got %d %v, want 401 authentication_error", status, body)
	}
	status, _, body = call(t, a, "tok", request(true, `[{"role":"user","content":"overload"}]`))
	if status != 529 || body["type"] != "error" || body["error"].(map[string]any)["type"] != "overloaded_error" {
		t.Errorf("scripted failure: got %d %v", status, body)
	}

	post := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, a.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	if status, v := post("POST", "/v1/messages/count_tokens?beta=true", request(false, prompt)); status != 200 || v["input_tokens"].(float64) < 1 {
		t.Errorf("count_tokens: got %d %v", status, v)
	}
	if status, v := post("GET", "/api/oauth/profile", ""); status != 404 || v["error"].(map[string]any)["type"] != "not_found_error" {
		t.Errorf("unknown endpoint: got %d %v, want 404", status, v)
	}
	if status, _ := post("POST", "/v1/messages", "not json"); status != 400 {
		t.Errorf("bad body: got %d, want 400", status)
	}
	var got []string
	for _, r := range a.Requests() {
		got = append(got, r.Method+" "+r.Path+" "+http.StatusText(r.Status))
	}
	want := "POST /v1/messages Unauthorized|POST /v1/messages |POST /v1/messages/count_tokens OK|GET /api/oauth/profile Not Found|POST /v1/messages Bad Request"
	want = strings.Replace(want, "/v1/messages |", "/v1/messages "+http.StatusText(529)+"|", 1)
	if strings.Join(got, "|") != want {
		t.Errorf("recorded:\ngot  %s\nwant %s", strings.Join(got, "|"), want)
	}
	if n := len(a.Turns()); n != 0 {
		t.Errorf("Turns: got %d, want none of these", n)
	}
}

func TestAnthropicSlowReplies(t *testing.T) {
	a := NewAnthropic(t, "")
	a.On(PromptContains("slow start"), Text("late").Slow(300*time.Millisecond, 0))
	a.On(PromptContains("slow stream"), Text("one two three four five six seven eight nine ten").Slow(0, 100*time.Millisecond))
	a.On(PromptContains("never"), Text("never").Slow(time.Hour, 0))

	start := time.Now()
	call(t, a, "", request(true, `[{"role":"user","content":"slow start"}]`))
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("a delayed reply came after %v, want at least 300ms", d)
	}
	start = time.Now()
	_, events, _ := call(t, a, "", request(true, `[{"role":"user","content":"slow stream"}]`))
	if d := time.Since(start); d < 300*time.Millisecond || len(events) < 6 {
		t.Errorf("a paced reply: %d events in %v, want several deltas 100ms apart", len(events), d)
	}

	// A reply held back is recorded at once, and a client that gives up
	// ends it (the test's cleanup would wait for it otherwise).
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", a.URL+"/v1/messages", strings.NewReader(request(true, `[{"role":"user","content":"never"}]`)))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	testenv.Eventually(t, testenv.WaitShort, "the held request is recorded", func() bool { return len(a.Requests()) == 3 })
	cancel()
	<-done
}

// TestAReplyReportsTheUsageItIsGiven: the input and cache counts come in
// message_start, the output count in message_delta, as the real API
// streams them; a whole message carries all four.
func TestAReplyReportsTheUsageItIsGiven(t *testing.T) {
	a := NewAnthropic(t, "")
	a.On(PromptContains("make the file"), Text("Done.").WithUsage(Usage{Input: 1200, Output: 34, CacheRead: 5600, CacheWrite: 78}))
	_, events, _ := call(t, a, "anything", request(true, prompt))
	start := events[0].data["message"].(map[string]any)["usage"].(map[string]any)
	delta := events[len(events)-2].data["usage"].(map[string]any)
	if start["input_tokens"] != 1200.0 || start["cache_read_input_tokens"] != 5600.0 || start["cache_creation_input_tokens"] != 78.0 || delta["output_tokens"] != 34.0 {
		t.Errorf("message_start's usage %v and message_delta's %v, want the given counts", start, delta)
	}
	_, _, body := call(t, a, "anything", request(false, prompt))
	want := map[string]any{"input_tokens": 1200.0, "output_tokens": 34.0, "cache_read_input_tokens": 5600.0, "cache_creation_input_tokens": 78.0, "service_tier": "standard"}
	if got := body["usage"].(map[string]any); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("a whole message's usage: got %v, want %v", got, want)
	}
}
