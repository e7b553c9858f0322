package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/tmux"
)

// A prompt reaches Claude Code through its external editor (Ctrl+G,
// chat:externalEditor): Claude Code runs $VISUAL on a file holding its input
// and takes what the file then holds as the new input, as it is. The Runner
// stages the prompt in the Session's mod directory, which the Sandbox sees
// read-only, and VISUAL is `kndl claude editor`, which copies it over that
// file. Measured on 2.1.328 (docs/claude-code.md): typed keys lose every tab
// (Tab is a key), submit at a CR and compose combining marks; a bracketed
// paste turns tabs into four spaces and CR into LF, composes combining marks
// too, and one of over 800 UTF-16 units or 2 line breaks becomes
// "[Pasted text #N]", so 64 KiB takes hundreds of pastes (6 s). Through the
// editor tabs and combining marks stay and 64 KiB lands at once.

const (
	// stagedPrompt is the file of the Session's mod directory that holds
	// the prompt on its way while the editor runs.
	stagedPrompt = "prompt"
	// editorKey opens Claude Code's external editor (its default binding).
	editorKey = "C-g"
	// fillWait bounds how long the prompt may take to show in the input
	// box. The editor key is pressed again every fillRetry meanwhile (the
	// editor replaces the input, so a second press does no harm): right
	// after an interrupt Claude Code ignored it (measured). On a loaded
	// host Claude Code takes seconds to run the editor and redraw (the load
	// test, at load average 40 and more, gave up at 3 s on most of its
	// first prompts); with the wait for the Turn before it and the one for
	// Enter, it stays within the Hub's 15 s delivery timeout.
	fillWait  = 7 * time.Second
	fillRetry = 500 * time.Millisecond
	// submitWait bounds the wait for the input box to empty after Enter,
	// and resendAfter is when an Enter the box still shows the prompt
	// after is taken as lost.
	submitWait  = 4 * time.Second
	resendAfter = time.Second
	// confirmAfter is how long after Enter the Runner presses Enter again
	// when Claude Code removed invisible characters instead of sending: it
	// ignores an Enter within 150 ms of the one that removed them (2.1.328).
	confirmAfter = 300 * time.Millisecond
	// idleWait bounds how long a prompt waits for the transcript to say
	// the Turn before it is over.
	idleWait = 3 * time.Second
	// pollEvery is how often the pane is read while waiting on it.
	pollEvery = 10 * time.Millisecond
)

// editorEnv makes `kndl claude editor` Claude Code's external editor. It
// goes after the Environment's Variables, so it is the one Claude Code
// sees: delivery depends on it. Claude Code splits it at spaces.
const editorEnv = "VISUAL=" + kndlBin + " claude editor " + modDir + "/" + stagedPrompt

// deliver puts a prompt in Claude Code's input, presses Enter once the
// input shows it (an Enter sent before then can be lost: measured 4 in 5
// right after start), and waits for the input to empty.
func (r *Runner) deliver(ctx context.Context, req protocol.SessionDeliver) error {
	s, err := r.session(req.SessionID)
	if err != nil {
		return err
	}
	if req.Text, err = r.placeAttachments(ctx, req); err != nil {
		return err
	}
	s.typing.Lock()
	defer s.typing.Unlock()
	// The Hub sends the next prompt at the Stop hook, which fires before
	// Claude Code is done with the Turn: typed then, Claude Code queues the
	// prompt into the Turn that is ending and sends it twice (seen in the
	// e2e suite). Its transcript's turn_end says it is done.
	for deadline := time.Now().Add(idleWait); s.inTurn.Load() && time.Now().Before(deadline); {
		if err := pause(ctx, pollEvery); err != nil {
			return err
		}
	}
	s.sent.Store(&req.Text)
	box, _ := inputBox(r.screen(ctx, s))
	if !(req.Retry && holds(box, "", req.Text)) {
		if err := r.fill(ctx, s, box, req.Text); err != nil {
			return err
		}
	}
	if err := r.keys(ctx, s, "Enter"); err != nil {
		return fmt.Errorf("submit the prompt: %w", err)
	}
	r.submitted(ctx, s, req.Text)
	return nil
}

// fill puts text in Claude Code's input through its external editor and
// returns once the input box (before, when the editor key was pressed)
// shows it.
func (r *Runner) fill(ctx context.Context, s *session, before, text string) error {
	staged := filepath.Join(r.sessionDir(s.id), "mod", stagedPrompt)
	if err := writeAtomic(staged, []byte(text)); err != nil {
		return fmt.Errorf("stage the prompt: %w", err)
	}
	// Gone once the input holds it, so a later Ctrl+G (a person's at the
	// terminal, or one pressed again here) changes nothing.
	defer os.Remove(staged)
	deadline := time.Now().Add(fillWait)
	for {
		if err := r.keys(ctx, s, editorKey); err != nil {
			return fmt.Errorf("open Claude Code's editor: %w", err)
		}
		for again := time.Now().Add(fillRetry); time.Now().Before(again); {
			if box, _ := inputBox(r.screen(ctx, s)); holds(box, before, text) {
				return nil
			}
			if err := pause(ctx, pollEvery); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Claude Code's input did not show the prompt within %s", fillWait)
		}
	}
}

// submitted waits for the input box to empty after Enter. When Claude Code
// removed invisible characters at that Enter instead of sending
// (invisibleRemoved), it presses Enter once more. When the box still shows the
// prompt resendAfter later, that Enter was lost (seen right after Claude
// Code started, while it connected its MCP servers: the Hub typed the
// prompt again 15 s later, and that Enter took), and it presses Enter
// again. It gives up quietly after submitWait: the Hub types the prompt
// again if UserPromptSubmit does not come.
func (r *Runner) submitted(ctx context.Context, s *session, text string) {
	entered := time.Now()
	confirmed := false
	for deadline := entered.Add(submitWait); time.Now().Before(deadline); {
		box, hints := inputBox(r.screen(ctx, s))
		if blank(box) {
			return
		}
		switch {
		case !confirmed && time.Since(entered) >= confirmAfter && invisibleRemoved(hints):
			confirmed = true
			if r.keys(ctx, s, "Enter") != nil {
				return
			}
		case time.Since(entered) >= resendAfter && holds(box, "", text):
			entered = time.Now()
			if r.keys(ctx, s, "Enter") != nil {
				return
			}
		}
		if pause(ctx, pollEvery) != nil {
			return
		}
	}
}

// invisibleRemoved reports whether Claude Code's hints say it removed
// invisible characters from the prompt at that Enter and kept it in the
// input: "Removed N invisible characters · review and press Enter to send"
// or "… from your prompt" (both on 2.1.328, from one run to the next).
func invisibleRemoved(hints string) bool {
	return strings.Contains(hints, "invisible character") &&
		(strings.Contains(hints, "press Enter to send") || strings.Contains(hints, "from your prompt"))
}

// Escape, as Claude Code reads it alone. A bare ESC is the start of a
// sequence: with the next key soon after, Claude Code read the pair as
// Alt+key (measured on 2.1.328: after a stop-turn "watch me" arrived as
// "atch me", and a Turn went on). CSI 27 u is the kitty keyboard
// protocol's Escape, a whole sequence Claude Code takes as Escape (it
// interrupted the Turn, and the next prompt arrived whole).
const escapeKey = "\x1b[27u"

// escapeGap spaces stop-turns: two Escapes within 800 ms at an idle prompt
// open Claude Code's Rewind dialog (its double-press window on 2.1.328),
// which would take the next prompt's keys.
const escapeGap = 900 * time.Millisecond

// stopTurn interrupts the running Turn, as Escape does at the keyboard.
func (r *Runner) stopTurn(ctx context.Context, id string) error {
	s, err := r.session(id)
	if err != nil {
		return err
	}
	s.typing.Lock()
	defer s.typing.Unlock()
	if err := pause(ctx, time.Until(s.escaped.Add(escapeGap))); err != nil {
		return err
	}
	for _, cmd := range tmux.RawKeys(paneTarget, []byte(escapeKey)) {
		if _, err := s.ctl.Run(ctx, cmd); err != nil {
			return err
		}
	}
	s.escaped = time.Now()
	return nil
}

// keys sends tmux key names to Claude Code's pane.
func (r *Runner) keys(ctx context.Context, s *session, keys ...string) error {
	_, err := s.ctl.Run(ctx, tmux.Command("send-keys", append([]string{"-t", paneTarget}, keys...)...))
	return err
}

// tookPrompt is what the Runner makes of UserPromptSubmit's prompt: a note
// saying how it differs from the prompt sent, or "" when it is the same or
// no prompt of the Runner's is on its way (a person typed at the terminal).
func (s *session) tookPrompt(took string) string {
	sent := s.sent.Swap(nil)
	if sent == nil || *sent == took {
		return ""
	}
	return "The prompt Claude Code took differs from the one sent: " + describeChange(*sent, took) + "."
}

// inputBox splits a screen of Claude Code into the text of its input box,
// between the last two rules, and its hints: the line above the box (where
// "Removed N invisible characters" goes, measured) and what is drawn below
// it. When the input is taller than the screen, the box starts at the top.
func inputBox(screen string) (box, hints string) {
	lines := strings.Split(screen, "\n")
	end := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if !isRule(lines[i]) {
			continue
		}
		if end < 0 {
			end = i
			continue
		}
		above := ""
		if i > 0 {
			above = lines[i-1] + "\n"
		}
		return strings.Join(lines[i+1:end], "\n"), above + strings.Join(lines[end+1:], "\n")
	}
	if end < 0 {
		return "", ""
	}
	return strings.Join(lines[:end], "\n"), strings.Join(lines[end+1:], "\n")
}

// isRule reports a line drawn with box-drawing ─ across the pane.
func isRule(line string) bool {
	line = strings.TrimSpace(line)
	return strings.HasPrefix(line, "──") && strings.Count(line, "─") >= 20
}

// tailLen is how much of a prompt's end must show in the input box.
const tailLen = 16

// holds reports whether an input box shows text: its last tailLen visible
// ASCII characters, which Claude Code draws as they are. What it may draw
// otherwise (tabs as spaces, combining marks composed, invisible and
// control characters left out, wrapped lines indented) is left out of the
// comparison. A text with no such character is shown once the box has
// changed from before and is not empty.
func holds(box, before, text string) bool {
	tail := graphic(text)
	if tail == "" {
		return !blank(box) && box != before
	}
	if len(tail) > tailLen {
		tail = tail[len(tail)-tailLen:]
	}
	return strings.Contains(graphic(box), tail)
}

// graphic keeps the visible ASCII characters of s but those a combining
// mark follows (Claude Code draws e and U+0301 as é).
func graphic(s string) string {
	var b strings.Builder
	for i, c := range s {
		if c <= ' ' || c >= 0x7f {
			continue
		}
		if next, _ := utf8.DecodeRuneInString(s[i+1:]); unicode.In(next, unicode.Mn, unicode.Mc, unicode.Me) {
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// blank reports an input box with nothing in it but its prompt mark.
func blank(box string) bool {
	return !strings.ContainsFunc(box, func(r rune) bool { return !unicode.IsSpace(r) && r != '❯' })
}

// writeAtomic writes a file whole or not at all, so the editor never reads
// half a prompt.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// pause waits for d, or less if ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
