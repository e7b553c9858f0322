package claude_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	testenv.RequireRoot(t) // IS_SANDBOX=1 exists for root; run as Sandboxes do
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

// session is one Claude Code set up to run in a fresh working directory
// against a scripted model.
type session struct {
	api          *testkit.Anthropic
	work, config string
	conversation string
	argv, env    []string
}

func newSession(t *testing.T, bin claude.Binary) *session {
	s := &session{api: testkit.NewAnthropic(t, fakeToken), work: t.TempDir(), config: t.TempDir(), conversation: newUUID()}
	if err := claude.Seed(s.config, s.work); err != nil {
		t.Fatal(err)
	}
	var err error
	s.argv, s.env, err = claude.Launch{
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
	}.Command()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

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
	cmd := exec.CommandContext(ctx, s.argv[0], append(s.argv[1:], "-p", prompt)...)
	cmd.Dir, cmd.Env = s.work, s.env
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
	if !slices.Contains(turns[1].Params.Messages[0].Texts(), prompt) || !strings.Contains(strings.Join(roles, " "), "assistant user") {
		t.Errorf("second call's messages (roles %v) don't carry the earlier turn", roles)
	}
	s.checkOnlyMessages(t)
	if _, err := os.Stat(claude.TranscriptPath(s.config, s.work, s.conversation)); err != nil {
		t.Errorf("transcript not where TranscriptPath says: %v", err)
	}
}
