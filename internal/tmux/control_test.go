package tmux

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"kndl.dev/kndl/internal/testenv"
)

// server starts a real tmux server on a private socket with one session and
// attaches a control client to it.
func server(t *testing.T, onOutput func(string, []byte)) (*Control, string) {
	t.Helper()
	testenv.RequireCommand(t, "tmux")
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	tm := func(args ...string) *exec.Cmd {
		return exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
	}
	if out, err := tm("new-session", "-d", "-s", "ctl", "-x", "80", "-y", "24", "sleep 3600").CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { tm("kill-server").Run() })
	cmd := tm("-C", "attach", "-t", "ctl")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	c, err := NewControl(stdin, stdout, onOutput)
	if err != nil {
		t.Fatal(err)
	}
	return c, dir
}

func TestQuoteRoundTripsEveryByte(t *testing.T) {
	c, dir := server(t, nil)
	var all strings.Builder
	for b := 1; b < 128; b++ {
		all.WriteByte(byte(b))
	}
	tests := map[string]string{
		"ascii":     all.String(),
		"shell":     `$HOME ~ ~/x 'single' "double" \back\\slash ; { } #{session_name} %1 $(id)`,
		"unicode":   "«quoted» — ✓ 日本語",
		"multiline": "line one\nline two\r\n\ttabbed",
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if _, err := c.Run(ctx, Command("set-buffer", "-b", "t", want)); err != nil {
				t.Fatalf("set-buffer: %v", err)
			}
			f := filepath.Join(dir, name)
			if _, err := c.Run(ctx, Command("save-buffer", "-b", "t", f)); err != nil {
				t.Fatalf("save-buffer: %v", err)
			}
			got, _ := os.ReadFile(f)
			if string(got) != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

func TestNewSessionEnvironmentStaysOffCommandLines(t *testing.T) {
	c, dir := server(t, nil)
	out := filepath.Join(dir, "env")
	ctx := context.Background()
	_, err := c.Run(ctx, Command("new-session", "-d", "-s", "work", "-e", "SECRET=s3cr3t value", "--",
		"sh", "-c", "echo \"$SECRET\" > "+out+"; sleep 3600"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitShort, "the pane writes its environment", func() bool {
		b, _ := os.ReadFile(out)
		return string(b) == "s3cr3t value\n"
	})
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "s3cr3t") {
			t.Fatalf("%s holds the value: %q", p, b)
		}
	}
}

func TestOutputAndErrors(t *testing.T) {
	var mu sync.Mutex
	var got strings.Builder
	c, _ := server(t, func(pane string, data []byte) {
		mu.Lock()
		got.Write(data)
		mu.Unlock()
	})
	ctx := context.Background()
	if _, err := c.Run(ctx, "no-such-command"); err == nil {
		t.Fatal("an unknown command did not fail")
	}
	if _, err := c.Run(ctx, "display -p x\nkill-server"); err == nil {
		t.Fatal("a command with a line break was sent")
	}
	lines, err := c.Run(ctx, Command("display", "-p", "#{session_name}"))
	if err != nil || len(lines) != 1 || lines[0] != "ctl" {
		t.Fatalf("display = %q, %v; want ctl", lines, err)
	}
	if _, err := c.Run(ctx, Command("respawn-pane", "-k", "-t", "ctl", "printf 'back\\\\slash\\001 done'; sleep 3600")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitShort, "the pane's output arrives unescaped", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(got.String(), "back\\slash\x01 done")
	})
}

func TestUnescape(t *testing.T) {
	tests := []struct{ in, want string }{
		{`plain`, "plain"},
		{`a\033[1mb`, "a\x1b[1mb"},
		{`back\134slash`, `back\slash`},
		{`\015\012`, "\r\n"},
		{`trailing\01`, `trailing\01`},
	}
	for _, tt := range tests {
		if got := string(Unescape(tt.in)); got != tt.want {
			t.Errorf("Unescape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRunMarkedCountsTheOutputBeforeTheReply(t *testing.T) {
	var mu sync.Mutex
	seen := uint64(0)
	c, _ := server(t, func(string, []byte) {
		mu.Lock()
		seen++
		mu.Unlock()
	})
	ctx := context.Background()
	count := func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	for i, cmd := range []string{"printf one; sleep 3600", "printf two; sleep 3600"} {
		before := count()
		if _, err := c.Run(ctx, Command("respawn-pane", "-k", "-t", "ctl", cmd)); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, testenv.WaitShort, "the pane's output", func() bool { return count() > before })
		_, mark, err := c.RunMarked(ctx, Command("display", "-p", "x"))
		if err != nil {
			t.Fatal(err)
		}
		// The pane is idle now: every output came before the reply.
		if got := count(); mark != got {
			t.Fatalf("round %d: mark %d, want the %d outputs seen", i, mark, got)
		}
	}
}

func TestRawKeysReachThePaneByteForByte(t *testing.T) {
	c, dir := server(t, nil)
	out := filepath.Join(dir, "keys")
	want := []byte{0x1b, '[', 'A', 0x03, 0x7f, 0xc3, 0xa9, '\r', 0, '"', '\\', '$', ';'}
	for len(want) < 1500 {
		want = append(want, byte(len(want)%251)+1)
	}
	ctx := context.Background()
	if _, err := c.Run(ctx, Command("respawn-pane", "-k", "-t", "ctl",
		"stty raw -echo; head -c "+strconv.Itoa(len(want))+" > "+out+"; sleep 3600")); err != nil {
		t.Fatal(err)
	}
	// stty must have run before the first byte arrives.
	testenv.Eventually(t, testenv.WaitShort, "the pane's reader starts", func() bool {
		_, err := os.Stat(out)
		return err == nil
	})
	cmds := RawKeys("ctl", want)
	if len(cmds) != 3 {
		t.Fatalf("%d commands for %d bytes, want 3", len(cmds), len(want))
	}
	for _, cmd := range cmds {
		if _, err := c.Run(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, testenv.WaitShort, "every byte arrives", func() bool {
		b, _ := os.ReadFile(out)
		return len(b) == len(want)
	})
	if got, _ := os.ReadFile(out); string(got) != string(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
