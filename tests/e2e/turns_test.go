package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// prompt queues a prompt and returns it.
func (s *System) prompt(id, text string) store.Prompt {
	s.t.Helper()
	var p store.Prompt
	s.Do(http.MethodPost, "/api/sessions/"+id+"/prompts", api.PromptRequest{Text: text}, &p)
	return p
}

// turnEnds waits for the n-th turn_end of a Session.
func (s *System) turnEnds(id string, n int) {
	s.t.Helper()
	s.WaitEvent(id, testenv.WaitMedium, fmt.Sprintf("turn end number %d", n), func(e protocol.Event) bool {
		if e.Kind != protocol.EventTurnEnd {
			return false
		}
		count := 0
		for _, x := range s.Events(id) {
			if x.Kind == protocol.EventTurnEnd && x.Seq <= e.Seq {
				count++
			}
		}
		return count >= n
	})
}

// kinds lists Events' kinds (with the tool for tool calls) that match keep.
func kinds(evs []protocol.Event, keep ...string) []string {
	var out []string
	for _, e := range evs {
		if slices.Contains(keep, e.Kind) {
			k := e.Kind
			if e.Tool != "" {
				k += ":" + e.Tool
			}
			out = append(out, k)
		}
	}
	return out
}

// userPrompts lists the human prompts the model received, in order.
func userPrompts(m *testkit.Anthropic) []string {
	var out []string
	for _, r := range m.Turns() {
		if texts := r.LastUser().Texts(); len(texts) > 0 {
			out = append(out, texts[len(texts)-1])
		}
	}
	return out
}

func TestBashTurnCreatesAFileAndTheTranscriptShowsIt(t *testing.T) {
	s := Start(t)
	s.Model.On(testkit.PromptContains("make the file"), testkit.Bash("echo made by claude > /workspace/made.txt"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Done: the file is made."))
	v := s.NewSession(s.Repo(), "please make the file")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the answer after the tool", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && strings.Contains(e.Text, "the file is made")
	})
	b, err := os.ReadFile(filepath.Join(s.Home, "sessions", v.ID, "workspace", "made.txt"))
	if err != nil || string(b) != "made by claude\n" {
		t.Fatalf("the Workspace's made.txt = %q, %v", b, err)
	}
	evs := s.Events(v.ID)
	got := kinds(evs, protocol.EventPrompt, protocol.EventToolUse, protocol.EventToolResult, protocol.EventText)
	want := []string{"prompt", "tool_use:Bash", "tool_result", "text"}
	if !slices.Equal(got, want) {
		t.Fatalf("transcript = %v, want %v\n%s", got, want, dump(evs))
	}
	var use, result protocol.Event
	for _, e := range evs {
		switch e.Kind {
		case protocol.EventToolUse:
			use = e
		case protocol.EventToolResult:
			result = e
		}
	}
	if !strings.Contains(string(use.Input), "made.txt") || result.ToolID != use.ToolID || result.IsError {
		t.Fatalf("tool call %+v and result %+v do not pair", use, result)
	}
}

func TestSecondPromptContinuesTheConversation(t *testing.T) {
	s := Start(t)
	v := s.Ready("remember the word kumquat", "I will remember kumquat.")
	s.Model.On(testkit.PromptContains("which word"), testkit.Text("kumquat"))
	s.prompt(v.ID, "which word did I ask you to remember?")
	s.turnEnds(v.ID, 2)
	turns := s.Model.Turns()
	last := turns[len(turns)-1]
	var all []string
	for _, m := range last.Params.Messages {
		all = append(all, m.Texts()...)
	}
	joined := strings.Join(all, "\n")
	if !strings.Contains(joined, "remember the word kumquat") || !strings.Contains(joined, "I will remember kumquat.") {
		t.Fatalf("the second request lacks the first turn: %q", joined)
	}
}

func TestPromptArrivesByteForByte(t *testing.T) {
	s := Start(t)
	v := s.Ready("first", "ok")
	tests := []struct{ name, text, want string }{
		{"multi-line with quotes and a backslash", "line one of three\n  \"double\" and 'single' quotes\nback\\slash and $HOME and ~ «ünïcode» ✓", ""},
		{"long", strings.Repeat("All work and no play makes a long prompt. ", 60) + "THE END", ""},
		// A blank braille pattern in front keeps them from being commands.
		{"leading slash is text", "/help is not a command here", "\u2800/help is not a command here"},
		{"leading bang is text", "!echo not bash mode", "\u2800!echo not bash mode"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == "" {
				want = tt.text
			}
			s.Model.On(testkit.PromptContains(want), testkit.Text("received"))
			s.prompt(v.ID, tt.text)
			s.turnEnds(v.ID, i+2)
			got := userPrompts(s.Model)
			if last := got[len(got)-1]; last != want {
				t.Fatalf("the model received %q, want %q", last, want)
			}
		})
	}
}

func TestQueuedPromptsGoAfterTheTurnInOrderAndCancelledNever(t *testing.T) {
	s := Start(t)
	s.Model.On(testkit.PromptContains("take your time"), testkit.Bash("echo start; sleep 4; echo end"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("slept"))
	s.Model.On(testkit.PromptContains("queued"), testkit.Text("noted"))
	v := s.NewSession(s.Repo(), "take your time")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the long tool", kind(protocol.EventToolUse))
	one := s.prompt(v.ID, "queued one")
	cancelled := s.prompt(v.ID, "queued two, cancelled")
	three := s.prompt(v.ID, "queued three")
	if code := s.Do(http.MethodDelete, "/api/sessions/"+v.ID+"/prompts/"+cancelled.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("cancel: %d", code)
	}
	// Reordered and edited from the CLI while the long Turn runs.
	if out, errOut, code := s.kndl("", "queue", v.ID, "mv", three.ID, "1"); code != 0 {
		t.Fatalf("kndl queue mv: exit %d %s %s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "queue", v.ID, "edit", one.ID, "queued one, edited"); code != 0 {
		t.Fatalf("kndl queue edit: exit %d %s %s", code, out, errOut)
	}
	if out, _, _ := s.kndl("", "queue", v.ID); !strings.Contains(out, "1  "+three.ID) || !strings.Contains(out, "2  "+one.ID) {
		t.Fatalf("kndl queue:\n%s\nwant three first, then one", out)
	}
	s.turnEnds(v.ID, 3)
	got := userPrompts(s.Model)
	var humans []string
	for _, p := range got {
		if strings.Contains(p, "queued") || strings.Contains(p, "take your time") {
			humans = append(humans, p)
		}
	}
	want := []string{"take your time", "queued three", "queued one, edited"}
	if !slices.Equal(humans, want) {
		t.Fatalf("the model received %q, want %q", humans, want)
	}
	// Each queued prompt was its own Turn, after the long one.
	var sv api.SessionView
	s.Do(http.MethodGet, "/api/sessions/"+v.ID, nil, &sv)
	if len(sv.Queue) != 0 {
		t.Fatalf("queue not empty: %+v", sv.Queue)
	}
}

func TestStopTurnInterruptsALongTool(t *testing.T) {
	s := Start(t)
	s.Model.On(testkit.PromptContains("run forever"), testkit.Bash("echo start; sleep 601; echo end"))
	v := s.NewSession(s.Repo(), "run forever")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the long tool", kind(protocol.EventToolUse))
	testenv.Eventually(t, testenv.WaitShort, "sleep runs in the Sandbox", func() bool {
		out, _ := s.Exec(v.ID, "pgrep", "-x", "sleep")
		return strings.TrimSpace(out) != ""
	})
	start := time.Now()
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/stop-turn", nil, nil); code != http.StatusNoContent {
		t.Fatalf("stop-turn: %d", code)
	}
	e := s.WaitEvent(v.ID, testenv.WaitMedium, "the interrupted turn's end", kind(protocol.EventTurnEnd))
	if e.Reason != "interrupted" {
		t.Fatalf("turn ended with %q, want interrupted", e.Reason)
	}
	t.Logf("interrupted %v after stop-turn", time.Since(start))
	testenv.Eventually(t, testenv.WaitShort, "the tool's process is killed", func() bool {
		out, _ := s.Exec(v.ID, "pgrep", "-x", "sleep")
		return strings.TrimSpace(out) == ""
	})
}

// TestACommandIsDeliveredOnceTypedAndTheQueueGoesOn: a slash command fires
// no UserPromptSubmit, so it counts as delivered once typed; an unknown one
// too; the prompt after them still goes.
func TestACommandIsDeliveredOnceTypedAndTheQueueGoesOn(t *testing.T) {
	s := Start(t)
	v := s.Ready("before the commands", "ok")
	for _, cmd := range []string{"/context", "/no-such-command here"} {
		var p store.Prompt
		s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/prompts", api.PromptRequest{Text: cmd, IsCommand: true}, &p)
	}
	s.Model.On(testkit.PromptContains("after the commands"), testkit.Text("still here"))
	s.prompt(v.ID, "after the commands")
	s.WaitEvent(v.ID, testenv.WaitMedium, "the answer after the commands", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "still here"
	})
	if q := s.state(v.ID).Queue; len(q) != 0 {
		t.Fatalf("prompts still waiting: %+v", q)
	}
	if got := userPrompts(s.Model); got[len(got)-1] != "after the commands" {
		t.Fatalf("the model's last prompt = %q", got[len(got)-1])
	}
}
