package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
)

// agentCall is the model's Agent tool call, as its tool_use Event.
func agentCall(id, description, prompt, typ string) api.Event {
	in, _ := json.Marshal(map[string]string{"description": description, "prompt": prompt, "subagent_type": typ})
	return api.Event{Kind: protocol.EventToolUse, Tool: "Agent", ToolID: id, Input: in}
}

// TestShowListsTheSubagents: each subagent with its type, its Agent call's
// description (or its prompt's first words) and whether it runs, was asked
// to stop, finished, was stopped or interrupted, with how to stop one while
// any runs; --json carries the same list.
func TestShowListsTheSubagents(t *testing.T) {
	h := newFakeHub(t, session("s1", api.Active, "turn", "", false))
	h.events["s1"] = []api.Event{
		agentCall("toolu_a", "Count the files", "count them", "general-purpose"),
		agentCall("toolu_b", "", "Read every file in the repository and summarise it", "Explore"),
		agentCall("toolu_c", "Plan it", "plan", "Plan"),
		agentCall("toolu_d", "Check links", "check", "general-purpose"),
		agentCall("toolu_e", "Slow one", "wait", "general-purpose"),
		{Kind: protocol.EventSubagentStart, Agent: "a1", Parent: "toolu_a", Text: "general-purpose"},
		{Kind: protocol.EventToolUse, Tool: "Bash", ToolID: "toolu_s", Agent: "a2", Parent: "toolu_b"}, // before its start
		{Kind: protocol.EventSubagentStart, Agent: "a2", Text: "Explore"},
		{Kind: protocol.EventSubagentStart, Agent: "a3", Parent: "toolu_c", Text: "Plan"},
		{Kind: protocol.EventSubagentStart, Agent: "a4", Parent: "toolu_d", Text: "general-purpose"},
		{Kind: protocol.EventSubagentStart, Agent: "a5", Parent: "toolu_e", Text: "general-purpose"},
		{Kind: protocol.EventSubagentStop, Agent: "a1", Parent: "toolu_a", Text: "Its Creator asked it to stop: it stops at its next tool call."},
		{Kind: protocol.EventSubagentStop, Agent: "a3", Parent: "toolu_c"},
		{Kind: protocol.EventSubagentEnd, Agent: "a3", Parent: "toolu_c", Reason: protocol.SubagentStopped},
		{Kind: protocol.EventSubagentEnd, Agent: "a4", Parent: "toolu_d"},
		{Kind: protocol.EventSubagentEnd, Agent: "a5", Parent: "toolu_e", Reason: protocol.SubagentInterrupted},
	}
	out, errOut, code := kndl("show", "s1")
	if code != 0 {
		t.Fatalf("kndl show: exit %d, %s", code, errOut)
	}
	_, list, ok := strings.Cut(out, "\nSubagents:\n")
	if !ok {
		t.Fatalf("no subagents listed:\n%s", out)
	}
	want := [][]string{
		{"a1", "general-purpose", "stopping", "Count the files"},
		{"a2", "Explore", "running", "Read every file in the repository and summarise it"},
		{"a3", "Plan", "stopped", "Plan it"},
		{"a4", "general-purpose", "finished", "Check links"},
		{"a5", "general-purpose", "interrupted", "Slow one"},
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	for i, w := range want {
		if got := strings.Fields(lines[i]); len(got) < 4 || strings.Join(got[:3], " ") != strings.Join(w[:3], " ") || strings.Join(got[3:], " ") != w[3] {
			t.Errorf("row %q, want %q", lines[i], w)
		}
	}
	if !strings.Contains(list, "kndl stop-subagent s1 AGENT_ID") {
		t.Errorf("no word on how to stop one:\n%s", list)
	}
	if !strings.Contains(out, "-- subagent a3 stopped") || !strings.Contains(out, "-- subagent a1: Its Creator asked it to stop") {
		t.Errorf("the transcript does not say how each ended:\n%s", out)
	}

	out, _, _ = kndl("show", "--json", "s1")
	var v struct {
		Subagents []subagent `json:"subagents"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Subagents) != 5 || v.Subagents[1].Parent != "toolu_b" || v.Subagents[2].State != "stopped" {
		t.Fatalf("kndl show --json subagents: %v %+v", err, v.Subagents)
	}
}

// TestStopSubagentAsksTheHub: it sends its one request and says what
// happens next; a missing argument is a usage error, the Hub's refusal
// the error.
func TestStopSubagentAsksTheHub(t *testing.T) {
	askTheHub(t, []hubChange{
		{[]string{"stop-subagent", "s1", "a1"}, "POST /api/sessions/s1/subagents/a1/stop", "Asked subagent a1 to stop: it stops at its next tool call", 0},
		{[]string{"stop-subagent", "s1"}, "", "", 2},
		{[]string{"stop-subagent", "nope", "a1"}, "", "", 1},
	})
}
