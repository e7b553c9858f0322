package claude_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// These tests drive the real pinned Claude Code on this host against
// testkit's scripted model. They are what to run after bumping Version.

const fakeToken = "sk-ant-oat01-testkit-fake-token"

// realClaude installs the pinned build into the cache shared between runs.
func realClaude(t *testing.T) claude.Binary {
	t.Helper()
	testenv.RequireRoot(t) // as in a Sandbox: root, with IS_SANDBOX=1
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitBuild)
	defer cancel()
	b, err := claude.Install(ctx, filepath.Join(testkit.CacheDir(), "claude-code"), claude.Glibc,
		claude.InstallOptions{Progress: func(s string) { t.Log(s) }})
	var uerr *url.Error
	if errors.As(err, &uerr) {
		testenv.Lack(t, "the npm registry ("+err.Error()+")")
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// session is one Claude Code conversation set up to run in a fresh
// working directory against a scripted model.
type session struct {
	api          *testkit.Anthropic
	work, config string
	conversation string
	launch       claude.Launch
}

func newSession(t *testing.T, bin claude.Binary) *session {
	s := &session{api: testkit.NewAnthropic(t, fakeToken), work: t.TempDir(), config: t.TempDir(), conversation: newUUID()}
	s.launch = claude.Launch{
		Binary:       bin.Path,
		Conversation: s.conversation,
		Base: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + t.TempDir(),
			"LANG=C.UTF-8", "ANTHROPIC_API_KEY=sk-ant-api-must-not-be-used"},
		SessionID:     "ses_test",
		ConfigDir:     s.config,
		TZ:            "Europe/Copenhagen",
		RelayURL:      "http://127.0.0.1:9", // nothing listens: no mod loaded here
		SessionToken:  "session-token",
		OAuthToken:    fakeToken,
		ModelEndpoint: s.api.URL,
	}
	return s
}

// command seeds the config dir, as before each start, and returns the
// command line and environment to start (or, with resume, wake) with.
func (s *session) command(t *testing.T, resume bool) (argv, env []string) {
	t.Helper()
	if err := claude.Seed(s.config, s.work); err != nil {
		t.Fatal(err)
	}
	l := s.launch
	l.Resume = resume
	argv, env, err := l.Command()
	if err != nil {
		t.Fatal(err)
	}
	return argv, env
}

func (s *session) transcript() string { return claude.TranscriptPath(s.config, s.work, s.conversation) }

// checkOnlyMessages fails if Claude Code called anything but the model.
func (s *session) checkOnlyMessages(t *testing.T) {
	t.Helper()
	for _, r := range s.api.Requests() {
		if r.Method != "POST" || r.Path != "/v1/messages" || r.RawQuery != "beta=true" || r.Status != 200 {
			t.Errorf("Claude Code called %s %s?%s (answered %d), want only POST /v1/messages?beta=true", r.Method, r.Path, r.RawQuery, r.Status)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+fakeToken {
			t.Errorf("authorization: got %q, want the OAuth token", got)
		}
	}
}

func TestRealPrintRunsABashTool(t *testing.T) {
	s := newSession(t, realClaude(t))
	made := filepath.Join(s.work, "made.txt")
	prompt := "Please make the file, «quoted» and 'single' — ünïcode ✓"
	s.api.On(testkit.PromptContains("make the file"), testkit.Bash("echo made by claude > "+made))
	s.api.On(testkit.AfterToolResult(), testkit.Text("The file is made."))

	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitMedium)
	defer cancel()
	argv, env := s.command(t, false)
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], "-p", prompt)...)
	cmd.Dir, cmd.Env = s.work, env
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
	turns := s.api.Turns()
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
	if _, err := os.Stat(s.transcript()); err != nil {
		t.Errorf("transcript not where TranscriptPath says: %v", err)
	}
}

// tmux runs tmux on a private socket, so tests never meet another server.
type tmux struct {
	t    *testing.T
	sock string
}

func newTmux(t *testing.T) *tmux {
	testenv.RequireCommand(t, "tmux")
	x := &tmux{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	t.Cleanup(func() {
		// Claude Code writes to its config dir as it exits on the hangup:
		// wait for it, or removing the test's directories races it.
		out, _ := exec.Command("tmux", "-S", x.sock, "list-panes", "-a", "-F", "#{pane_pid}").Output()
		exec.Command("tmux", "-S", x.sock, "kill-server").Run()
		for _, f := range strings.Fields(string(out)) {
			pid, _ := strconv.Atoi(f)
			testenv.Eventually(t, testenv.WaitShort, "Claude Code exits on the hangup", func() bool {
				return pid <= 0 || syscall.Kill(pid, 0) == syscall.ESRCH
			})
		}
	})
	return x
}

func (x *tmux) run(args ...string) string {
	x.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", x.sock}, args...)...)
	// The server starts with almost nothing: Claude Code's environment goes
	// with -e, as the Runner sets it.
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// start starts the session's Claude Code in tmux, as the Runner does, and
// waits until it is ready for a prompt.
func (x *tmux) start(s *session, resume bool) {
	t := x.t
	t.Helper()
	argv, env := s.command(t, resume)
	args := []string{"new-session", "-d", "-s", "claude", "-x", "160", "-y", "48", "-c", s.work}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	start := time.Now()
	x.run(append(append(args, "--"), argv...)...)
	// The footer's hint is drawn last; with it, no dialog is waiting.
	var screen string
	testenv.Eventually(t, testenv.WaitMedium, "Claude Code draws its prompt", func() bool {
		screen = x.screen()
		return strings.Contains(screen, "shift+tab to cycle")
	})
	t.Logf("prompt drawn %v after start (resume %v):\n%s", time.Since(start), resume, screen)
}

// send types prompt, waits until it is drawn, then presses Enter: an Enter
// sent at once after the text in the first seconds was lost 4 times in 5.
func (x *tmux) send(prompt string) {
	x.t.Helper()
	x.run("send-keys", "-t", "claude", "-l", "--", prompt)
	testenv.Eventually(x.t, testenv.WaitShort, "the prompt typed in", func() bool {
		return strings.Contains(x.screen(), prompt)
	})
	x.run("send-keys", "-t", "claude", "Enter")
}

func (x *tmux) screen() string { return x.run("capture-pane", "-p", "-t", "claude") }

// stop ends Claude Code as a Session's sleep does, and waits for it to exit.
func (x *tmux) stop() {
	x.t.Helper()
	pid, _ := strconv.Atoi(strings.TrimSpace(x.run("display", "-p", "-t", "claude", "#{pane_pid}")))
	x.run("kill-session", "-t", "claude")
	start := time.Now()
	testenv.Eventually(x.t, testenv.WaitShort, "Claude Code exits", func() bool {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	})
	x.t.Logf("Claude Code exited %v after kill-session", time.Since(start))
}

// waitReply waits for an assistant text record in the transcript.
func (s *session) waitReply(t *testing.T, text string) {
	t.Helper()
	sent := time.Now()
	testenv.Eventually(t, testenv.WaitMedium, "the reply "+text+" in the transcript", func() bool {
		return slices.ContainsFunc(records(t, s.transcript()), func(r record) bool {
			return r.Type == "assistant" && len(r.Message.Content) == 1 && r.Message.Content[0].Text == text
		})
	})
	t.Logf("reply in the transcript %v after Enter", time.Since(sent))
}

func TestRealTmuxAnswersAndResumes(t *testing.T) {
	s := newSession(t, realClaude(t))
	x := newTmux(t)
	first := "Hello from tmux: «quoted», 'single' and \"double\" — ✓"
	second := "And again, after a wake"
	s.api.On(testkit.PromptContains("Hello from tmux"), testkit.Text("Hi, I read you through tmux."))
	s.api.On(testkit.PromptContains("after a wake"), testkit.Text("Still here."))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen:\n%s", x.screen())
			for _, r := range s.api.Requests() {
				t.Logf("request %s %s?%s: %d, last user message %q", r.Method, r.Path, r.RawQuery, r.Status, r.LastUser().Texts())
			}
		}
	})

	x.start(s, false)
	if n := len(s.api.Requests()); n != 0 {
		t.Errorf("got %d requests before the first prompt, want none", n)
	}
	x.send(first)
	s.waitReply(t, "Hi, I read you through tmux.")
	if !slices.ContainsFunc(records(t, s.transcript()), func(r record) bool { return r.Type == "user" && r.Message.Content.text() == first }) {
		t.Errorf("no user record in the transcript with the prompt as its content")
	}

	// Sleep and wake: the seed runs again over what Claude Code wrote, and
	// --resume carries the conversation on.
	x.stop()
	x.start(s, true)
	x.send(second)
	s.waitReply(t, "Still here.")

	turns := s.api.Turns()
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
