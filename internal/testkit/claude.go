package testkit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/testenv"
)

// FakeToken is the OAuth token a Claude session below runs on; the
// scripted model refuses any other.
const FakeToken = "sk-ant-oat01-testkit-fake-token"

// RealClaude installs the pinned Claude Code build into the cache shared
// between runs (the first run downloads about 370 MB from the npm registry).
// It needs root, as in a Sandbox (root, with IS_SANDBOX=1), and skips (or,
// under testenv.Strict, fails) without the registry.
func RealClaude(t testing.TB) claude.Binary {
	t.Helper()
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitBuild)
	defer cancel()
	b, err := claude.Install(ctx, filepath.Join(CacheDir(), "claude-code"), claude.Glibc,
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

// NewUUID returns a random version 4 UUID, as Claude Code's conversation ids are.
func NewUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Claude is one conversation of the real Claude Code set up to run on this
// host in a fresh working directory and config dir against a scripted model
// (API), in tmux on a private socket as the Runner runs it, or with -p.
type Claude struct {
	t            testing.TB
	API          *Anthropic
	Work, Config string
	Conversation string
	Launch       claude.Launch
	sock, conf   string // tmux's socket and configuration
	tmuxStarted  bool
}

// NewClaude sets up a conversation for bin. Its tmux server, if started, is
// killed when the test ends, and Claude Code waited for.
func NewClaude(t testing.TB, bin claude.Binary) *Claude {
	c := &Claude{t: t, API: NewAnthropic(t, FakeToken), Work: t.TempDir(), Config: t.TempDir(),
		Conversation: NewUUID()}
	tmp := t.TempDir()
	c.sock, c.conf = filepath.Join(tmp, "tmux.sock"), filepath.Join(tmp, "tmux.conf")
	bashEnv := filepath.Join(tmp, "bash-env")
	if err := os.WriteFile(bashEnv, []byte(claude.BashEnvScript), 0o644); err != nil {
		t.Fatal(err)
	}
	// A pane whose Claude Code exited stays, so a test can show why.
	if err := os.WriteFile(c.conf, []byte("set -g remain-on-exit on\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Launch = claude.Launch{
		Binary:       bin.Path,
		Conversation: c.Conversation,
		Base: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + t.TempDir(),
			"LANG=C.UTF-8", "ANTHROPIC_API_KEY=sk-ant-api-must-not-be-used"},
		SessionID:     "ses_test",
		ConfigDir:     c.Config,
		TZ:            "Europe/Copenhagen",
		RelayURL:      "http://127.0.0.1:9", // nothing listens: no mod loaded here
		SessionToken:  "session-token",
		OAuthToken:    FakeToken,
		ModelEndpoint: c.API.URL,
		BashEnv:       bashEnv,
	}
	t.Cleanup(c.cleanup)
	return c
}

// Command seeds the config dir, as before each start, and returns the
// command line and environment to start (or, with resume, wake) with.
func (c *Claude) Command(resume bool) (argv, env []string) {
	c.t.Helper()
	if err := claude.Seed(c.Config, c.Work); err != nil {
		c.t.Fatal(err)
	}
	l := c.Launch
	l.Resume = resume
	argv, env, err := l.Command()
	if err != nil {
		c.t.Fatal(err)
	}
	return argv, env
}

// Transcript is the conversation's transcript file.
func (c *Claude) Transcript() string {
	return claude.TranscriptPath(c.Config, c.Work, c.Conversation)
}

// Tmux runs tmux on the conversation's private socket, so tests never meet
// another server, and returns its output.
func (c *Claude) Tmux(args ...string) string {
	c.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", c.sock, "-f", c.conf}, args...)...)
	// The server starts with almost nothing: Claude Code's environment goes
	// with -e, as the Runner sets it.
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Start starts Claude Code in tmux, as the Runner does, and waits until it
// is ready for a prompt.
func (c *Claude) Start(resume bool) {
	t := c.t
	t.Helper()
	testenv.RequireCommand(t, "tmux")
	argv, env := c.Command(resume)
	args := []string{"new-session", "-d", "-s", "claude", "-x", "160", "-y", "48", "-c", c.Work}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	start := time.Now()
	c.tmuxStarted = true
	c.Tmux(append(append(args, "--"), argv...)...)
	// The footer's hint is drawn last; with it, no dialog is waiting.
	var screen string
	testenv.Eventually(t, testenv.WaitMedium, "Claude Code draws its prompt", func() bool {
		screen = c.Screen()
		return strings.Contains(screen, "shift+tab to cycle")
	})
	t.Logf("prompt drawn %v after start (resume %v):\n%s", time.Since(start), resume, screen)
}

// Send types prompt, waits until it is drawn, then presses Enter: an Enter
// sent at once after the text in the first seconds was lost 4 times in 5.
func (c *Claude) Send(prompt string) {
	c.t.Helper()
	c.Tmux("send-keys", "-t", "claude", "-l", "--", prompt)
	testenv.Eventually(c.t, testenv.WaitShort, "the prompt typed in", func() bool {
		return strings.Contains(c.Screen(), prompt)
	})
	c.Tmux("send-keys", "-t", "claude", "Enter")
}

// Keys sends tmux key names (Escape, C-c, …) to Claude Code.
func (c *Claude) Keys(keys ...string) {
	c.t.Helper()
	c.Tmux(append([]string{"send-keys", "-t", "claude"}, keys...)...)
}

// Screen is the visible pane, as text.
func (c *Claude) Screen() string { return c.Tmux("capture-pane", "-p", "-t", "claude") }

// CPU is the CPU Claude Code has spent so far: its own process's, and
// that of what it ran and waited for (its shell, git, the Bash tool).
func (c *Claude) CPU() (self, children time.Duration) {
	c.t.Helper()
	return ProcessCPU(strings.TrimSpace(c.Tmux("display", "-p", "-t", "claude", "#{pane_pid}")))
}

// Stop ends Claude Code as a Session's sleep does (tmux kill-session, a
// hangup), or with kill, as SIGKILL, and waits for it to exit.
func (c *Claude) Stop(kill bool) {
	c.t.Helper()
	pid, _ := strconv.Atoi(strings.TrimSpace(c.Tmux("display", "-p", "-t", "claude", "#{pane_pid}")))
	if kill {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	c.Tmux("kill-session", "-t", "claude")
	start := time.Now()
	testenv.Eventually(c.t, testenv.WaitMedium, "Claude Code exits", func() bool {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	})
	c.t.Logf("Claude Code exited %v after kill-session (SIGKILL first: %v)", time.Since(start), kill)
}

func (c *Claude) cleanup() {
	if !c.tmuxStarted {
		return
	}
	if c.t.Failed() {
		if out, err := exec.Command("tmux", "-S", c.sock, "capture-pane", "-p", "-t", "claude").CombinedOutput(); err == nil {
			c.t.Logf("screen:\n%s", out)
		}
		for _, r := range c.API.Requests() {
			c.t.Logf("request %s %s?%s: %d, last user message %s", r.Method, r.Path, r.RawQuery, r.Status, summary(r.LastUser()))
		}
	}
	// Claude Code writes to its config dir as it exits on the hangup: wait
	// for it, or removing the test's directories races it.
	out, _ := exec.Command("tmux", "-S", c.sock, "list-panes", "-a", "-F", "#{pane_pid}").Output()
	exec.Command("tmux", "-S", c.sock, "kill-server").Run()
	for _, f := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(f)
		testenv.Eventually(c.t, testenv.WaitMedium, "Claude Code exits on the hangup", func() bool {
			return pid <= 0 || syscall.Kill(pid, 0) == syscall.ESRCH
		})
	}
}
