package runner

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
)

// rule is an input box's border at 120 columns.
var rule = strings.Repeat("─", 120)

func TestInputBoxIsBetweenTheLastTwoRules(t *testing.T) {
	tests := []struct {
		name, screen, box, hints string
	}{
		{"empty prompt", "❯ earlier prompt\n\n● an answer with a rule\n" + rule + "\n❯ \n" + rule + "\n  ⏵⏵ bypass permissions on (shift+tab to cycle)",
			"❯ ", "● an answer with a rule\n  ⏵⏵ bypass permissions on (shift+tab to cycle)"},
		{"invisible characters removed", "● ok\n        Removed 2 invisible characters · review and press Enter to send\n" + rule + "\n❯ zerowidth\n  marks \n" + rule + "\n  ⏵⏵ bypass permissions on",
			"❯ zerowidth\n  marks ", "        Removed 2 invisible characters · review and press Enter to send\n  ⏵⏵ bypass permissions on"},
		{"taller than the screen", "  line 998\n  line 999\n" + rule + "\n  footer", "  line 998\n  line 999", "  footer"},
		{"no box", "Rewind\n  Enter to continue · Esc to cancel", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			box, hints := inputBox(tt.screen)
			if box != tt.box || hints != tt.hints {
				t.Fatalf("got box %q hints %q, want %q and %q", box, hints, tt.box, tt.hints)
			}
		})
	}
}

// TestBothInvisibleCharacterHintsAreRecognised: Claude Code says it
// removed invisible characters in one of two ways, and the Runner presses
// Enter again after either; not after the other hints of that kind.
func TestBothInvisibleCharacterHintsAreRecognised(t *testing.T) {
	for hint, want := range map[string]bool{
		"Removed 2 invisible characters · review and press Enter to send": true,
		"Removed 1 invisible character from your prompt":                  true,
		"Removed 3 invisible characters · nothing left to send":           false,
		"Removed 2 invisible characters from the pasted text":             false,
		"⏵⏵ bypass permissions on (shift+tab to cycle)":                   false,
	} {
		if got := invisibleRemoved("        " + hint + "\n  ⏵⏵ bypass permissions on"); got != want {
			t.Errorf("invisibleRemoved(%q) = %v, want %v", hint, got, want)
		}
	}
}

func TestHoldsComparesTheVisibleASCIITail(t *testing.T) {
	long := strings.Repeat("line of a long prompt\twith a tab\n", 2000) + "THE END"
	tests := []struct {
		name, box, before, text string
		want                    bool
	}{
		{"as typed", "❯ hello there", "❯ ", "hello there", true},
		{"tabs drawn as spaces, wrapped", "❯ a    b\n  c d", "❯ ", "a\tb\nc\td", true},
		{"composed and invisible left out", "❯ café zwsp", "❯ ", "cafe\u0301 zw\u200bsp", true},
		{"the end of a long prompt", "  line of a long prompt    with a tab\n  THE END", "❯ ", long, true},
		{"not yet", "❯ ", "❯ ", "hello there", false},
		{"only the start", "❯ hello", "❯ ", "hello there", false},
		{"no ASCII: once changed", "❯ 你好", "❯ ", "你好", true},
		{"no ASCII: unchanged", "❯ ", "❯ ", "你好", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := holds(tt.box, tt.before, tt.text); got != tt.want {
				t.Fatalf("holds(%q, %q, %q) = %v, want %v", tt.box, tt.before, clipText(tt.text), got, tt.want)
			}
		})
	}
}

func clipText(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func TestDescribeChangeNamesWhatClaudeCodeChanged(t *testing.T) {
	tests := []struct{ sent, took, want string }{
		{"a\tb\t\tc", "a    b        c", "3 tabs became spaces"},
		{"one\r\ntwo\rthree", "one\ntwo\nthree", "2 carriage returns (CR or CR LF) became line feeds"},
		{"trailing  \n\n", "trailing", "4 trailing whitespace characters were removed"},
		{"zw\u200bsp\x07 ", "zwsp", "2 invisible or control characters were removed, a trailing whitespace character was removed"},
		{"x\r\n\ty\r\n", "x\n    y", "2 carriage returns (CR or CR LF) became line feeds, a tab became spaces, a trailing whitespace character was removed"},
		{"watch me", "atch me", `8 characters sent, 7 taken; from character 1, "w" was sent and nothing taken`},
		{"cafe\u0301", "caf\u00e9", `5 characters sent, 4 taken; from character 4, "e\u0301" was sent and "\u00e9" taken`},
	}
	for _, tt := range tests {
		if got := describeChange(tt.sent, tt.took); got != tt.want {
			t.Errorf("describeChange(%q, %q) = %q, want %q", tt.sent, tt.took, got, tt.want)
		}
	}
}

// TestUserPromptSubmitThatDiffersLeavesANote: the prompt UserPromptSubmit
// reports is compared with the one the Runner typed; a difference becomes a
// note right after the prompt's record, once, and a prompt the Runner did not
// type (a person's, at the terminal) is not compared.
func TestUserPromptSubmitThatDiffersLeavesANote(t *testing.T) {
	r := &Runner{sessions: map[string]*session{}, log: slog.New(slog.DiscardHandler)}
	s := r.newSession("s1")
	r.sessions["s1"] = s
	s.sent.Store(newOnItsWay("a\tb  "))
	r.hook(context.Background(), "s1", []byte(`{"hook_event_name":"UserPromptSubmit","prompt":"a\tb"}`))
	s.transcript([]protocol.Event{{Kind: protocol.EventTurnStart}, {Kind: protocol.EventPrompt, Text: "a\tb"},
		{Kind: protocol.EventText, Text: "ok"}, {Kind: protocol.EventTurnEnd}}, map[string]int64{"s1.jsonl": 10})
	// Not the Runner's: nothing to compare.
	r.hook(context.Background(), "s1", []byte(`{"hook_event_name":"UserPromptSubmit","prompt":"typed by a person"}`))
	s.transcript([]protocol.Event{{Kind: protocol.EventPrompt, Text: "typed by a person"}}, map[string]int64{"s1.jsonl": 20})
	got := r.sent()
	if len(got) != 4 {
		t.Fatalf("sent %+v, want two signals and two batches", got)
	}
	if k := kinds(got[1]); len(k) != 5 || k[2] != protocol.EventNote ||
		got[1].Events[2].Text != "The prompt Claude Code took differs from the one sent: 2 trailing whitespace characters were removed." {
		t.Fatalf("first batch %+v, want the note right after the prompt", got[1].Events)
	}
	if k := kinds(got[3]); len(k) != 1 {
		t.Fatalf("second batch %+v, want the prompt alone", got[3].Events)
	}
}
