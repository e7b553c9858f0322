package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// prompt queues a prompt and returns it.
func (s *System) prompt(id, text string) api.Prompt {
	s.t.Helper()
	var p api.Prompt
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

// pairedTool checks that the last tool call in evs has input holding
// input, and that the last tool result is its own and no error.
func pairedTool(t *testing.T, evs []protocol.Event, input string) {
	t.Helper()
	var use, result protocol.Event
	for _, e := range evs {
		switch e.Kind {
		case protocol.EventToolUse:
			use = e
		case protocol.EventToolResult:
			result = e
		}
	}
	if !strings.Contains(string(use.Input), input) || result.ToolID != use.ToolID || result.IsError {
		t.Fatalf("tool call %+v and result %+v do not pair\n%s", use, result, dump(evs))
	}
}

// TestPromptsReachOneConversationWhole: in one Session, the Turns a
// person's prompts start in a row: the second prompt continues the
// conversation; each prompt arrives byte for byte, with what typing or
// pasting would change, and where Claude Code itself changes a prompt
// (CR, trailing whitespace, invisible characters: docs/claude-code.md)
// Claude Code's change arrived and the history says so in a note; a
// prompt right after a stop-turn arrives whole; a command counts as
// delivered once typed and the queue goes on. One Session, as a person
// has it: each part starts where the one before left it.
func TestPromptsReachOneConversationWhole(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("remember the word kumquat", "I will remember kumquat.")
	t.Run("the second prompt continues the conversation", func(t *testing.T) { s.secondPromptContinues(t, v.ID) })
	t.Run("byte for byte", func(t *testing.T) { s.promptsArrive(t, v.ID, 3, promptCases()) })
	t.Run("right after stop-turn", func(t *testing.T) { s.promptRightAfterStopTurnArrivesWhole(t, v.ID, 2+len(promptCases())) })
	t.Run("a command is delivered once typed", func(t *testing.T) { s.commandDeliveredOnceTyped(t, v.ID) })
}

// secondPromptContinues sends the Session made by Ready("remember the word
// kumquat") its second prompt, and checks the model got the first Turn
// with it.
func (s *System) secondPromptContinues(t *testing.T, id string) {
	s.Model.On(testkit.PromptContains("which word"), testkit.Text("kumquat"))
	s.prompt(id, "which word did I ask you to remember?")
	s.turnEnds(id, 2)
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

// promptCase is a prompt and what the model must receive of it: want, or
// the text itself when want is empty; note is what the Session's history
// must say right after it, if anything.
type promptCase struct{ name, text, want, note string }

// promptCases are prompts with what typing or pasting would change, and
// those Claude Code changes itself (CR, trailing whitespace, invisible
// characters: docs/claude-code.md).
func promptCases() []promptCase {
	var long strings.Builder
	for i := 0; long.Len() < api.MaxPromptBytes; i++ {
		fmt.Fprintf(&long, "%d\tcolumn\t«ünïcode» 𝄞 e\u0301 ✓  \n", i)
	}
	body := long.String()[:api.MaxPromptBytes-len("END")]
	for !utf8.ValidString(body) {
		body = body[:len(body)-1]
	}
	body += "END"
	return []promptCase{
		{"multi-line with quotes and a backslash", "line one of three\n  \"double\" and 'single' quotes\nback\\slash and $HOME and ~ «ünïcode» ✓", "", ""},
		{"tabs", "col1\tcol2\t\tcol3\n\tindented by a tab", "", ""},
		{"leading whitespace", "\n  \t leading whitespace", "", ""},
		{"astral plane", "𝄞 😀 𠜎 👨\u200d👩\u200d👧 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f 🇩🇰 ❤\ufe0f", "", ""},
		{"combining marks", "e\u0301 a\u0308 n\u0303 \u1100\u1161 Z\u0351\u0307 decomposed", "", ""},
		{"64 KiB", body, "", ""},
		// A blank braille pattern in front keeps them from being commands.
		{"leading slash is text", "/help is not a command here", "\u2800/help is not a command here", ""},
		{"leading bang is text", "!echo not bash mode", "\u2800!echo not bash mode", ""},
		// What Claude Code changes itself, whatever delivers the prompt.
		{"CR and CRLF", "one\r\ntwo\rthree", "one\ntwo\nthree", "2 carriage returns (CR or CR LF) became line feeds"},
		{"trailing whitespace", "trailing spaces and newlines \t\n\n", "trailing spaces and newlines", "4 trailing whitespace characters were removed"},
		{"invisible characters", "zero\u200bwidth and\u200e marks", "zerowidth and marks", "2 invisible or control characters were removed"},
	}
}

// promptsArrive sends each case to the Session, whose next Turn is number
// turn, and checks what the model received, byte for byte, and the notes
// the Session's history has right after each prompt.
func (s *System) promptsArrive(t *testing.T, id string, turn int, cases []promptCase) {
	for i, tt := range cases {
		n := turn + i
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == "" {
				want = tt.text
			}
			s.Model.On(func(r *testkit.Request) bool { u := r.LastUser().Texts(); return len(u) > 0 && u[len(u)-1] == want }, testkit.Text("received"))
			start, logged := time.Now(), len(s.logText())
			s.prompt(id, tt.text)
			s.turnEnds(id, n)
			t.Logf("%d bytes: turn ended %v after the prompt", len(tt.text), time.Since(start))
			got := userPrompts(s.Model)
			if last := got[len(got)-1]; last != want {
				// Once, at load 14-18, 64 KiB arrived changed in the
				// middle: what the history noted of the prompt Claude
				// Code took, and how the Runner typed it, tell where.
				var notes []string
				for _, e := range s.Events(id) {
					if e.Kind == protocol.EventNote {
						notes = append(notes, e.Text)
					}
				}
				t.Fatalf("the model received another text than sent: %s\nthe history's notes: %q\nthe log of this Session since the prompt was sent:\n%s",
					testenv.Diff(last, want), notes, linesWith(s.logText()[logged:], id))
			}
			// This prompt's notes, which go right after it.
			var notes []string
			prompts, after := 0, false
			for _, e := range s.Events(id) {
				if e.Kind == protocol.EventPrompt {
					prompts++
					after = true
					continue
				}
				if prompts == n && e.Kind == protocol.EventNote && strings.Contains(e.Text, "differs from the one sent") {
					if !after {
						t.Fatalf("the note %q is not right after the prompt", e.Text)
					}
					notes = append(notes, e.Text)
					continue
				}
				after = false
			}
			switch {
			case tt.note == "" && len(notes) != 0:
				t.Fatalf("notes %q, want none: Claude Code took the prompt as sent", notes)
			case tt.note != "" && (len(notes) != 1 || !strings.Contains(notes[0], tt.note)):
				t.Fatalf("notes %q, want one saying %q", notes, tt.note)
			}
		})
	}
}

// linesWith is the lines of text that hold what.
func linesWith(text, what string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.Contains(l, what) {
			b.WriteString(l)
		}
	}
	return b.String()
}

// promptRightAfterStopTurnArrivesWhole: a stop-turn's Escape does not
// take the next prompt's first key (a bare ESC then a key is Alt+key), with
// no Turn running, after two stop-turns in a row (two Escapes within 800 ms
// open Claude Code's Rewind dialog), and with a Turn running; the Session
// has had turns Turns.
func (s *System) promptRightAfterStopTurnArrivesWhole(t *testing.T, id string, turns int) {
	stop := func() {
		t.Helper()
		if code := s.Do(http.MethodPost, "/api/sessions/"+id+"/stop-turn", nil, nil); code != http.StatusNoContent {
			t.Fatalf("stop-turn: %d", code)
		}
	}
	last := func() string { got := userPrompts(s.Model); return got[len(got)-1] }

	stop()
	s.prompt(id, "watch me arrive whole")
	s.turnEnds(id, turns+1)
	if got := last(); got != "watch me arrive whole" {
		t.Fatalf("after a stop-turn with no Turn running the model received %q", got)
	}

	stop()
	stop()
	s.prompt(id, "whole after two stop-turns")
	s.turnEnds(id, turns+2)
	if got := last(); got != "whole after two stop-turns" {
		t.Fatalf("after two stop-turns the model received %q", got)
	}

	s.Model.On(testkit.PromptContains("run for a while"), testkit.Bash("timeout 60 tail -f /dev/null"))
	s.prompt(id, "run for a while")
	s.WaitEvent(id, testenv.WaitMedium, "the long tool", kind(protocol.EventToolUse))
	stop()
	s.prompt(id, "whole after stopping a Turn")
	s.turnEnds(id, turns+4)
	if got := last(); got != "whole after stopping a Turn" {
		t.Fatalf("after stopping a Turn the model received %q", got)
	}
	var ends []string
	for _, e := range s.Events(id) {
		if e.Kind == protocol.EventTurnEnd {
			ends = append(ends, e.Reason)
		}
	}
	if ends[turns+2] != "interrupted" {
		t.Fatalf("turn ends %q, want number %d interrupted", ends, turns+3)
	}
}

// untilTouched is a Bash command that runs until the test touches file in
// the Sandbox (s.inSandbox), a minute at most: a Turn that lasts as long as
// the test needs it to, not a guessed sleep that a loaded host outruns.
func untilTouched(file string) string {
	return "timeout 60 sh -c 'until [ -e " + file + " ]; do sleep 0.2; done'"
}

func TestQueuedPromptsGoAfterTheTurnInOrderAndCancelledNever(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Model.On(testkit.PromptContains("take your time"), testkit.Bash("echo start; "+untilTouched("/tmp/took-my-time")+"; echo end"))
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
	s.inSandbox(v.ID, "touch /tmp/took-my-time") // the Turn ends once the queue is set
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
	t.Parallel()
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

// commandDeliveredOnceTyped: a slash command fires no UserPromptSubmit,
// so it counts as delivered once typed; an unknown one too; the prompt
// after them still goes.
func (s *System) commandDeliveredOnceTyped(t *testing.T, id string) {
	for _, cmd := range []string{"/context", "/no-such-command here"} {
		var p api.Prompt
		s.Do(http.MethodPost, "/api/sessions/"+id+"/prompts", api.PromptRequest{Text: cmd, IsCommand: true}, &p)
	}
	s.Model.On(testkit.PromptContains("after the commands"), testkit.Text("still here"))
	s.prompt(id, "after the commands")
	s.WaitEvent(id, testenv.WaitMedium, "the answer after the commands", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "still here"
	})
	if q := s.state(id).Queue; len(q) != 0 {
		t.Fatalf("prompts still waiting: %+v", q)
	}
	if got := userPrompts(s.Model); got[len(got)-1] != "after the commands" {
		t.Fatalf("the model's last prompt = %q", got[len(got)-1])
	}
}
