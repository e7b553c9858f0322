package redact

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// literals is one of several strings a match must hold; with fold they are
// lower-case and the text is read case-insensitively (ASCII).
type literals struct {
	alts []string
	fold bool
	at   []int // each string's anchor, if worked out (anchored)
}

// anchored is l with each string's anchor worked out once, for a
// literal read at every window or secret.
func (l literals) anchored() literals {
	l.at = make([]int, len(l.alts))
	for i, a := range l.alts {
		l.at[i] = anchor(a)
	}
	return l
}

// minLiteral is the fewest bytes a required literal of several strings
// has to be worth a search: one of a few single bytes ('=', ':', ',') is
// in most windows anyway. A lone byte is worth one IndexByte, found or
// remembered once a find (registry.holds): url-password's '@' spares its
// regexp most lines that hold a "://".
const minLiteral = 2

// requiredLiterals returns what every match of pattern holds, for a
// quick check before the regexp runs: the strings of its top-level
// concatenation, through groups and repeats of at least one, and of an
// alternation the ones all its branches hold, or one of each branch's.
// Neighbours that match one of a few strings each ([ \t](?:-H|--header))
// make one requirement of their products.
func requiredLiterals(pattern string) []literals {
	t, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	var out []literals
	for _, l := range required(t.Simplify()) {
		if !slices.ContainsFunc(out, l.equal) { // both branches of kubernetes-secret-yaml hold "secret"
			out = append(out, l)
		}
	}
	return out
}

func required(t *syntax.Regexp) []literals {
	if l, ok := exact(t); ok {
		return l.worth()
	}
	switch t.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return required(t.Sub[0])
	case syntax.OpRepeat:
		if t.Min >= 1 {
			return required(t.Sub[0])
		}
	case syntax.OpConcat:
		var out []literals
		var run literals // the product of the exact neighbours so far
		running := false
		for _, s := range t.Sub {
			if l, ok := exact(s); ok {
				if !running {
					run, running = l, true
				} else if p, ok := run.times(l); ok {
					run = p
				} else {
					out = append(out, run.worth()...)
					run = l
				}
				continue
			}
			if running {
				out = append(out, run.worth()...)
				running = false
			}
			out = append(out, required(s)...)
		}
		if running {
			out = append(out, run.worth()...)
		}
		return out
	case syntax.OpAlternate:
		return requiredOfAll(t.Sub)
	}
	return nil
}

// maxAlts bounds the strings of an exact set.
const maxAlts = 16

// exact returns the few strings every match of t is one of, if t is a
// literal, a small class, or groups, alternations, concatenations and
// options of those; ASCII only.
func exact(t *syntax.Regexp) (literals, bool) {
	switch t.Op {
	case syntax.OpLiteral:
		s := string(t.Rune)
		if len(s) != utf8.RuneCountInString(s) {
			return literals{}, false
		}
		if t.Flags&syntax.FoldCase != 0 {
			return literals{alts: []string{strings.ToLower(s)}, fold: true}, true
		}
		return literals{alts: []string{s}}, true
	case syntax.OpCharClass:
		var l literals
		for i := 0; i+1 < len(t.Rune); i += 2 {
			for c := t.Rune[i]; c <= t.Rune[i+1]; c++ {
				if c >= utf8.RuneSelf || len(l.alts) == maxAlts {
					return literals{}, false
				}
				l.alts = append(l.alts, string(rune(c)))
			}
		}
		return l, len(l.alts) > 0
	case syntax.OpCapture:
		return exact(t.Sub[0])
	case syntax.OpQuest:
		l, ok := exact(t.Sub[0])
		if !ok || len(l.alts) == maxAlts {
			return literals{}, false
		}
		l.alts = append(l.alts, "")
		return l, true
	case syntax.OpAlternate, syntax.OpConcat:
		var out literals
		for k, s := range t.Sub {
			l, ok := exact(s)
			if !ok {
				return literals{}, false
			}
			switch {
			case k == 0:
				out = l
			case t.Op == syntax.OpConcat:
				if out, ok = out.times(l); !ok {
					return literals{}, false
				}
			default:
				if out, ok = out.plus(l); !ok {
					return literals{}, false
				}
			}
		}
		return out, len(t.Sub) > 0
	}
	return literals{}, false
}

// folded is l read case-insensitively: an exact string holds its lower
// case when read so.
func (l literals) folded() literals {
	if l.fold {
		return l
	}
	out := literals{fold: true}
	for _, a := range l.alts {
		if a = strings.ToLower(a); !slices.Contains(out.alts, a) {
			out.alts = append(out.alts, a)
		}
	}
	return out
}

// times is every string of l followed by one of o, if no more than maxAlts.
func (l literals) times(o literals) (literals, bool) {
	if len(l.alts)*len(o.alts) > maxAlts {
		return literals{}, false
	}
	if l.fold != o.fold {
		l, o = l.folded(), o.folded()
	}
	out := literals{fold: l.fold}
	for _, a := range l.alts {
		for _, b := range o.alts {
			if !slices.Contains(out.alts, a+b) {
				out.alts = append(out.alts, a+b)
			}
		}
	}
	return out, true
}

// plus is the strings of l and of o, if no more than maxAlts.
func (l literals) plus(o literals) (literals, bool) {
	if l.fold != o.fold {
		l, o = l.folded(), o.folded()
	}
	out := literals{fold: l.fold, alts: slices.Clone(l.alts)}
	for _, b := range o.alts {
		if !slices.Contains(out.alts, b) {
			out.alts = append(out.alts, b)
		}
	}
	return out, len(out.alts) <= maxAlts
}

// worth is l as a requirement, if its every string has minLiteral bytes
// or it is a single byte.
func (l literals) worth() []literals {
	if l.shortest() < minLiteral && !(len(l.alts) == 1 && len(l.alts[0]) == 1) {
		return nil
	}
	return []literals{l}
}

// requiredOfAll is what one of branches, whichever matches, holds: the
// requirements every branch has, and the disjunction of each branch's
// longest.
func requiredOfAll(branches []*syntax.Regexp) []literals {
	each := make([][]literals, len(branches))
	for i, b := range branches {
		if each[i] = required(b); len(each[i]) == 0 {
			return nil
		}
	}
	var out []literals
	for _, l := range each[0] {
		if !slices.ContainsFunc(out, l.equal) && !slices.ContainsFunc(each[1:], func(ls []literals) bool { return !slices.ContainsFunc(ls, l.equal) }) {
			out = append(out, l)
		}
	}
	any := literals{fold: true}
	for _, ls := range each {
		best := slices.MaxFunc(ls, func(a, b literals) int { return a.shortest() - b.shortest() })
		for _, a := range best.folded().alts {
			if !slices.Contains(any.alts, a) {
				any.alts = append(any.alts, a)
			}
		}
	}
	return append(out, any)
}

func (l literals) equal(o literals) bool { return l.fold == o.fold && slices.Equal(l.alts, o.alts) }

func (l literals) shortest() int {
	n := -1
	for _, a := range l.alts {
		if n < 0 || len(a) < n {
			n = len(a)
		}
	}
	return n
}

// in reports whether s holds one of l's strings.
func (l literals) in(s string) bool {
	i, _ := l.index(s)
	return i >= 0
}

// index returns where in s one of l's strings is, and its length; with
// fold, a byte beyond ASCII counts as one of length 1 (see indexFold). It
// returns -1 if none is.
func (l literals) index(s string) (int, int) {
	if l.fold {
		if i := indexNonASCII(s); i >= 0 {
			return i, 1
		}
	}
	for k, a := range l.alts {
		i := -1
		if l.fold && l.at != nil {
			i = indexFoldAt(s, a, l.at[k])
		} else if l.fold {
			i = indexFold(s, a)
		} else {
			i = strings.Index(s, a)
		}
		if i >= 0 {
			return i, len(a)
		}
	}
	return -1, 0
}

// heldBy reports whether l is in every text that holds word, a needed word
// the automaton found in any case: one of l's strings is in word, and if
// l is exact, that string has no letter to be read in another case.
func (l literals) heldBy(word string) bool {
	return slices.ContainsFunc(l.alts, func(a string) bool {
		return strings.Contains(word, a) && (l.fold || strings.ToLower(a) == strings.ToUpper(a))
	})
}

// mayBeIn reports whether one of l's strings, exact, is in a text that
// reads as word case-folded.
func (l literals) mayBeIn(word string) bool {
	return !l.fold && slices.ContainsFunc(l.alts, func(a string) bool { return strings.Contains(word, strings.ToLower(a)) })
}

// longest is the most bytes of l's strings.
func (l literals) longest() int {
	n := 0
	for _, a := range l.alts {
		n = max(n, len(a))
	}
	return n
}

// indexFold returns where ASCII text s holds w, lower-case ASCII, in any
// case, or -1. Callers count a byte beyond ASCII as a hit (indexNonASCII):
// (?i)k matches the Kelvin sign and (?i)s the long s, which this doesn't
// read. It jumps between places of w's least common byte (anchor), in
// either case, by IndexByte: the ':' of kubernetes-secret-yaml's "kind:",
// not its 'k', which most text about keys and tokens is full of.
func indexFold(s, w string) int { return indexFoldAt(s, w, anchor(w)) }

// indexFoldAt is indexFold with w's anchor, j, worked out before.
func indexFoldAt(s, w string, j int) int {
	last := len(s) - len(w) + j // the last place w[j] may be
	a, b := w[j], upper(w[j])
	next := func(c byte, i int) int {
		if k := strings.IndexByte(s[i:last+1], c); k >= 0 {
			return i + k
		}
		return last + 1
	}
	na, nb := -1, -1 // the next a and b from i on, or last+1
	for i := j; i <= last; i++ {
		if na < i {
			na = next(a, i)
		}
		if nb < i {
			nb = na
			if b != a {
				nb = next(b, i)
			}
		}
		if i = min(na, nb); i > last {
			break
		}
		if strings.EqualFold(s[i-j:i-j+len(w)], w) {
			return i - j
		}
	}
	return -1
}

// anchor is the place in w of its least common byte in English text and
// code: a byte not a letter first (one case to look for), then the rarest
// letter.
func anchor(w string) int {
	best := 0
	for i := 1; i < len(w) && rarity[w[best]] < rarest; i++ {
		if rarity[w[i]] > rarity[w[best]] {
			best = i
		}
	}
	return best
}

// rarest is the rank of a byte that is not a lower-case letter: none is
// rarer, so anchor stops at the first (most stopwords and every URL
// holds one early).
const rarest = 26

// rarity ranks lower-case letters from the most common, and every other
// byte above them.
var rarity = func() (t [256]uint8) {
	const common = "etaoinsrhldcumfpgwybvkxjqz"
	for c := range t {
		t[c] = rarest
	}
	for i := 0; i < len(common); i++ {
		t[common[i]] = uint8(i)
	}
	return t
}()

// indexNonASCII returns where s holds a byte beyond ASCII, or -1.
func indexNonASCII(s string) int {
	i := 0
	// Sixteen bytes a step, as two words: each bit 7 of either set is
	// a byte beyond ASCII somewhere in them.
	for ; i+16 <= len(s); i += 16 {
		p := unsafe.Pointer(unsafe.StringData(s[i:]))
		if (*(*uint64)(p)|*(*uint64)(unsafe.Add(p, 8)))&0x8080808080808080 != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return i
		}
	}
	return -1
}
