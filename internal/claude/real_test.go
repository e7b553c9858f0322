package claude_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// These tests drive the real pinned Claude Code on this host against
// testkit's scripted model. They are what to run after bumping Version.

// session is one conversation of the real Claude Code against the
// scripted model; see testkit.Claude.
type session struct{ *testkit.Claude }

func newSession(t *testing.T) *session { return &session{testkit.NewClaude(t, testkit.RealClaude(t))} }

// checkOnlyMessages fails if Claude Code called anything but the model.
func (s *session) checkOnlyMessages(t *testing.T) {
	t.Helper()
	for _, r := range s.API.Requests() {
		if r.Method != "POST" || r.Path != "/v1/messages" || r.RawQuery != "beta=true" || r.Status != 200 {
			t.Errorf("Claude Code called %s %s?%s (answered %d), want only POST /v1/messages?beta=true", r.Method, r.Path, r.RawQuery, r.Status)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+testkit.FakeToken {
			t.Errorf("authorization: got %q, want the OAuth token", got)
		}
	}
}

func TestRealPrintRunsABashTool(t *testing.T) {
	s := newSession(t)
	made := filepath.Join(s.Work, "made.txt")
	prompt := "Please make the file, «quoted» and 'single' — ünïcode ✓"
	s.API.On(testkit.PromptContains("make the file"), testkit.Bash("echo made by claude > "+made))
	s.API.On(testkit.AfterToolResult(), testkit.Text("The file is made."))

	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitMedium)
	defer cancel()
	argv, env := s.Command(false)
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], "-p", prompt)...)
	cmd.Dir, cmd.Env = s.Work, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	t.Logf("claude -p took %v", time.Since(start))
	if err != nil {
		t.Fatalf("claude -p: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	if strings.TrimSpace(string(out)) != "The file is made." {
		t.Errorf("printed %q, want the scripted answer", out)
	}
	if got, err := os.ReadFile(made); err != nil || string(got) != "made by claude\n" {
		t.Errorf("made.txt: got %q (%v), want the Bash tool's output", got, err)
	}
	turns := s.API.Turns()
	if len(turns) != 2 {
		t.Fatalf("got %d model calls, want 2 (the prompt, then the tool result)", len(turns))
	}
	if texts := turns[0].LastUser().Texts(); !slices.Contains(texts, prompt) {
		t.Errorf("first call's prompt blocks %q, want one to be the prompt byte for byte", texts)
	}
	results := turns[1].LastUser().ToolResults()
	if len(results) != 1 || results[0].IsError {
		t.Fatalf("second call's tool results: got %+v, want one, not an error", results)
	}
	// The second call carries the whole conversation: the prompt, the tool use, its result.
	var roles []string
	for _, m := range turns[1].Params.Messages {
		roles = append(roles, m.Role)
	}
	if !slices.Contains(turns[1].Texts(), prompt) || !strings.Contains(strings.Join(roles, " "), "assistant user") {
		t.Errorf("second call's messages (roles %v) don't carry the earlier turn", roles)
	}
	s.checkOnlyMessages(t)
	if _, err := os.Stat(s.Transcript()); err != nil {
		t.Errorf("transcript not where TranscriptPath says: %v", err)
	}
}

// waitReply waits for an assistant text record in the transcript.
func (s *session) waitReply(t *testing.T, text string) {
	t.Helper()
	sent := time.Now()
	testenv.Eventually(t, testenv.WaitMedium, "the reply "+text+" in the transcript", func() bool {
		return slices.ContainsFunc(records(t, s.Transcript()), func(r record) bool {
			return r.Type == "assistant" && len(r.Message.Content) == 1 && r.Message.Content[0].Text == text
		})
	})
	t.Logf("reply in the transcript %v after Enter", time.Since(sent))
}

func TestRealTmuxAnswersAndResumes(t *testing.T) {
	s := newSession(t)
	first := "Hello from tmux: «quoted», 'single' and \"double\" — ✓"
	second := "And again, after a wake"
	s.API.On(testkit.PromptContains("Hello from tmux"), testkit.Text("Hi, I read you through tmux."))
	s.API.On(testkit.PromptContains("after a wake"), testkit.Text("Still here."))
	s.Start(false)
	if n := len(s.API.Requests()); n != 0 {
		t.Errorf("got %d requests before the first prompt, want none", n)
	}
	s.Send(first)
	s.waitReply(t, "Hi, I read you through tmux.")
	if !slices.ContainsFunc(records(t, s.Transcript()), func(r record) bool { return r.Type == "user" && r.Message.Content.text() == first }) {
		t.Errorf("no user record in the transcript with the prompt as its content")
	}

	// Sleep and wake: the seed runs again over what Claude Code wrote, and
	// --resume carries the conversation on.
	s.Stop(false)
	s.Start(true)
	s.Send(second)
	s.waitReply(t, "Still here.")

	turns := s.API.Turns()
	if len(turns) != 2 {
		t.Fatalf("got %d model calls, want 2", len(turns))
	}
	if !slices.Contains(turns[0].LastUser().Texts(), first) || !slices.Contains(turns[1].LastUser().Texts(), second) {
		t.Errorf("the model did not get each prompt byte for byte")
	}
	if earlier := turns[1].Texts(); !slices.Contains(earlier, first) || !slices.Contains(earlier, "Hi, I read you through tmux.") {
		t.Errorf("after the wake the model did not receive the earlier turn")
	}
	s.checkOnlyMessages(t)
}

// record is the part of a transcript line these tests read.
type record struct {
	Type    string `json:"type"`
	Message struct {
		Content content `json:"content"`
	} `json:"message"`
}

// content is a message's content: a prompt's string, or blocks.
type content []struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (c *content) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*c = content{{Type: "string", Text: s}}
		return nil
	}
	type blocks content
	return json.Unmarshal(b, (*blocks)(c))
}

func (c content) text() string {
	if len(c) == 1 && c[0].Type == "string" {
		return c[0].Text
	}
	return ""
}

// records reads the transcript's complete lines.
func records(t *testing.T, path string) []record {
	data, _ := os.ReadFile(path)
	var out []record
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if !strings.HasSuffix(line, "\n") {
			break // a line still being written
		}
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("transcript line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// TestRealAnAtMentionedFileReachesTheModel: a prompt ending in the lines
// the Runner adds for its Attachments (protocol.AttachedLine, here with the
// test's directory for /workspace) is sent by Enter, and Claude Code reads
// each file as it takes the prompt: the image as an image block, the text
// as the Read tool's result, in the prompt's own message.
func TestRealAnAtMentionedFileReachesTheModel(t *testing.T) {
	s := newSession(t)
	const prompt = "Look at what I attached."
	const promptID = "0a0a0a0a-1111-4222-8333-444444444444"
	dir := filepath.Join(s.Work, ".kndl", "attachments", promptID)
	os.MkdirAll(dir, 0o755)
	var img bytes.Buffer
	png.Encode(&img, image.NewGray(image.Rect(0, 0, 8, 8)))
	os.WriteFile(filepath.Join(dir, "shot.png"), img.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the notes say hello-attachment\n"), 0o644)
	s.API.On(testkit.PromptContains(prompt), testkit.Text("Seen them."))
	s.Start(false)
	text := prompt + "\n"
	for _, f := range []string{"shot.png", "notes.txt"} {
		text += "\n" + strings.Replace(protocol.AttachedLine(promptID, f), "/workspace/", s.Work+"/", 1)
	}
	s.Tmux("send-keys", "-t", "claude", "-l", "--", text)
	testenv.Eventually(t, testenv.WaitShort, "the prompt typed in", func() bool {
		return strings.Contains(strings.Join(strings.Fields(s.Screen()), ""), "notes.txt")
	})
	s.Keys("Enter")
	s.waitReply(t, "Seen them.")
	m := s.API.Turns()[0].LastUser()
	images := m.Images()
	if len(images) != 1 || images[0].Source == nil || images[0].Source.MediaType != "image/png" || images[0].Source.Data != base64.StdEncoding.EncodeToString(img.Bytes()) {
		t.Errorf("the prompt's message has images %+v, want the PNG byte for byte", images)
	}
	if !slices.ContainsFunc(m.Texts(), func(s string) bool { return strings.Contains(s, "hello-attachment") }) {
		t.Errorf("the prompt's message lacks the text file: %q", m.Texts())
	}
	s.checkOnlyMessages(t)
}

// Claude Code runs with its JavaScript engine's optimizing JIT off, and
// what the model runs has it on again: the file Launch.BashEnv names is
// sourced ahead of each Bash command.
func TestRealClaudeCodeRunsWithoutTheOptimizingJITAndTheModelsCommandsWithIt(t *testing.T) {
	s := newSession(t)
	s.API.On(testkit.PromptContains("show the switch"), testkit.Bash(`echo "dfg=${BUN_JSC_useDFGJIT-unset}"`))
	s.API.On(testkit.AfterToolResult(), testkit.Text("shown"))
	s.Start(false)
	pid := strings.TrimSpace(s.Tmux("display", "-p", "-t", "claude", "#{pane_pid}"))
	environ, err := os.ReadFile("/proc/" + pid + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(environ), "\x00"), "BUN_JSC_useDFGJIT=0") {
		t.Errorf("Claude Code's environment lacks BUN_JSC_useDFGJIT=0")
	}
	s.Send("show the switch")
	s.waitReply(t, "shown")
	turns := s.API.Turns()
	if len(turns) != 2 {
		t.Fatalf("got %d model calls, want 2", len(turns))
	}
	results := turns[1].LastUser().ToolResults()
	if len(results) != 1 || strings.TrimSpace(results[0].ResultText()) != "dfg=unset" {
		t.Errorf("the Bash tool's result: got %+v, want dfg=unset", results)
	}
}
