package redact

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// literals is one of several strings a match must hold; with fold they are
// lower-case and the text is read case-insensitively (ASCII).
type literals struct {
	alts []string
	fold bool
}

// minLiteral is the fewest bytes a required literal has to be worth a
// search: a single '-' or ':' is in most windows anyway.
const minLiteral = 2

// requiredLiterals returns what every match of pattern holds, for a
// quick check before the regexp runs: the literals of its top-level
// concatenation, through groups and repeats of at least one, and of an
// alternation the ones all its branches hold, or one of each branch's.
func requiredLiterals(pattern string) []literals {
	t, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	return required(t.Simplify())
}

func required(t *syntax.Regexp) []literals {
	switch t.Op {
	case syntax.OpLiteral:
		if l, ok := literalOf(t); ok {
			return []literals{l}
		}
	case syntax.OpCapture, syntax.OpPlus:
		return required(t.Sub[0])
	case syntax.OpRepeat:
		if t.Min >= 1 {
			return required(t.Sub[0])
		}
	case syntax.OpConcat:
		var out []literals
		for _, s := range t.Sub {
			out = append(out, required(s)...)
		}
		return out
	case syntax.OpAlternate:
		return requiredOfAll(t.Sub)
	}
	return nil
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
		for _, a := range best.alts {
			if !best.fold {
				// An exact literal holds its lower case when read folded.
				a = strings.ToLower(a)
			}
			if !slices.Contains(any.alts, a) {
				any.alts = append(any.alts, a)
			}
		}
	}
	return append(out, any)
}

// literalOf is the literal t as a requirement, if it is ASCII and long
// enough to be worth one.
func literalOf(t *syntax.Regexp) (literals, bool) {
	s := string(t.Rune)
	if len(s) < minLiteral || len(s) != utf8.RuneCountInString(s) {
		return literals{}, false
	}
	fold := t.Flags&syntax.FoldCase != 0
	if fold {
		s = strings.ToLower(s)
	}
	return literals{alts: []string{s}, fold: fold}, true
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
	for _, a := range l.alts {
		if l.fold && containsFold(s, a) || !l.fold && strings.Contains(s, a) {
			return true
		}
	}
	return false
}

// holdsAll reports whether s holds each of needs.
func holdsAll(s string, needs []literals) bool {
	for _, l := range needs {
		if !l.in(s) {
			return false
		}
	}
	return true
}

// containsFold reports whether s holds w, lower-case ASCII, in any case,
// or holds a byte beyond ASCII: (?i)k matches the Kelvin sign and (?i)s
// the long s, which this doesn't read.
func containsFold(s, w string) bool {
	first := w[0]
	other := first
	if 'a' <= first && first <= 'z' {
		other = first - 'a' + 'A'
	}
	for i := 0; i+len(w) <= len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return true
		}
		if c != first && c != other {
			continue
		}
		if strings.EqualFold(s[i:i+len(w)], w) {
			return true
		}
	}
	for i := max(len(s)-len(w)+1, 0); i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	return false
}
