package runner

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTheEditorScriptPutsTheStagedPromptInTheFile: the editor Claude Code
// runs at Ctrl+G, run as Claude Code runs it (VISUAL split at spaces, the
// file last), writes the staged prompt over the file byte for byte, up to
// 64 KiB and in every plane, and with nothing staged leaves the file as it
// is and succeeds.
func TestTheEditorScriptPutsTheStagedPromptInTheFile(t *testing.T) {
	dir := t.TempDir()
	editor := filepath.Join(dir, editorName)
	if err := os.WriteFile(editor, []byte(editorScript), 0o755); err != nil {
		t.Fatal(err)
	}
	staged, file := filepath.Join(dir, stagedPrompt), filepath.Join(dir, "claude prompt.md")
	run := func() {
		t.Helper()
		visual := strings.Fields(strings.TrimPrefix(strings.ReplaceAll(editorEnv, modDir+"/"+stagedPrompt, staged), "VISUAL="))
		visual[0] = editor
		if out, err := exec.Command(visual[0], append(visual[1:], file)...).CombinedOutput(); err != nil {
			t.Fatalf("the editor failed: %v %s", err, out)
		}
	}
	os.WriteFile(file, []byte("what Claude Code had"), 0o600)
	run()
	if b, _ := os.ReadFile(file); string(b) != "what Claude Code had" {
		t.Fatalf("with nothing staged the file holds %q, want it unchanged", b)
	}
	prompt := "-n a\ttab, e\u0301, 𝄞 😀 👨\u200d👩\u200d👧, \U000E0067, CR LF\r\n trailing  \n" + strings.Repeat("x\u00e9\u4e2d", 64<<10/6)
	os.WriteFile(staged, []byte(prompt), 0o600)
	run()
	if b, _ := os.ReadFile(file); string(b) != prompt {
		t.Fatalf("the file holds %d bytes, want the %d staged exactly", len(b), len(prompt))
	}
}

// TestAWaitingEditorPutsInThePromptStagedBeforeItsWakeOnce: the editor a
// warm pool Sandbox's Claude Code runs before its first prompt, finding
// editorWait and nothing staged, waits; woken once the prompt is staged it
// writes it over the file byte for byte, the FIFO gone, so the editor run
// again (a person's Ctrl+G) waits no more and changes nothing. Woken with
// nothing staged (the Session took no prompt, or something in the Sandbox
// opened the FIFO) it leaves the file as it is. With no FIFO the wake
// reports none; it never blocks.
func TestAWaitingEditorPutsInThePromptStagedBeforeItsWakeOnce(t *testing.T) {
	dir := t.TempDir()
	editor := filepath.Join(dir, editorName)
	if err := os.WriteFile(editor, []byte(editorScript), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "mod"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := &session{id: "s", dir: dir, log: slog.New(slog.DiscardHandler)}
	staged, fifo, file := filepath.Join(dir, "mod", stagedPrompt), filepath.Join(dir, "mod", editorWait), filepath.Join(dir, "claude prompt.md")
	start := func() chan error {
		t.Helper()
		done := make(chan error, 1)
		cmd := exec.Command(editor, staged, file)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		return done
	}
	// waiting fails the test unless the editor still runs 100 ms on.
	waiting := func(done chan error) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("with the FIFO and nothing staged the editor ended (%v), want it waiting", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	wake := func(done chan error) {
		t.Helper()
		release, ok := s.wakeEditor()
		if !ok {
			t.Fatal("the wake found no FIFO")
		}
		defer release()
		if err := <-done; err != nil {
			t.Fatalf("the editor failed: %v", err)
		}
		if _, err := os.Stat(fifo); !os.IsNotExist(err) {
			t.Fatalf("the FIFO after the wake: %v, want it gone", err)
		}
	}
	if _, ok := s.wakeEditor(); ok {
		t.Fatal("no FIFO, yet the wake reports one")
	}

	os.WriteFile(file, []byte("what Claude Code had"), 0o600)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := start()
	waiting(done)
	prompt := "-n a\ttab, e\u0301, 𝄞 😀, CR LF\r\n trailing  \n" + strings.Repeat("x\u00e9\u4e2d", 64<<10/6)
	if err := writeAtomic(staged, []byte(prompt)); err != nil {
		t.Fatal(err)
	}
	wake(done)
	if b, _ := os.ReadFile(file); string(b) != prompt {
		t.Fatalf("the file holds %d bytes, want the %d staged exactly", len(b), len(prompt))
	}

	// Run again, nothing staged and no FIFO: it ends at once, the file as it is.
	os.Remove(staged)
	os.WriteFile(file, []byte("what Claude Code had"), 0o600)
	if err := <-start(); err != nil {
		t.Fatal(err)
	}
	// Woken with nothing staged: the file as it is.
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done = start()
	waiting(done)
	wake(done)
	if b, _ := os.ReadFile(file); string(b) != "what Claude Code had" {
		t.Fatalf("woken with nothing staged the file holds %q, want it unchanged", b)
	}
}
