package runner

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
)

// subagentEvents are the subagent Events sent so far, in order.
func (r *Runner) subagentEvents() []protocol.Event {
	var out []protocol.Event
	for _, m := range r.sent() {
		for _, e := range m.Events {
			if e.Kind == protocol.EventSubagentStart || e.Kind == protocol.EventSubagentEnd {
				out = append(out, e)
			}
		}
	}
	return out
}

func launched(toolID, agent string) string {
	return `{"hook_event_name":"PostToolUse","tool_name":"Agent","tool_use_id":"` + toolID + `","tool_input":{"description":"d","prompt":"p"},"tool_response":{"status":"async_launched","agentId":"` + agent + `"}}`
}

// TestASubagentStartNamesTheAgentCallThatStartedIt: SubagentStart before
// or after its Agent call's PostToolUse, the subagent_start carries that
// call as its parent; one whose call never says so goes without, after
// holdMax; SubagentStop's subagent_end carries it too.
func TestASubagentStartNamesTheAgentCallThatStartedIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &Runner{sessions: map[string]*session{}, log: slog.New(slog.DiscardHandler)}
		s := r.newSession("s1")
		r.sessions["s1"] = s
		for _, ev := range []string{
			`{"hook_event_name":"PreToolUse","tool_name":"Agent","tool_use_id":"toolu_a","tool_input":{}}`,
			`{"hook_event_name":"SubagentStart","agent_id":"a1","agent_type":"general-purpose"}`,
			launched("toolu_b", "a2"),
			launched("toolu_a", "a1"),
			`{"hook_event_name":"SubagentStart","agent_id":"a2","agent_type":"Explore"}`,
			`{"hook_event_name":"SubagentStart","agent_id":"a3","agent_type":"Plan"}`,
			`{"hook_event_name":"SubagentStop","agent_id":"a1"}`,
		} {
			if answer, err := r.hook(context.Background(), "s1", []byte(ev)); err != nil || answer != nil {
				t.Fatalf("hook %s: %s, %v; want no answer", ev, answer, err)
			}
		}
		testenv.Eventually(t, 3*holdMax, "every subagent Event sent", func() bool { return len(r.subagentEvents()) == 4 })
		want := map[string]protocol.Event{
			"subagent_start a1": {Agent: "a1", Parent: "toolu_a", Text: "general-purpose"},
			"subagent_start a2": {Agent: "a2", Parent: "toolu_b", Text: "Explore"},
			"subagent_start a3": {Agent: "a3", Text: "Plan"},
			"subagent_end a1":   {Agent: "a1", Parent: "toolu_a"},
		}
		for _, e := range r.subagentEvents() {
			w, ok := want[e.Kind+" "+e.Agent]
			if !ok || e.Parent != w.Parent || e.Text != w.Text {
				t.Errorf("sent %+v, want %+v", e, w)
			}
			delete(want, e.Kind+" "+e.Agent)
		}
		if len(want) > 0 {
			t.Errorf("not sent: %v", want)
		}
	})
}

// TestAStoppedSubagentIsAnsweredAtItsNextToolCall: once the Hub asks, the
// subagent's next PreToolUse is answered continue false with the tool
// denied (or its PostToolUse with continue false), once; the main
// conversation's tool calls and other subagents' go on unanswered.
func TestAStoppedSubagentIsAnsweredAtItsNextToolCall(t *testing.T) {
	r := &Runner{sessions: map[string]*session{}, log: slog.New(slog.DiscardHandler)}
	s := r.newSession("s1")
	r.sessions["s1"] = s
	if _, err := r.session("s2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a stop for a Session not running here: %v, want not found", err)
	}
	pre := func(agent string) string {
		return `{"hook_event_name":"PreToolUse","agent_id":"` + agent + `","tool_name":"Bash","tool_use_id":"toolu_x","tool_input":{"command":"ls"}}`
	}
	post := func(agent string) string {
		return `{"hook_event_name":"PostToolUse","agent_id":"` + agent + `","tool_name":"Bash","tool_use_id":"toolu_x","tool_response":{"stdout":""}}`
	}
	answer := func(ev string) map[string]any {
		t.Helper()
		b, err := r.hook(context.Background(), "s1", []byte(ev))
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			return nil
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("answer %s: %v", b, err)
		}
		return m
	}
	for _, tt := range []struct {
		name, first, again string
		deny               bool
	}{
		{"at its PreToolUse", pre("a1"), pre("a1"), true},
		{"at its PostToolUse", post("a1"), pre("a1"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s.subagents.askStop("a1")
			for _, other := range []string{pre(""), post(""), pre("a2"), post("a2")} {
				if a := answer(other); a != nil {
					t.Fatalf("%s answered %v, want nothing", other, a)
				}
			}
			a := answer(tt.first)
			if a == nil || a["continue"] != false || a["stopReason"] != stopReason {
				t.Fatalf("the stopped subagent's hook answered %v, want continue false", a)
			}
			hso, _ := a["hookSpecificOutput"].(map[string]any)
			if denied := hso["permissionDecision"] == "deny"; denied != tt.deny {
				t.Fatalf("answer %v: tool denied %v, want %v", a, denied, tt.deny)
			}
			if a := answer(tt.again); a != nil {
				t.Fatalf("answered again: %v, want once", a)
			}
		})
	}
}

// TestAQuickSubagentsEndGoesAfterItsStart: a subagent that ends before its
// start is sent (its Agent call's PostToolUse late, or the call not yet in
// the transcript) has its end sent after its start, both under the call,
// whether the start waits for its parent, for its call's batch, or for the
// hold's end; a watcher that took the end first would list it running for
// good.
func TestAQuickSubagentsEndGoesAfterItsStart(t *testing.T) {
	call := func(id string) protocol.Event {
		return protocol.Event{Kind: protocol.EventToolUse, Tool: "Agent", ToolID: id}
	}
	for _, c := range []struct {
		name   string
		hooks  []string
		then   func(r *Runner, s *session)
		parent string
	}{
		{"its parent named after its end", []string{
			`{"hook_event_name":"SubagentStart","agent_id":"a1","agent_type":"general-purpose"}`,
			`{"hook_event_name":"SubagentStop","agent_id":"a1"}`,
		}, func(r *Runner, s *session) {
			s.transcript([]protocol.Event{{Kind: protocol.EventText, Text: "other"}}, map[string]int64{"s1.jsonl": 1})
			r.hook(context.Background(), "s1", []byte(launched("toolu_a", "a1")))
			s.transcript([]protocol.Event{call("toolu_a")}, map[string]int64{"s1.jsonl": 2})
		}, "toolu_a"},
		{"its call in a later batch", []string{
			launched("toolu_a", "a1"),
			`{"hook_event_name":"SubagentStart","agent_id":"a1","agent_type":"general-purpose"}`,
			`{"hook_event_name":"SubagentStop","agent_id":"a1"}`,
		}, func(r *Runner, s *session) {
			s.transcript([]protocol.Event{{Kind: protocol.EventText, Text: "other"}}, map[string]int64{"s1.jsonl": 1})
			s.transcript([]protocol.Event{call("toolu_a")}, map[string]int64{"s1.jsonl": 2})
		}, "toolu_a"},
		{"its parent never named", []string{
			`{"hook_event_name":"SubagentStart","agent_id":"a1","agent_type":"general-purpose"}`,
			`{"hook_event_name":"SubagentStop","agent_id":"a1"}`,
		}, func(r *Runner, s *session) {
			s.transcript([]protocol.Event{{Kind: protocol.EventText, Text: "other"}}, map[string]int64{"s1.jsonl": 1})
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &Runner{sessions: map[string]*session{}, log: slog.New(slog.DiscardHandler)}
				s := r.newSession("s1")
				r.sessions["s1"] = s
				for _, ev := range c.hooks {
					if _, err := r.hook(context.Background(), "s1", []byte(ev)); err != nil {
						t.Fatal(err)
					}
				}
				c.then(r, s)
				testenv.Eventually(t, 3*holdMax, "the start and the end sent", func() bool { return len(r.subagentEvents()) == 2 })
				synctest.Wait()
				evs := r.subagentEvents()
				if len(evs) != 2 || evs[0].Kind != protocol.EventSubagentStart || evs[1].Kind != protocol.EventSubagentEnd ||
					evs[0].Parent != c.parent || evs[1].Parent != c.parent {
					t.Fatalf("sent %+v, want the start then the end, under %q", evs, c.parent)
				}
			})
		})
	}
}
