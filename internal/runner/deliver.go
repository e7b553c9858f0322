package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"kndl.dev/kndl/internal/build"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/tmux"
)

// A prompt reaches Claude Code through its external editor (Ctrl+G,
// chat:externalEditor): Claude Code runs $VISUAL on a file holding its input
// and takes what the file then holds as the new input, as it is. The Runner
// stages the prompt in the Session's mod directory, which the Sandbox sees
// read-only, and VISUAL is the Runner's editor script (editorScript), which
// copies it over that file. Measured on 2.1.328 (docs/claude-code.md): typed keys lose every tab
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
	// pressAgainAfter is how long after the editor key the editor not
	// having run at all (no open of the staged prompt, openWatch) is taken
	// as the key ignored, and it is pressed again: right after an
	// interrupt Claude Code ignored one (measured). Once the editor ran,
	// no key is pressed again for that prompt: one Claude Code got to
	// after the first had put a long prompt in ran the editor a second
	// time, which changed the prompt (docs/claude-code.md). Generous: on
	// a loaded host Claude Code takes seconds to run the editor and redraw
	// (the load test, at load average 40 and more, gave up at 3 s on most
	// of its first prompts), and a key it had not got to yet, pressed
	// again, would be that second run.
	pressAgainAfter = 7 * time.Second
	// resendAfter is when an Enter the box still shows the prompt after is
	// taken as lost, and pressed again; each time again it waits twice as
	// long, up to resendMax. One lost is pressed again in a second; a
	// Claude Code that is only slow (a starved host: in the full-size load
	// test up to 17 presses a prompt, a second apart) gets fewer keys to
	// work through.
	resendAfter = time.Second
	resendMax   = 4 * time.Second
	// unheardWaitDefault is how long a prompt Claude Code's input emptied
	// at is waited on for its UserPromptSubmit or its transcript before it
	// is typed again (session.unheardWait): the input emptying is Claude Code
	// reading it, and typing it again would send it twice. At 3 s it did,
	// at load average 30 after a Runner restart, the prompt's record in the
	// transcript 2.9 s old; 15 s is the wait the Hub had before version 3.
	// An Enter lost to the editor shows the prompt in the input again, and
	// is pressed again after resendAfter.
	unheardWaitDefault = 15 * time.Second
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

// editorEnv makes the editor script Claude Code's external editor. It
// goes after the Environment's Variables, so it is the one Claude Code
// sees: delivery depends on it. Claude Code splits it at spaces.
const editorEnv = "VISUAL=" + binDir + "/" + editorName + " " + modDir + "/" + stagedPrompt

// editorEnvBefore is the editor of a Claude Code an earlier Runner started,
// `kndl claude editor`, which the kndl binary still has: adopted after an
// upgrade, it still takes prompts.
const editorEnvBefore = "VISUAL=" + kndlBin + " claude editor " + modDir + "/" + stagedPrompt

// editorName is the editor script's file in the Runner's bin/, beside kndl.
const editorName = "editor"

// editorScript is Claude Code's external editor, run at Ctrl+G as
// `editor STAGED FILE`, FILE holding Claude Code's input: the prompt the
// Runner staged goes over FILE byte for byte; with none staged FILE stays as
// it is, so a person's Ctrl+G at the terminal, or a git commit that finds
// VISUAL, changes nothing. A shell script rather than the kndl binary: each
// prompt runs it, and on a loaded host the binary's start (about 65 ms of
// CPU, against 5 for the script) held the prompt up for seconds.
const editorScript = `#!/bin/sh
# kndl's editor for Claude Code: the prompt the Runner staged in $1, if any, over $2.
[ -e "$1" ] || exit 0
exec cat -- "$1" > "$2"
`

// msgTypeAgain is what the Runner logs each time it types a prompt again.
const msgTypeAgain = "Claude Code did not take the prompt; typing it again"

// onItsWay is the prompt being delivered, as the hook and the transcript
// tell of Claude Code taking it.
type onItsWay struct {
	text string
	took chan struct{} // closed once Claude Code took it
	once sync.Once
}

func newOnItsWay(text string) *onItsWay { return &onItsWay{text: text, took: make(chan struct{})} }

// taken records that Claude Code took it.
func (w *onItsWay) taken() { w.once.Do(func() { close(w.took) }) }

// deliver has Claude Code take a prompt: it puts the prompt in Claude
// Code's input, presses Enter once the input shows it (an Enter sent before
// then can be lost: measured 4 in 5 right after start), and waits for Claude
// Code to take it; each try that fails, it types again at once, until
// Claude Code takes it or the time the Hub gave is over.
func (s *session) deliver(ctx context.Context, req protocol.SessionDeliver) (protocol.SessionDelivered, error) {
	var out protocol.SessionDelivered
	ctx, cancel := context.WithTimeout(ctx, req.Within())
	defer cancel()
	var err error
	if req.Text, err = s.placeAttachments(ctx, req); err != nil {
		return out, err
	}
	s.typing.Lock()
	defer s.typing.Unlock()
	// The Hub sends the next prompt at the Stop hook, which fires before
	// Claude Code is done with the Turn: typed then, Claude Code queues the
	// prompt into the Turn that is ending and sends it twice (seen in the
	// e2e suite). Its transcript's turn_end says it is done.
	for deadline := time.Now().Add(idleWait); s.inTurn.Load() && time.Now().Before(deadline); {
		if err := pause(ctx, pollEvery); err != nil {
			return out, notTaken(ctx, &out, err)
		}
	}
	w := newOnItsWay(req.Text)
	s.sent.Store(w)
	var last error // why the last whole try failed
	for {
		out.Tries++
		err := s.try(ctx, w, req.Command, out.Tries > 1)
		if err == nil {
			out.Taken = true
			return out, nil
		}
		if ctx.Err() != nil {
			if last == nil {
				last = err
			}
			return out, notTaken(ctx, &out, last)
		}
		last = err
		s.log.Info(msgTypeAgain, "session", s.id, "try", out.Tries+1, "why", err)
	}
}

// notTaken fills in the reply of a prompt the time given ran out for, with
// why the last try failed; when the request's own context ended instead
// (the connection gone), it returns why as the request's error.
func notTaken(ctx context.Context, out *protocol.SessionDelivered, why error) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return why
	}
	out.Why = fmt.Sprintf("not taken in the %d tries the time given allowed: %v", out.Tries, why)
	return nil
}

// try types the prompt once, or on a try after the first presses Enter
// again if the input still shows it, and returns nil once Claude Code took
// it, or why this try failed.
func (s *session) try(ctx context.Context, w *onItsWay, command, again bool) error {
	if tookNow(w) { // told of while the last try gave up
		return nil
	}
	box, _ := inputBox(s.screen(ctx))
	if !(again && holds(box, "", w.text)) {
		if err := s.fill(ctx, box, w.text); err != nil {
			return err
		}
	}
	if err := s.keys(ctx, "Enter"); err != nil {
		return fmt.Errorf("submit the prompt: %w", err)
	}
	return s.submitted(ctx, w, command)
}

// fill puts text in Claude Code's input through its external editor and
// returns once the input box (before, when the editor key was pressed)
// shows it. It presses the editor key once, after an editor already
// running closes, and again only while the editor has not run since
// (pressAgainAfter); it waits for the box as long as ctx lets it.
func (s *session) fill(ctx context.Context, before, text string) error {
	staged := filepath.Join(s.dir, "mod", stagedPrompt)
	if err := writeOwned(staged, []byte(text), s.user); err != nil {
		return fmt.Errorf("stage the prompt: %w", err)
	}
	// Gone once the input holds it, so a later Ctrl+G (a person's at the
	// terminal) changes nothing.
	defer os.Remove(staged)
	watch, err := watchOpens(staged)
	if err != nil {
		// The screen alone says the editor ran, when it shows it running.
		s.log.Warn("the staged prompt cannot be watched for Claude Code's editor to open it", "session", s.id, "err", err)
	} else {
		defer watch.close()
	}
	var pressed time.Time
	presses, ran := 0, false
	for {
		box, _ := inputBox(s.screen(ctx))
		if holds(box, before, text) {
			return nil
		}
		if !ran && presses > 0 {
			opened := watch != nil && watch.opened()
			if ran = opened || editorRunning(box); ran {
				s.log.Debug("Claude Code ran its editor", "session", s.id, "after", time.Since(pressed), "open seen", opened)
			}
		}
		if !ran && !editorRunning(box) && (presses == 0 || time.Since(pressed) >= pressAgainAfter) {
			if presses > 0 {
				s.log.Info("Claude Code's editor did not run at its key; pressing it again", "session", s.id, "after", time.Since(pressed))
			}
			if err := s.keys(ctx, editorKey); err != nil {
				return fmt.Errorf("open Claude Code's editor: %w", err)
			}
			pressed = time.Now()
			presses++
		}
		if err := pause(ctx, pollEvery); err != nil {
			if ran {
				return fmt.Errorf("Claude Code ran its editor, but its input did not show the prompt: %w", err)
			}
			return fmt.Errorf("Claude Code did not run its editor at %d presses of its key: %w", presses, err)
		}
	}
}

// submitted waits, after Enter, for Claude Code to take the prompt: its
// UserPromptSubmit or its transcript (w.took), or for a command, which
// fires no hook, its input emptying. When Claude Code removed invisible
// characters at that Enter instead of sending (invisibleRemoved), it
// presses Enter once more. When the box still shows the prompt resendAfter
// later, that Enter was lost (seen right after Claude Code started, while
// it connected its MCP servers, and when the editor still ran), and it
// presses Enter again, waiting longer each time. It returns why when the
// input emptied and nothing told of the prompt for s.unheardWait: the
// caller types it again.
func (s *session) submitted(ctx context.Context, w *onItsWay, command bool) error {
	entered, resend := time.Now(), resendAfter
	confirmed := false
	var emptied time.Time
	for {
		if tookNow(w) {
			return nil
		}
		box, hints := inputBox(s.screen(ctx))
		if !blank(box) {
			emptied = time.Time{}
		}
		switch {
		case editorRunning(box):
			// An Enter pressed meanwhile is lost: pressed again as soon
			// as the input shows the prompt.
			entered = time.Now().Add(-resend)
		case blank(box) && command:
			return nil
		case blank(box) && emptied.IsZero():
			emptied = time.Now()
		case blank(box) && time.Since(emptied) >= s.unheardWait:
			return fmt.Errorf("Claude Code's input emptied at Enter, but no UserPromptSubmit or transcript told of the prompt within %s", s.unheardWait)
		case blank(box):
		case !confirmed && time.Since(entered) >= confirmAfter && invisibleRemoved(hints):
			confirmed = true
			if err := s.keys(ctx, "Enter"); err != nil {
				return err
			}
		case time.Since(entered) >= resend && holds(box, "", w.text) && !tookNow(w):
			// Claude Code keeps the prompt in its input until its
			// UserPromptSubmit hook has answered: one that reached the
			// Runner while the screen was read took the prompt.
			s.log.Info(msgTypeAgain, "session", s.id, "why", "the prompt was still in Claude Code's input "+resend.String()+" after Enter")
			entered, emptied, resend = time.Now(), time.Time{}, min(2*resend, resendMax)
			if err := s.keys(ctx, "Enter"); err != nil {
				return err
			}
		case time.Since(entered) >= resend && !holds(box, "", w.text):
			// The input shows something else (a person's keys): typed
			// again from the start.
			return fmt.Errorf("Claude Code's input shows %q, not the prompt", clip(box, 80))
		}
		if err := pause(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// tookNow reports whether Claude Code took w by now.
func tookNow(w *onItsWay) bool {
	select {
	case <-w.took:
		return true
	default:
		return false
	}
}

// editorRunning reports the input box Claude Code draws while its external
// editor runs ("Save and close the editor to continue…", 2.1.328): an Enter
// pressed then is lost, and an editor key is taken after it closes, running
// the editor again. On a loaded host it ran for seconds, and the Runner's
// second Ctrl+G and its Enter were both lost to it: the first prompts of
// five Sessions started at once waited for the Hub to type them again.
func editorRunning(box string) bool { return strings.Contains(box, "Save and close the editor") }

// clip cuts s to at most n bytes, at a character's start, for a log line.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
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
func (s *session) stopTurn(ctx context.Context) error {
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

// keys sends tmux key names to Claude Code's pane. Each is logged at
// debug, so a prompt that arrived changed can be read against the keys
// that typed it.
func (s *session) keys(ctx context.Context, keys ...string) error {
	s.log.Debug("keys to Claude Code", "session", s.id, "keys", keys)
	_, err := s.ctl.Run(ctx, tmux.Command("send-keys", append([]string{"-t", paneTarget}, keys...)...))
	return err
}

// tookPrompt is what the Runner makes of UserPromptSubmit's prompt: the
// prompt on its way is taken, and the result is a note saying how what was
// taken differs from it, or "" when it is the same or no prompt of the
// Runner's is on its way (a person typed at the terminal).
func (s *session) tookPrompt(took string) string {
	w := s.sent.Swap(nil)
	if w == nil {
		return ""
	}
	w.taken()
	if w.text == took {
		return ""
	}
	return "The prompt Claude Code took differs from the one sent: " + describeChange(w.text, took) + "."
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

// writeOwned is writeAtomic of a file that Claude Code's editor reads, its
// owner u when Claude Code runs as u (nil: root): the mod's folder is bound
// idmapped, so a host uid is the same uid inside.
func writeOwned(path string, data []byte, u *build.User) error {
	if u == nil {
		return writeAtomic(path, data)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Chown(tmp, u.UID, u.GID); err != nil {
		os.Remove(tmp)
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
