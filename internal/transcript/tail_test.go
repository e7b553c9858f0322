package transcript

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
)

const conv = "817d965f-9f47-4ed9-b089-99abb9803544"

func prompt(text string) string {
	return fmt.Sprintf(`{"type":"user","message":{"role":"user","content":%q},"timestamp":"2026-11-30T08:56:46.830Z","origin":{"kind":"human"}}`+"\n", text)
}

func textAt(text, ts string) string {
	return fmt.Sprintf(`{"type":"assistant","message":{"role":"assistant","model":"m","content":[{"type":"text","text":%q}]},"timestamp":%q}`+"\n", text, ts)
}

func appendFile(t *testing.T, path, data string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
}

// summary is an Event's kind and text, enough to tell Events apart here.
// summary lists Events as kind:text. The turn_start every prompt record
// brings is left out: these tests are about which lines are read.
func summary(evs []protocol.Event) string {
	var out []string
	for _, e := range evs {
		if e.Kind == protocol.EventTurnStart {
			continue
		}
		s := e.Kind + ":" + e.Text
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		if e.Agent != "" {
			s += "@" + e.Agent + "<" + e.Parent
		}
		out = append(out, s)
	}
	return strings.Join(out, " | ")
}

func poll(t *testing.T, tl *Tailer) (string, Offsets) {
	t.Helper()
	evs, offs, err := tl.Poll()
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	return summary(evs), offs
}

func TestTailerFollowsAFileAsItGrows(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, conv+".jsonl")
	tl := New(path, nil)

	if got, offs := poll(t, tl); got != "" || len(offs) != 0 {
		t.Errorf("before the file exists: got %q, offsets %v; want nothing", got, offs)
	}
	first := prompt("one")
	appendFile(t, path, first+`{"type":"assistant","message":{"role":"assist`)
	got, offs := poll(t, tl)
	if got != "prompt:one" || offs[conv+".jsonl"] != int64(len(first)) {
		t.Errorf("with a partial last line: got %q, offsets %v; want the prompt, offset %d", got, offs, len(first))
	}
	appendFile(t, path, `ant","model":"m","content":[{"type":"text","text":"two"}]}}`+"\n")
	if got, _ := poll(t, tl); got != "text:two" {
		t.Errorf("once the line is complete: got %q, want text:two", got)
	}
	if got, _ := poll(t, tl); got != "" {
		t.Errorf("with nothing new: got %q, want nothing", got)
	}

	// A restarted reader resumes from the offsets it was given.
	appendFile(t, path, prompt("three"))
	_, offs = poll(t, New(path, nil))
	appendFile(t, path, prompt("four"))
	if got, _ := poll(t, New(path, offs)); got != "prompt:four" {
		t.Errorf("resumed from %v: got %q, want only what came after", offs, got)
	}
}

func TestTailerSkipsMalformedLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), conv+".jsonl")
	appendFile(t, path, prompt("one")+"{not json\n\n   \n"+`{"type":"user","message":{"content":42}}`+"\n"+prompt("two"))
	tl := New(path, nil)
	if got, _ := poll(t, tl); got != "prompt:one | prompt:two" {
		t.Errorf("got %q, want both prompts", got)
	}
	if s := tl.Stats(); s.Malformed != 2 || s.Lines != 6 {
		t.Errorf("stats: got %+v, want 2 malformed of 6 lines", s)
	}
}

func TestTailerRereadsATruncatedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), conv+".jsonl")
	appendFile(t, path, prompt("one")+prompt("two"))
	tl := New(path, nil)
	poll(t, tl)
	if err := os.WriteFile(path, []byte(prompt("new")), 0o644); err != nil {
		t.Fatal(err)
	}
	got, offs := poll(t, tl)
	if !strings.HasPrefix(got, "note:The transcript file "+conv+".jsonl is shorter") || !strings.HasSuffix(got, "| prompt:new") {
		t.Errorf("got %q, want a note, then the new file's prompt", got)
	}
	if offs[conv+".jsonl"] != int64(len(prompt("new"))) {
		t.Errorf("offsets: got %v", offs)
	}
}

func TestTailerSkipsALineOverMaxLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), conv+".jsonl")
	huge := `{"type":"user","message":{"role":"user","content":"` + strings.Repeat("x", MaxLine) + `"},"origin":{"kind":"human"}}` + "\n"
	// Written in two parts, as if Claude Code were still writing it.
	half := len(huge) / 2
	appendFile(t, path, prompt("before")+huge[:half])
	tl := New(path, nil)
	got, offs := poll(t, tl)
	if got != "prompt:before" {
		t.Errorf("first half: got %q, want the prompt before it", got)
	}
	appendFile(t, path, huge[half:half+MaxLine/2]) // now over MaxLine, no newline yet
	got, offs = poll(t, tl)
	if got != fmt.Sprintf("note:A transcript line over %d MB was skipped.", MaxLine>>20) {
		t.Errorf("over MaxLine: got %q, want the note", got)
	}
	// A Tailer restarted from the offset (mid-line) skips the rest silently.
	appendFile(t, path, huge[half+MaxLine/2:]+prompt("after"))
	for name, tl := range map[string]*Tailer{"same": tl, "restarted": New(path, offs)} {
		if got, _ := poll(t, tl); got != "prompt:after" {
			t.Errorf("%s tailer after the line: got %q, want only the prompt after it", name, got)
		}
	}
	if s := tl.Stats(); s.TooLong != 1 {
		t.Errorf("stats: got %+v, want 1 too long", s)
	}
}

func TestTailerBoundsABatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), conv+".jsonl")
	line := prompt(strings.Repeat("y", 1000))
	n := 2*maxRead/len(line) + 10
	appendFile(t, path, strings.Repeat(line, n))
	tl := New(path, nil)
	total, polls := 0, 0
	for {
		evs, _, err := tl.Poll()
		if err != nil {
			t.Fatal(err)
		}
		total, polls = total+len(evs), polls+1
		if !tl.More() {
			break
		}
	}
	// Each prompt record is a turn_start and a prompt.
	if total != 2*n || polls != 3 {
		t.Errorf("got %d events in %d polls, want %d in 3", total, polls, 2*n)
	}
}

func TestTailerReadsSubagents(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, conv+".jsonl")
	subs := filepath.Join(dir, conv, "subagents")
	appendFile(t, path, prompt("go")+textAt("main early", "2026-11-30T08:58:15.500Z")+textAt("main late", "2026-11-30T08:58:17.000Z"))
	appendFile(t, filepath.Join(subs, "agent-a1.jsonl"), textAt("a1 first", "2026-11-30T08:58:16.000Z")+textAt("a1 second", "2026-11-30T08:58:16.100Z"))
	appendFile(t, filepath.Join(subs, "agent-a1.meta.json"), `{"agentType":"general-purpose","toolUseId":"toolu_a1"}`)
	appendFile(t, filepath.Join(subs, "agent-a2.jsonl"), textAt("a2 before meta", "2026-11-30T08:58:18.000Z"))
	appendFile(t, filepath.Join(subs, "other.txt"), "not a transcript\n")

	tl := New(path, nil)
	got, offs := poll(t, tl)
	want := "prompt:go | text:main early | text:a1 first@a1<toolu_a1 | text:a1 second@a1<toolu_a1 | text:main late | text:a2 before meta@a2<"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if len(offs) != 3 || offs[conv+"/subagents/agent-a1.jsonl"] == 0 || offs[conv+"/subagents/agent-a2.jsonl"] == 0 {
		t.Errorf("offsets: got %v, want the main file and both subagents'", offs)
	}
	appendFile(t, filepath.Join(subs, "agent-a2.meta.json"), `{"toolUseId":"toolu_a2"}`)
	appendFile(t, filepath.Join(subs, "agent-a2.jsonl"), textAt("a2 after meta", "2026-11-30T08:58:19.000Z"))
	if got, _ := poll(t, tl); got != "text:a2 after meta@a2<toolu_a2" {
		t.Errorf("after the meta file: got %q", got)
	}
}

func TestSkipDropsOnlyRecordsWithoutEvents(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{`{"type":"api-request-shape","sessionId":"s"}`, true},
		{`{"type":"mode","mode":"normal"}`, true},
		{`{"parentUuid":"x","isSidechain":false,"attachment":{"type":"prompt_snapshot","systemPrompt":["..."]},"type":"attachment"}`, true},
		{`{"parentUuid":"x","isSidechain":false,"attachment":{"type":"queued_command","prompt":"Also this"},"type":"attachment"}`, false},
		{`{"parentUuid":"7e","isSidechain":true,"agentId":"a49","attachment":{"type":"hook_stopped_continuation","message":"Stopped by its Creator"},"type":"attachment"}`, false},
		{`{"parentUuid":"x","type":"user","message":{"content":"\"attachment\":{\"type\":\"date\""}}`, false},
		{`{"type":"user","message":{"content":"hi"}}`, false},
	}
	for _, tt := range tests {
		if got := skip([]byte(tt.line)); got != tt.want {
			t.Errorf("skip(%s): got %v, want %v", tt.line, got, tt.want)
		}
	}
}

// skip must never drop a line Parse would make Events of: checked on every
// line Claude Code wrote in testdata/.
func TestSkipKeepsEveryRecordedLineWithEvents(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	subs, _ := filepath.Glob("testdata/*/*/subagents/*.jsonl")
	skipped := 0
	for _, f := range append(files, subs...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if !skip([]byte(line)) {
				continue
			}
			skipped++
			if evs, err := Parse([]byte(line), Source{Agent: "a"}); err != nil || len(evs) > 0 {
				t.Errorf("%s:%d is skipped, but Parse makes %v (%v) of it", f, i+1, evs, err)
			}
		}
	}
	if skipped == 0 {
		t.Error("no recorded line skipped: the fast path does nothing")
	}
	t.Logf("%d recorded lines skipped without decoding", skipped)
}

func TestTailerReturnsWhatItReadBeforeAnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, conv+".jsonl")
	appendFile(t, path, prompt("one"))
	// A directory where a subagent's file should be cannot be read.
	if err := os.MkdirAll(filepath.Join(dir, conv, "subagents", "agent-a1.jsonl"), 0o755); err != nil {
		t.Fatal(err)
	}
	tl := New(path, nil)
	evs, offs, err := tl.Poll()
	if err == nil || summary(evs) != "prompt:one" || offs[conv+".jsonl"] != int64(len(prompt("one"))) {
		t.Errorf("got %q, offsets %v, error %v; want the main file's prompt, its offset and an error", summary(evs), offs, err)
	}
	if evs, _, _ := tl.Poll(); len(evs) != 0 {
		t.Errorf("next poll: got %q again, want nothing", summary(evs))
	}
}
