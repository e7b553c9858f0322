package runner

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A change Claude Code makes to the prompts it takes (measured on 2.1.328,
// docs/claude-code.md), with what the Session's history says of it.
type promptChange struct {
	apply     func(string) (string, int)
	one, many string // what it says of 1 character changed, of %d
}

// promptChanges are in the order Claude Code makes them.
var promptChanges = []promptChange{
	{crToLF, "a carriage return became a line feed", "%d carriage returns (CR or CR LF) became line feeds"},
	{tabsToSpaces, "a tab became spaces", "%d tabs became spaces"},
	{dropInvisible, "an invisible or control character was removed", "%d invisible or control characters were removed"},
	{trimEnd, "a trailing whitespace character was removed", "%d trailing whitespace characters were removed"},
}

func (c promptChange) say(n int) string {
	if n == 1 {
		return c.one
	}
	return fmt.Sprintf(c.many, n)
}

// describeChange says how took differs from sent: the known changes that
// make one from the other, or else where they first differ.
func describeChange(sent, took string) string {
	if says, ok := knownChanges(sent, took); ok {
		return strings.Join(says, ", ")
	}
	return firstDifference(sent, took)
}

// sameTaken reports whether took is sent as Claude Code takes it: the same,
// or sent with some of the known changes made.
func sameTaken(sent, took string) bool {
	_, ok := knownChanges(sent, took)
	return ok
}

// knownChanges returns the fewest known changes that make took from sent,
// none when they are the same, and whether any set of them does.
func knownChanges(sent, took string) ([]string, bool) {
	if sent == took {
		return nil, true
	}
	n := len(promptChanges)
	// 2^4 tries, each linear.
	for size := 1; size <= n; size++ {
		for set := 1; set < 1<<n; set++ {
			if bitCount(set) != size {
				continue
			}
			cur, says := sent, []string(nil)
			for i, c := range promptChanges {
				if set&(1<<i) == 0 {
					continue
				}
				var k int
				if cur, k = c.apply(cur); k == 0 {
					break
				}
				says = append(says, c.say(k))
			}
			if len(says) == size && cur == took {
				return says, true
			}
		}
	}
	return nil, false
}

func bitCount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// firstDifference shows where two texts part, in characters, with what
// each has there, clipped.
func firstDifference(sent, took string) string {
	s, t := []rune(sent), []rune(took)
	p := 0
	for p < len(s) && p < len(t) && s[p] == t[p] {
		p++
	}
	q := 0
	for q < len(s)-p && q < len(t)-p && s[len(s)-1-q] == t[len(t)-1-q] {
		q++
	}
	return fmt.Sprintf("%d characters sent, %d taken; from character %d, %s was sent and %s taken",
		len(s), len(t), p+1, clipQuote(s[p:len(s)-q]), clipQuote(t[p:len(t)-q]))
}

// clipQuote quotes up to 40 characters, escaping what is not printable.
func clipQuote(r []rune) string {
	const most = 40
	if len(r) == 0 {
		return "nothing"
	}
	if len(r) > most {
		return fmt.Sprintf("%+q…", string(r[:most]))
	}
	return fmt.Sprintf("%+q", string(r))
}

func crToLF(s string) (string, int) {
	n := strings.Count(s, "\r")
	if n == 0 {
		return s, 0
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n"), n
}

func tabsToSpaces(s string) (string, int) {
	n := strings.Count(s, "\t")
	return strings.ReplaceAll(s, "\t", "    "), n
}

// dropInvisible removes control characters but tab and line feed, and
// format characters (zero-width spaces, direction marks, the byte order
// mark, soft hyphens).
func dropInvisible(s string) (string, int) {
	n := 0
	out := strings.Map(func(r rune) rune {
		if r != '\t' && r != '\n' && (unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r)) {
			n++
			return -1
		}
		return r
	}, s)
	return out, n
}

// trimEnd removes trailing whitespace as JavaScript's trimEnd does.
func trimEnd(s string) (string, int) {
	out := strings.TrimRightFunc(s, jsSpace)
	return out, utf8.RuneCountInString(s[len(out):])
}

// jsSpace is JavaScript's WhiteSpace and LineTerminator: Go's unicode
// spaces without U+0085, with U+FEFF.
func jsSpace(r rune) bool {
	return r == '\ufeff' || (r != '\u0085' && unicode.IsSpace(r))
}
