package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"kndl.dev/kndl/internal/sandbox"
)

// A Session that takes a warm pool Sandbox has its editor key pressed as
// it is bound, before the Hub sends its first prompt: Claude Code took 50
// to 60 ms from the key to running its editor (BenchmarkWarmPoolStart),
// which then runs beside the bind, the Session's Active and the Hub's
// delivery. The bind makes editorWait, a FIFO, in the mod directory and
// presses the key (openEditorEarly); the editor script, finding the FIFO
// and no prompt staged, opens it for reading, which blocks, costing
// nothing, until the Runner opens it (wakeEditor). The first delivery
// stages its prompt as any does and then wakes the editor, which copies
// the prompt as it always does: what it puts in Claude Code's input is the
// staged file, which the Sandbox sees read-only. The FIFO only says when:
// anything in the Sandbox that opens it (a FIFO on a read-only mount can be
// opened for writing) wakes the editor early, to find nothing staged and
// leave the input as it was. The FIFO is removed at the wake, so the editor
// waits once; a Session that takes no prompt within firstDeliveryWait has
// it woken with nothing staged (closeEditor). Only where a FIFO on the
// host is the same FIFO in the Sandbox, under crun: gVisor's Sentry has
// FIFOs of its own.
//
// The pool Sandbox's fill does not open the editor itself: Claude Code runs
// its editor synchronously, its event loop stopped until the editor exits,
// and one that had waited there for seconds took 130 to 185 ms from the
// editor's exit to showing the prompt, against 32 to 56 (measured, same
// benchmark): 60 ms more than the key it saves.

// editorWait is the FIFO in a pool Sandbox's mod directory its open editor
// waits on.
const editorWait = stagedPrompt + ".wait"

// hostFIFOs reports whether a FIFO the Runner makes in a Sandbox's mod
// directory is one the Sandbox's processes share with it.
func hostFIFOs(b sandbox.Backend) bool { return b.Name() == "crun" }

// openEditorEarly presses a just-bound pool Sandbox's editor key, its
// editor to wait on editorWait for the first prompt; the first delivery
// counts the key as its own (editorKeyAt).
func (s *session) openEditorEarly(ctx context.Context) {
	if !hostFIFOs(s.backend) {
		return
	}
	s.typing.Lock()
	defer s.typing.Unlock()
	fifo := filepath.Join(s.dir, "mod", editorWait)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		s.log.Warn("a Session's editor cannot wait for its first prompt", "session", s.id, "err", err)
		return
	}
	if err := s.keys(ctx, editorKey); err != nil {
		os.Remove(fifo)
		return
	}
	s.editorKeyAt = time.Now()
}

// wakeEditor ends an editor waiting on editorWait, which then copies what
// is staged, if anything, and reports whether there was a FIFO; it never
// blocks. The FIFO is opened for reading and writing, which wakes a reader
// waiting and never waits itself, and removed: an editor run after finds
// none and waits no more. An editor that found the FIFO and opens it only
// now opens it at once as long as release has not been called.
func (s *session) wakeEditor() (release func(), ok bool) {
	fifo := filepath.Join(s.dir, "mod", editorWait)
	fd, err := unix.Open(fifo, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if !errors.Is(err, unix.ENOENT) {
			s.log.Warn("wake Claude Code's waiting editor", "session", s.id, "err", err)
		}
		return nil, false
	}
	os.Remove(fifo)
	return func() { unix.Close(fd) }, true
}

// inputShown reports a screen of Claude Code's that shows its input box:
// two rules.
func inputShown(screen string) bool {
	n := 0
	for _, line := range strings.Split(screen, "\n") {
		if isRule(line) {
			n++
		}
	}
	return n >= 2
}

// closeEditor wakes an editor still waiting once the Session's first
// delivery is over or did not come, with nothing staged: Claude Code's
// input stays as it was.
func (s *session) closeEditor() {
	s.typing.Lock()
	defer s.typing.Unlock()
	if release, ok := s.wakeEditor(); ok {
		time.AfterFunc(time.Second, release)
		s.log.Info("Claude Code's editor waited for a first prompt that did not come; closed", "session", s.id)
	}
}
