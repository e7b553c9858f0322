package transcript_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
	"kndl.dev/kndl/internal/transcript"
)

// recordings are the cases in testdata/, each a script the real Claude
// Code runs in tmux against the scripted model. Each leaves Claude Code
// running once the transcript holds what the case is about.
var recordings = []struct {
	name string
	run  func(t *testing.T, c *testkit.Claude)
}{
	{"text", func(t *testing.T, c *testkit.Claude) {
		c.API.On(testkit.PromptContains("Say hello"), testkit.Text("Hello there — «ünïcode» ✓").Then(testkit.Text("A second block.")))
		c.Start(false)
		c.Send("Say hello")
		waitLines(t, c, `"subtype":"turn_duration"`, 1)
	}},
	{"bash-ok", func(t *testing.T, c *testkit.Claude) {
		c.API.On(testkit.PromptContains("Run it"), testkit.Text("Let me run it.").Then(testkit.Bash("echo hello from bash")))
		c.API.On(testkit.ToolResultContains("hello from bash"), testkit.Text("It ran."))
		c.Start(false)
		c.Send("Run it")
		waitLines(t, c, `"subtype":"turn_duration"`, 1)
	}},
	{"bash-fail", func(t *testing.T, c *testkit.Claude) {
		c.API.On(testkit.PromptContains("Fail it"), testkit.Bash("echo oops >&2; exit 3"))
		c.API.On(testkit.AfterToolResult(), testkit.Text("It failed."))
		c.Start(false)
		c.Send("Fail it")
		waitLines(t, c, `"subtype":"turn_duration"`, 1)
	}},
	{"two-turns", func(t *testing.T, c *testkit.Claude) {
		c.API.On(testkit.PromptContains("First prompt"), testkit.Text("First answer."))
		c.API.On(testkit.PromptContains("Second prompt"), testkit.Text("Second answer."))
		c.Start(false)
		c.Send("First prompt")
		waitLines(t, c, `"subtype":"turn_duration"`, 1)
		c.Send("Second prompt")
		waitLines(t, c, `"subtype":"turn_duration"`, 2)
	}},
	{"interrupt-streaming", func(t *testing.T, c *testkit.Claude) {
		long := strings.Repeat("This is a long answer that streams slowly. ", 40)
		c.API.On(testkit.PromptContains("Talk slowly"), testkit.Text(long).Slow(0, 200*time.Millisecond))
		c.API.On(testkit.PromptContains("Are you there"), testkit.Text("Yes."))
		c.Start(false)
		c.Send("Talk slowly")
		testenv.Eventually(t, testenv.WaitMedium, "the answer streams", func() bool {
			return strings.Contains(c.Screen(), "streams slowly. This")
		})
		c.Keys("Escape")
		waitLines(t, c, `"text":"[Request interrupted by user]"`, 1)
		c.Send("Are you there?")
		waitLines(t, c, `"subtype":"turn_duration"`, 1)
	}},
	{"interrupt-tool", func(t *testing.T, c *testkit.Claude) {
		// A bare "sleep 30" is refused by Claude Code's Bash tool.
		c.API.On(testkit.PromptContains("Sleep long"), testkit.Bash("echo start; sleep 31; echo end"))
		c.Start(false)
		c.Send("Sleep long")
		testenv.Eventually(t, testenv.WaitMedium, "the tool's sleep runs", func() bool { return sleeping("31") })
		c.Keys("Escape")
		waitLines(t, c, `"text":"[Request interrupted by user for tool use]"`, 1)
		testenv.Eventually(t, testenv.WaitShort, "the interrupt kills the tool's sleep", func() bool { return !sleeping("31") })
	}},
	{"subagent", func(t *testing.T, c *testkit.Claude) {
		// The subagent's requests are the ones carrying its task prompt as text.
		inSubagent := func(r *testkit.Request) bool {
			return slices.ContainsFunc(r.Texts(), func(s string) bool { return strings.Contains(s, "SUBAGENT:") })
		}
		c.API.On(func(r *testkit.Request) bool { return inSubagent(r) && testkit.AfterToolResult()(r) }, testkit.Text("There are 0 files."))
		c.API.On(inSubagent, testkit.Bash("ls -1 | wc -l"))
		c.API.On(testkit.PromptContains("<task-notification>"), testkit.Text("The subagent counted 0 files."))
		c.API.On(testkit.AfterToolResult(), testkit.Text("I started a subagent."))
		c.API.On(testkit.PromptContains("Delegate"), testkit.ToolUse("Agent", map[string]any{
			"description": "Count files", "prompt": "SUBAGENT: count the files here", "subagent_type": "general-purpose"}))
		c.Start(false)
		c.Send("Delegate the count")
		waitLines(t, c, `"subtype":"turn_duration"`, 2)
	}},
	{"api-error", func(t *testing.T, c *testkit.Claude) {
		// A 400 is not retried (a 500 is, for minutes).
		c.API.On(testkit.PromptContains("Break"), testkit.Fail(400, "invalid_request_error", "Bad request (scripted)"))
		c.Start(false)
		c.Send("Break")
		waitLines(t, c, `"isApiErrorMessage":true`, 1)
	}},
	{"resume", func(t *testing.T, c *testkit.Claude) {
		c.API.On(testkit.PromptContains("Think forever"), testkit.Text("Never sent.").Slow(time.Hour, 0))
		c.API.On(testkit.PromptContains("After the crash"), testkit.Text("Back again."))
		c.Start(false)
		c.Send("Think forever")
		// Killed before its prompt is written, a conversation cannot be
		// resumed ("No conversation found").
		waitLines(t, c, `"content":"Think forever"`, 1)
		testenv.Eventually(t, testenv.WaitShort, "the model is asked", func() bool { return len(c.API.Requests()) > 0 })
		c.Stop(true)
		c.Start(true)
		c.Send("After the crash")
		waitLines(t, c, `"subtype":"turn_duration"`, 1)
	}},
	{"thinking", func(t *testing.T, c *testkit.Claude) {
		c.API.On(testkit.PromptContains("Ponder"), testkit.Thinking("Let me weigh this carefully.").Then(testkit.Text("Forty-two.")))
		c.Start(false)
		c.Send("Ponder this")
		waitLines(t, c, `"subtype":"turn_duration"`, 1)
	}},
	{"queued-and-shell", func(t *testing.T, c *testkit.Claude) {
		c.API.On(testkit.PromptContains("Wait a bit"), testkit.Bash("echo start; sleep 4; echo end"))
		c.API.On(testkit.AfterToolResult(), testkit.Text("Waited, and read your second message."))
		c.API.On(testkit.PromptContains("<bash-stdout>"), testkit.Text("I see the output."))
		c.Start(false)
		c.Send("Wait a bit")
		testenv.Eventually(t, testenv.WaitMedium, "the tool's sleep runs", func() bool { return sleeping("4") })
		c.Send("Also this")
		waitLines(t, c, `"subtype":"turn_duration"`, 1)
		c.Keys("-l", "!")
		testenv.Eventually(t, testenv.WaitShort, "shell mode", func() bool { return strings.Contains(c.Screen(), "! for shell mode") })
		c.Send("echo bang")
		waitLines(t, c, `"subtype":"turn_duration"`, 2)
	}},
	{"commands", func(t *testing.T, c *testkit.Claude) {
		c.API.On(testkit.PromptContains("Say hello"), testkit.Text("Hello."))
		c.API.On(testkit.PromptContains("Respond with TEXT ONLY"), testkit.Text("Summary: the user said hello."))
		c.Start(false)
		c.Send("Say hello")
		waitLines(t, c, `"subtype":"turn_duration"`, 1)
		c.Send("/compact")
		waitLines(t, c, `"subtype":"compact_boundary"`, 1)
		waitLines(t, c, `<local-command-stdout>`, 1)
		c.Send("/context")
		waitLines(t, c, `"subtype":"local_command"`, 2)
	}},
}

// TestRealRecordings records every case again with the real pinned Claude
// Code, tailing it live with Follow meanwhile, and checks that the Events
// still have the golden ones' shape (kinds, tools, reasons, errors, order in
// each file), so a Claude Code bump that changes the format is caught.
// Also: the live tail reads the same Events as reading the finished files.
// With -update it replaces testdata/ with the new recordings.
func TestRealRecordings(t *testing.T) {
	bin := testkit.RealClaude(t)
	testenv.RequireCommand(t, "tmux")
	for _, rec := range recordings {
		t.Run(rec.name, func(t *testing.T) {
			c := testkit.NewClaude(t, bin)
			live := follow(t, c)
			rec.run(t, c)
			c.Stop(false)

			dir := filepath.Dir(c.Transcript())
			got := readCase(t, dir)
			testenv.Eventually(t, testenv.WaitShort, "the live tail has read every Event", func() bool {
				return len(live.events()) >= len(got)
			})
			if l, g := bySource(t, live.events()), bySource(t, got); l != g {
				t.Errorf("the live tail read other Events than the finished files hold:\nlive  %s\nfiles %s", l, g)
			}
			for _, e := range got {
				t.Logf("%s", mustJSON(t, e))
			}

			want := filepath.Join("testdata", rec.name)
			if *update {
				save(t, c, want)
				if err := os.WriteFile(filepath.Join(want, "events.golden.json"), marshalEvents(t, readCase(t, want)), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			var golden []protocol.Event
			data, err := os.ReadFile(filepath.Join(want, "events.golden.json"))
			if err == nil {
				err = json.Unmarshal(data, &golden)
			}
			if err != nil {
				t.Fatalf("golden events: %v (run with -update to record them)", err)
			}
			if g, w := shape(got), shape(golden); g != w {
				t.Errorf("Claude Code %s's transcript makes Events of another shape than testdata/%s:\ngot  %s\nwant %s",
					bin.Version, rec.name, g, w)
			}
		})
	}
}

// waitLines waits until at least n lines of the main transcript contain s.
func waitLines(t *testing.T, c *testkit.Claude, s string, n int) {
	t.Helper()
	testenv.Eventually(t, testenv.WaitMedium, fmt.Sprintf("%d transcript lines with %s", n, s), func() bool {
		data, _ := os.ReadFile(c.Transcript())
		return strings.Count(string(data), s) >= n
	})
}

// sleeping reports whether a "sleep secs" process runs on this host.
func sleeping(secs string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, _ := os.ReadFile(p); string(b) == "sleep\x00"+secs+"\x00" {
			return true
		}
	}
	return false
}

// liveTail is Follow running on a conversation, its output decoded.
type liveTail struct {
	mu  sync.Mutex
	evs []protocol.Event
}

func (l *liveTail) events() []protocol.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evs)
}

func follow(t *testing.T, c *testkit.Claude) *liveTail {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	l := &liveTail{}
	done := make(chan error, 2)
	go func() {
		err := transcript.Follow(ctx, transcript.Options{ConfigDir: c.Config, Cwd: c.Work, Conversation: c.Conversation}, pw)
		pw.Close()
		done <- err
	}()
	go func() {
		dec := transcript.NewDecoder(pr)
		for {
			b, err := dec.Next()
			if err != nil {
				if err != io.EOF {
					done <- err
				}
				return
			}
			l.mu.Lock()
			l.evs = append(l.evs, b.Events...)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Follow: %v", err)
		}
	})
	return l
}

// bySource is the Events of each file in order, as text: the main
// transcript's, then each subagent's, in the order they first appear.
// Files are interleaved by time, so only the order within one is fixed.
func bySource(t *testing.T, evs []protocol.Event) string {
	var order []string
	groups := map[string][]string{}
	for _, e := range evs {
		if _, ok := groups[e.Agent]; !ok {
			order = append(order, e.Agent)
		}
		groups[e.Agent] = append(groups[e.Agent], mustJSON(t, e))
	}
	slices.Sort(order)
	var out []string
	for _, a := range order {
		out = append(out, fmt.Sprintf("[%s] %s", a, strings.Join(groups[a], " ")))
	}
	return strings.Join(out, "\n")
}

// shape is what must stay the same across recordings: per file, each
// Event's kind, tool, reason and error, and whether a subagent's Events
// and task notifications point at an Agent tool call.
func shape(evs []protocol.Event) string {
	agentCalls := map[string]bool{}
	for _, e := range evs {
		if e.Kind == protocol.EventToolUse && e.Tool == "Agent" {
			agentCalls[e.ToolID] = true
		}
	}
	var order []string
	agents := map[string]string{} // agent id -> its name here, by first appearance
	groups := map[string][]string{}
	for _, e := range evs {
		if _, ok := agents[e.Agent]; !ok {
			agents[e.Agent] = fmt.Sprintf("agent%d", len(agents))
			order = append(order, e.Agent)
		}
		s := e.Kind
		for _, x := range []string{e.Tool, e.Reason} {
			if x != "" {
				s += "/" + x
			}
		}
		if e.IsError {
			s += "!"
		}
		if e.Parent != "" {
			s += "^" + map[bool]string{true: "agent-call", false: "?"}[agentCalls[e.Parent]]
		}
		groups[e.Agent] = append(groups[e.Agent], s)
	}
	var out []string
	for _, a := range order {
		out = append(out, agents[a]+": "+strings.Join(groups[a], " "))
	}
	return strings.Join(out, "; ")
}

// save replaces dir with the conversation's files: its transcript and its
// subagents' files and .meta.json.
func save(t *testing.T, c *testkit.Claude, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	project := filepath.Dir(c.Transcript())
	subs, _ := filepath.Glob(filepath.Join(project, c.Conversation, "subagents", "agent-*"))
	for _, src := range append([]string{c.Transcript()}, subs...) {
		rel, _ := filepath.Rel(project, src)
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
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
