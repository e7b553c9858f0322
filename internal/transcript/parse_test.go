package transcript

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
)

// Records below are cut down from ones Claude Code 2.1.328 wrote (see
// testdata/), keeping the fields Parse reads and a few it must ignore.
func TestParse(t *testing.T) {
	const ts = `"timestamp":"2026-11-30T08:56:47.104Z"`
	at := time.Date(2026, 11, 30, 8, 56, 47, 104e6, time.UTC)
	sub := Source{Agent: "a493433d8fc943109", Parent: "toolu_agent"}
	ev := func(e protocol.Event) protocol.Event { e.At = at; return e }
	subEv := func(e protocol.Event) protocol.Event { e.At, e.Agent, e.Parent = at, sub.Agent, sub.Parent; return e }
	tests := []struct {
		name string
		line string
		src  Source
		want []protocol.Event
	}{
		{"human prompt", `{"parentUuid":null,"isSidechain":false,"promptId":"p","type":"user","message":{"role":"user","content":"Say hello"},` + ts + `,"origin":{"kind":"human"},"promptSource":"typed"}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "turn_start"}), ev(protocol.Event{Kind: "prompt", Text: "Say hello"})}},
		{"human prompt with an image", `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}]},` + ts + `,"origin":{"kind":"human"}}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "turn_start"}), ev(protocol.Event{Kind: "prompt", Text: "What is this?\n[image]"})}},
		{"text block", `{"parentUuid":"x","message":{"content":[{"text":"Hello there.","type":"text"}],"id":"msg_1","model":"claude-sonnet-5-5","role":"assistant","stop_reason":"end_turn"},"apiBlockIndex":0,"type":"assistant",` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "text", Text: "Hello there."})}},
		{"a reply's usage on its record's last Event", `{"uuid":"u1","message":{"content":[{"type":"thinking","thinking":"Hm."},{"text":"Done.","type":"text"}],"id":"msg_2","model":"claude-sonnet-5-5","role":"assistant","usage":{"input_tokens":1200,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":56,"service_tier":"standard"}},"type":"assistant",` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "thinking", Text: "Hm."}), ev(protocol.Event{Kind: "text", Text: "Done.",
				Usage: &protocol.Usage{Message: "msg_2", Model: "claude-sonnet-5-5", Tokens: claude.Tokens{Input: 1200, Output: 56, CacheRead: 4000, CacheWrite: 300}}})}},
		{"a reply with no id counted by its record's", `{"uuid":"u2","message":{"content":[{"text":"Hi.","type":"text"}],"model":"m","role":"assistant","usage":{"input_tokens":7,"output_tokens":2}},"type":"assistant",` + ts + `}`,
			sub, []protocol.Event{subEv(protocol.Event{Kind: "text", Text: "Hi.", Usage: &protocol.Usage{Message: "u2", Model: "m", Tokens: claude.Tokens{Input: 7, Output: 2}}})}},
		{"an API error's usage not counted", `{"type":"assistant","uuid":"u3",` + ts + `,"message":{"id":"x","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 500"}],"usage":{"input_tokens":0,"output_tokens":0}},"isApiErrorMessage":true}`,
			sub, []protocol.Event{subEv(protocol.Event{Kind: "error", Text: "API Error: 500", IsError: true})}},
		{"blank text block", `{"message":{"content":[{"text":"\n\n","type":"text"}],"model":"m","role":"assistant"},"type":"assistant",` + ts + `}`,
			Source{}, nil},
		{"thinking", `{"message":{"content":[{"signature":"sig","thinking":"Let me weigh this.","type":"thinking"}],"model":"m","role":"assistant"},"type":"assistant",` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "thinking", Text: "Let me weigh this."})}},
		{"redacted thinking", `{"message":{"content":[{"type":"redacted_thinking","data":"xyz"}],"model":"m","role":"assistant"},"type":"assistant",` + ts + `}`,
			Source{}, nil},
		{"tool use", `{"message":{"content":[{"id":"toolu_1","input":{"command":"echo hi","description":"Run"},"name":"Bash","type":"tool_use"}],"model":"m","role":"assistant","stop_reason":"tool_use"},"type":"assistant",` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "tool_use", Tool: "Bash", ToolID: "toolu_1", Input: json.RawMessage(`{"command":"echo hi","description":"Run"}`)})}},
		{"tool result string", `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"hello from bash","is_error":false}]},` + ts + `,"toolUseResult":{"stdout":"hello from bash"}}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "tool_result", ToolID: "toolu_1", Text: "hello from bash"})}},
		{"tool result error", `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"Exit code 3\noops","is_error":true,"tool_use_id":"toolu_2"}]},` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "tool_result", ToolID: "toolu_2", Text: "Exit code 3\noops", IsError: true})}},
		{"tool result list with an image", `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_3","content":[{"type":"text","text":"first"},{"type":"image","source":{"data":"AAAA"}},{"type":"tool_reference","tool_name":"X"},{"type":"text","text":"last"}]}]},` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "tool_result", ToolID: "toolu_3", Text: "first\n[image]\nlast"})}},
		{"interrupt while streaming", `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},` + ts + `,"interruptedMessageId":"msg_1"}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "turn_end", Reason: "interrupted"})}},
		{"interrupt during a tool", `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]},` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "turn_end", Reason: "interrupted"})}},
		{"partial text of an aborted stream", `{"message":{"content":[{"text":"This is a long ","type":"text"}],"model":"m","role":"assistant","stop_reason":null},"type":"assistant",` + ts + `,"isAbortedMidStream":true}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "text", Text: "This is a long "})}},
		{"api error in the main transcript", `{"type":"assistant",` + ts + `,"message":{"id":"x","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 400 Bad request"}]},"error":"unknown","isApiErrorMessage":true}`,
			Source{}, nil},
		{"api error in a subagent", `{"type":"assistant",` + ts + `,"message":{"model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 500"}]},"isApiErrorMessage":true}`,
			sub, []protocol.Event{subEv(protocol.Event{Kind: "error", Text: "API Error: 500", IsError: true})}},
		{"no response requested", `{"type":"assistant",` + ts + `,"message":{"model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","content":[{"type":"text","text":"No response requested."}]},"isApiErrorMessage":false,"madeBy":"other"}`,
			Source{}, nil},
		{"task notification", `{"type":"user","message":{"role":"user","content":"<task-notification>\n<task-id>a49</task-id>\n<tool-use-id>toolu_agent</tool-use-id>\n<status>completed</status>\n<summary>Agent \"Count files\" finished</summary>\n<result>There are 0 files.</result>\n</task-notification>"},` + ts + `,"origin":{"kind":"task-notification","producer":"session-task"}}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "turn_start"}), ev(protocol.Event{Kind: "note", Text: `Agent "Count files" finished`, Parent: "toolu_agent"})}},
		{"another origin", `{"type":"user","message":{"role":"user","content":"Wake up and check the build"},` + ts + `,"origin":{"kind":"scheduled"}}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "turn_start"}), ev(protocol.Event{Kind: "note", Text: "Wake up and check the build"})}},
		{"meta user record", `{"type":"user","message":{"role":"user","content":"<system-reminder>\n<tools-used-before-summary>Bash</tools-used-before-summary>\n</system-reminder>"},"isMeta":true,` + ts + `}`,
			Source{}, nil},
		{"compact summary", `{"type":"user","message":{"role":"user","content":"This session is being continued from a previous conversation"},"isVisibleInTranscriptOnly":true,"isCompactSummary":true,` + ts + `}`,
			Source{}, nil},
		{"subagent's task prompt", `{"agentId":"a49","type":"user","message":{"role":"user","content":"SUBAGENT: count the files here"},` + ts + `}`,
			sub, nil},
		{"subagent's tool use", `{"agentId":"a49","message":{"content":[{"id":"toolu_s","input":{"command":"ls"},"name":"Bash","type":"tool_use"}],"model":"m","role":"assistant"},"type":"assistant",` + ts + `}`,
			sub, []protocol.Event{subEv(protocol.Event{Kind: "tool_use", Tool: "Bash", ToolID: "toolu_s", Input: json.RawMessage(`{"command":"ls"}`)})}},
		{"subagent interrupted", `{"agentId":"a49","type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},` + ts + `}`,
			sub, []protocol.Event{subEv(protocol.Event{Kind: "subagent_end", Reason: "interrupted"})}},
		{"subagent stopped by a hook", `{"parentUuid":"7e","isSidechain":true,"agentId":"a49","attachment":{"type":"hook_stopped_continuation","message":"Stopped by its Creator","hookName":"PreToolUse:Bash","toolUseID":"toolu_s","hookEvent":"PreToolUse"},"type":"attachment",` + ts + `,"rendered":[{"content":"<system-reminder>\nPreToolUse:Bash hook stopped continuation: Stopped by its Creator\n</system-reminder>"}],"renderedRole":"system"}`,
			sub, []protocol.Event{subEv(protocol.Event{Kind: "subagent_end", Reason: "stopped", Text: "Stopped by its Creator"})}},
		{"main Turn's hook stopped continuation", `{"attachment":{"type":"hook_stopped_continuation","message":"no","hookName":"PostToolUse:Bash","hookEvent":"PostToolUse"},"type":"attachment",` + ts + `}`,
			Source{}, nil},
		{"queued prompt", `{"parentUuid":"x","isSidechain":false,"attachment":{"type":"queued_command","prompt":"Also this","commandMode":"prompt","origin":{"kind":"human"}},"type":"attachment",` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "prompt", Text: "Also this"})}},
		{"queued task notification", `{"attachment":{"type":"queued_command","prompt":"<task-notification><tool-use-id>toolu_b</tool-use-id><summary>Background command \"sleep\" completed</summary></task-notification>","commandMode":"task-notification","origin":{"kind":"task-notification"}},"type":"attachment",` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "note", Text: `Background command "sleep" completed`, Parent: "toolu_b"})}},
		{"other attachment", `{"parentUuid":"x","attachment":{"type":"date","date":"2026-11-30"},"type":"attachment",` + ts + `}`,
			Source{}, nil},
		{"bash mode input", `{"type":"user","message":{"role":"user","content":"<bash-input>echo bang</bash-input>"},` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "prompt", Text: "!echo bang"})}},
		{"bash mode output", `{"type":"user","message":{"role":"user","content":"<bash-stdout>bang</bash-stdout><bash-stderr>warn\n</bash-stderr>"},` + ts + `,"turnOrigin":"human"}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "tool_result", Tool: "Bash", Text: "bang\nwarn"})}},
		{"slash command", `{"type":"user","message":{"role":"user","content":"<command-name>/compact</command-name>\n            <command-message>compact</command-message>\n            <command-args>keep the plan</command-args>"},` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "prompt", Text: "/compact keep the plan"})}},
		{"local command output", `{"type":"user","message":{"role":"user","content":"<local-command-stdout>\u001b[2mCompacted (ctrl+o to see full summary)\u001b[22m</local-command-stdout>"},` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "note", Text: "Compacted (ctrl+o to see full summary)"})}},
		{"local command as a system record", `{"type":"system","subtype":"local_command","content":"<command-name>/context</command-name>\n            <command-message>context</command-message>\n            <command-args></command-args>","level":"info",` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "prompt", Text: "/context"})}},
		{"compaction", `{"logicalParentUuid":"x","type":"system","subtype":"compact_boundary","content":"Conversation compacted","level":"info","compactMetadata":{"trigger":"auto","preTokens":13190},` + ts + `}`,
			Source{}, []protocol.Event{ev(protocol.Event{Kind: "note", Text: "Conversation compacted"})}},
		{"compaction a person asked for", `{"type":"system","subtype":"compact_boundary","content":"Conversation compacted","compactMetadata":{"trigger":"manual"},` + ts + `}`,
			Source{}, nil},
		{"turn duration", `{"type":"system","subtype":"turn_duration","durationMs":365,` + ts + `}`, Source{}, []protocol.Event{ev(protocol.Event{Kind: "turn_end", Reason: "done"})}},
		{"a subagent's turn duration", `{"type":"system","subtype":"turn_duration","durationMs":365,` + ts + `}`, Source{Agent: "a1", Parent: "toolu_1"}, nil},
		{"api request noise", `{"type":"api-request","sessionId":"s","id":"x",` + ts + `,"params":{"model":"m"}}`, Source{}, nil},
		{"a record type never seen", `{"type":"hologram","content":"[Request interrupted by user]",` + ts + `}`, Source{}, nil},
		{"no timestamp", `{"type":"user","message":{"role":"user","content":"hi"},"origin":{"kind":"human"}}`,
			Source{}, []protocol.Event{{Kind: "turn_start"}, {Kind: "prompt", Text: "hi"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.line), tt.src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if g, w := mustJSON(t, got), mustJSON(t, tt.want); g != w {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}

func TestParseRefusesWhatIsNotARecord(t *testing.T) {
	for _, line := range []string{``, `{"type":"user",`, `[1,2]`, `"just a string"`, `{"type":"user","message":{"content":42}}`} {
		if evs, err := Parse([]byte(line), Source{}); err == nil {
			t.Errorf("Parse(%q): got %v and no error, want an error", line, evs)
		}
	}
}

func TestParseCapsLongOutputAndInput(t *testing.T) {
	long := strings.Repeat("é", MaxText) // two bytes each: twice MaxText
	line, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user",
		"content": []any{map[string]any{"type": "tool_result", "tool_use_id": "t", "content": long}}}})
	evs, err := Parse(line, Source{})
	if err != nil || len(evs) != 1 {
		t.Fatalf("got %d events (%v), want 1", len(evs), err)
	}
	text := evs[0].Text
	want := strings.Repeat("é", MaxText/2) + "\n[kndl: 65536 more bytes not shown]"
	if text != want {
		t.Errorf("capped text: got %d bytes ending %q, want %d bytes ending %q", len(text), text[len(text)-40:], len(want), want[len(want)-40:])
	}

	content := strings.Repeat("x", 100<<10)
	line, _ = json.Marshal(map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "model": "m",
		"content": []any{map[string]any{"type": "tool_use", "id": "t", "name": "Write",
			"input": map[string]any{"file_path": "/workspace/big.txt", "content": content}}}}})
	evs, err = Parse(line, Source{})
	if err != nil || len(evs) != 1 {
		t.Fatalf("got %d events (%v), want 1", len(evs), err)
	}
	var input map[string]string
	if err := json.Unmarshal(evs[0].Input, &input); err != nil {
		t.Fatalf("capped input is not JSON: %v", err)
	}
	if input["file_path"] != "/workspace/big.txt" || input["content"] != strings.Repeat("x", 4096)+"\n[kndl: 98304 more bytes not shown]" {
		t.Errorf("capped input: got path %q, content of %d bytes", input["file_path"], len(input["content"]))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
