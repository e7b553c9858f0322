package claude_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"kndl.dev/kndl/internal/testenv"
)

// TestRealPromptInputPaths measures what each way into Claude Code's input
// does to a prompt, and what Claude Code does at Enter whatever the way
// (docs/claude-code.md): typed keys (send-keys -l), a bracketed paste
// (ESC[200~ … ESC[201~), and its external editor (Ctrl+G runs $VISUAL on a
// file holding the input), which the Runner uses.
func TestRealPromptInputPaths(t *testing.T) {
	s := newSession(t)
	staged := filepath.Join(t.TempDir(), "prompt")
	s.Launch.Base = append(s.Launch.Base, "VISUAL=cp "+staged)
	s.Start(false)
	ways := map[string]func(string){
		"typed":  func(p string) { s.Tmux("send-keys", "-t", "claude", "-l", "--", p) },
		"pasted": func(p string) { s.raw("\x1b[200~" + p + "\x1b[201~") },
		"editor": func(p string) {
			if err := os.WriteFile(staged, []byte(p), 0o600); err != nil {
				t.Fatal(err)
			}
			s.Keys("C-g")
		},
	}
	const folded = "<pasted_content"
	digits := strings.Repeat("0123456789", 80)
	var long strings.Builder
	for i := 0; long.Len() < 64<<10; i++ {
		fmt.Fprintf(&long, "%d\tcolumn\t«ünïcode» 𝄞 e\u0301 ✓\n", i)
	}
	big := strings.TrimSpace(long.String())
	tests := []struct{ way, name, text, want string }{
		{"typed", "a tab is lost", "a\tb\t\tc", "abc"},
		{"typed", "combining marks are composed", "cafe\u0301", "caf\u00e9"},
		{"pasted", "tabs become spaces, CR LF", "a\tb\r\nc", "a    b\nc"},
		{"pasted", "combining marks are composed", "cafe\u0301", "caf\u00e9"},
		{"pasted", "800 UTF-16 units stay text", digits, digits},
		{"pasted", "801 are folded", digits + "x", folded},
		{"pasted", "2 line breaks stay text", "one\ntwo\nthree", "one\ntwo\nthree"},
		{"pasted", "3 are folded", "one\ntwo\nthree\nfour", folded},
		{"editor", "what it keeps", "\n  \tleading, a\ttab, e\u0301 a\u0308, 𝄞 😀 👨\u200d👩\u200d👧 🇩🇰", ""},
		{"editor", "64 KiB", big, ""},
		{"editor", "Enter changes CR, trailing whitespace and control characters", "one\r\ntwo\rthree\x07 \t\n\n", "one\ntwo\nthree"},
	}
	for _, tt := range tests {
		t.Run(tt.way+": "+tt.name, func(t *testing.T) {
			want := tt.want
			if want == "" {
				want = tt.text
			}
			shown := asciiTail(want)
			if want == folded {
				shown = "Pastedtext"
			}
			start := time.Now()
			got := s.deliver(t, func() { ways[tt.way](tt.text) }, shown)
			t.Logf("%d bytes %s: at the model %v after the first key", len(tt.text), tt.way, time.Since(start))
			if want == folded && !strings.Contains(got, folded) {
				t.Fatalf("the model received %+q, want it folded", clipped(got))
			}
			if want != folded && got != want {
				t.Fatalf("the model received another text than sent: %s", testenv.Diff(got, want))
			}
		})
	}

	t.Run("invisible characters are removed at the first Enter, sent at the second", func(t *testing.T) {
		calls := len(s.API.Turns())
		ways["editor"]("zero\u200bwidth and\u200e marks")
		s.shown(t, "zero")
		s.Keys("Enter")
		// It says one of two things (both seen on 2.1.328, from one run
		// to the next): "· review and press Enter to send", or "from
		// your prompt"; either way the cleaned prompt waits in the input.
		testenv.Eventually(t, testenv.WaitShort, "Claude Code says it removed them", func() bool {
			sc := s.Screen()
			return strings.Contains(sc, "Removed 2 invisible characters · review and press Enter to send") ||
				strings.Contains(sc, "Removed 2 invisible characters from your prompt")
		})
		if len(s.API.Turns()) != calls {
			t.Fatal("the first Enter sent the prompt")
		}
		// Claude Code ignores an Enter within 150 ms of that one, and,
		// after "from your prompt", at times the one at 300 ms too: Enter
		// goes as the Runner presses it, at 300 ms, then each second the
		// prompt is still not sent.
		turns := s.turns()
		enters, next := 0, time.Now().Add(300*time.Millisecond)
		testenv.Eventually(t, testenv.WaitShort, "the cleaned prompt sent", func() bool {
			if len(s.API.Turns()) > calls && s.turns() > turns {
				return true
			}
			if time.Now().After(next) {
				s.Keys("Enter")
				enters, next = enters+1, time.Now().Add(time.Second)
			}
			return false
		})
		t.Logf("sent at Enter %d after the one that removed them", enters)
		texts := s.API.Turns()[calls].LastUser().Texts()
		if got := texts[len(texts)-1]; got != "zerowidth and marks" {
			t.Fatalf("the model received %+q", got)
		}
	})

	t.Run("a bare Escape takes the next key as Alt+key", func(t *testing.T) {
		if got := s.deliver(t, func() { s.Keys("Escape"); ways["typed"]("watch me") }, "atchme"); got != "atch me" {
			t.Fatalf("the model received %q, want the first key lost", got)
		}
	})
	t.Run("CSI 27 u is Escape alone", func(t *testing.T) {
		if got := s.deliver(t, func() { s.raw("\x1b[27u"); ways["typed"]("watch me") }, "watchme"); got != "watch me" {
			t.Fatalf("the model received %q, want it whole", got)
		}
	})
	t.Run("two Escapes 300 ms apart open Rewind", func(t *testing.T) {
		s.raw("\x1b[27u")
		time.Sleep(300 * time.Millisecond) // the gap measured
		s.raw("\x1b[27u")
		testenv.Eventually(t, testenv.WaitShort, "the Rewind dialog", func() bool { return strings.Contains(s.Screen(), "Rewind") })
		s.raw("\x1b[27u")
		testenv.Eventually(t, testenv.WaitShort, "the Rewind dialog closes", func() bool { return !strings.Contains(s.Screen(), "Rewind") })
	})
}

// raw writes bytes to Claude Code's pane as a terminal would.
func (s *session) raw(data string) {
	args := []string{"send-keys", "-t", "claude", "-H"}
	for i := 0; i < len(data); i++ {
		args = append(args, fmt.Sprintf("%02x", data[i]))
	}
	s.Tmux(args...)
}

// turns counts the finished Turns in the transcript.
func (s *session) turns() int {
	b, _ := os.ReadFile(s.Transcript())
	return strings.Count(string(b), `"subtype":"turn_duration"`)
}

// shown waits for the screen to show text.
func (s *session) shown(t *testing.T, text string) {
	t.Helper()
	testenv.Eventually(t, testenv.WaitShort, "Claude Code shows "+text, func() bool { return strings.Contains(s.Screen(), text) })
}

// deliver runs put, which fills Claude Code's input, presses Enter once the
// input box shows shown (ASCII, without spaces; "" presses it at once), and
// returns the prompt of the model call that follows, once its Turn has
// ended. An Enter sent while the editor still runs was lost.
func (s *session) deliver(t *testing.T, put func(), shown string) string {
	t.Helper()
	calls, turns := len(s.API.Turns()), s.turns()
	put()
	if shown != "" {
		testenv.Eventually(t, testenv.WaitShort, "the input shows "+shown, func() bool { return inputShows(s.Screen(), shown) })
	}
	// On a loaded host Claude Code may drop an Enter (seen at load
	// average 40), as the Runner knows: press it again each 2 s while no
	// Turn began, as the Runner does, so one lost key does not run into
	// the next case.
	s.Keys("Enter")
	next := time.Now().Add(2 * time.Second)
	testenv.Eventually(t, testenv.WaitMedium, "the Turn", func() bool {
		if len(s.API.Turns()) > calls && s.turns() > turns {
			return true
		}
		if time.Now().After(next) {
			t.Logf("no Turn 2 s after Enter; pressing it again")
			s.Keys("Enter")
			next = time.Now().Add(2 * time.Second)
		}
		return false
	})
	texts := s.API.Turns()[calls].LastUser().Texts()
	return texts[len(texts)-1]
}

// inputShows reports whether Claude Code's input box, the lines above the
// last rule up to the one before, holds shown once spaces and what is not
// ASCII are left out.
func inputShows(screen, shown string) bool {
	lines := strings.Split(screen, "\n")
	end := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "────") {
			continue
		}
		if end >= 0 {
			return strings.Contains(ascii(strings.Join(lines[i+1:end], "")), shown)
		}
		end = i
	}
	return end >= 0 && strings.Contains(ascii(strings.Join(lines[:end], "")), shown)
}

// asciiTail is the last 6 visible ASCII characters of s, but those before a
// combining mark (Claude Code draws them composed).
func asciiTail(s string) string {
	var b []rune
	rs := []rune(s)
	for i, r := range rs {
		if r > ' ' && r < 0x7f && !(i+1 < len(rs) && unicode.Is(unicode.M, rs[i+1])) {
			b = append(b, r)
		}
	}
	return string(b[max(0, len(b)-6):])
}

func ascii(s string) string {
	return strings.Map(func(r rune) rune {
		if r > ' ' && r < 0x7f {
			return r
		}
		return -1
	}, s)
}

func clipped(s string) string {
	if r := []rune(s); len(r) > 120 {
		return string(r[:60]) + "…" + string(r[len(r)-60:])
	}
	return s
}
