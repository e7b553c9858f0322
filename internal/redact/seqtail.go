package redact

import (
	"regexp/syntax"
	"slices"
	"strings"
)

// A seqTail is a tail anchored at its word that is a plain sequence:
// literals and runs of one class's bytes, at most one capture group around
// some of them, a leading \b and one of a few ends (gitleaks' usual one,
// [^\w-] or the text's end, \b, $). Most Marked rules are such (ghp_…,
// glpat-…, hf_…), and Go's backtracker cost about as much as all the rest
// of a hit's work for one. Runs of varying length are tried longest first,
// as a backtracking search tries them; at most one may vary widely and
// the others by maxTries lengths together, so a place costs at most
// maxTries reads of the text after it.
type seqTail struct {
	bound bool // a leading \b: the text begins with a word byte
	elems []seqElem
	// group is the first and last element the capture group holds (the
	// secret), if it has one (open >= 0).
	open, close int
	end         seqEnd
	fold        bool // the usual end is case-folded (\N, \R)
}

// A seqElem is a literal (lit, in either case if fold), one of a few
// (lits: AKIA|ASIA|…, none the start of another, so at most one is at a
// place) or a run of class's bytes, min to max of them (max -1: no bound).
type seqElem struct {
	lit      string
	fold     bool
	lits     []string
	class    *[256]bool
	min, max int
}

// maxNarrow is the most a run's length may vary and not count as wide;
// maxTries bounds the ways the narrow runs' lengths combine.
const (
	maxNarrow = 8
	maxTries  = 100
)

type seqEnd uint8

const (
	endNone    seqEnd = iota
	endUsual          // secretEnd
	endNotWord        // (?:[^\w-]|\z)
	endBound          // \b
	endText           // $
)

// seqOf returns tail, ^(?:…), as a seqTail, or nil if it is not one.
func seqOf(tail string) *seqTail {
	t, err := syntax.Parse(tail, syntax.Perl)
	if err != nil {
		return nil
	}
	subs := flatConcat(t)
	if len(subs) < 2 || subs[0].Op != syntax.OpBeginText {
		return nil
	}
	subs = subs[1:]
	q := &seqTail{open: -1, close: -1}
	if subs[0].Op == syntax.OpWordBoundary {
		q.bound, subs = true, subs[1:]
	}
	if n := len(subs); n > 0 {
		switch end := subs[n-1]; {
		case end.Equal(mustParse(secretEnd)):
			q.end = endUsual
		case end.Equal(mustParse(`(?i)` + secretEnd)):
			q.end, q.fold = endUsual, true
		case end.Equal(mustParse(`(?:[^\w-]|\z)`)):
			q.end = endNotWord
		case end.Op == syntax.OpWordBoundary:
			q.end = endBound
		case end.Op == syntax.OpEndText:
			q.end = endText
		}
		if q.end != endNone {
			subs = subs[:n-1]
		}
	}
	wide, tries := 0, 1
	for _, s := range subs {
		inner := []*syntax.Regexp{s}
		if s.Op == syntax.OpCapture {
			if q.open >= 0 || s.Cap != 1 {
				return nil
			}
			inner = flatConcat(s.Sub[0])
			q.open = len(q.elems)
		}
		for _, e := range inner {
			el, ok := seqElemOf(e)
			if !ok {
				return nil
			}
			switch {
			case el.class == nil || el.min == el.max:
			case el.max < 0 || el.max-el.min > maxNarrow:
				wide++
			default:
				tries *= el.max - el.min + 1
			}
			q.elems = append(q.elems, el)
		}
		if s.Op == syntax.OpCapture {
			q.close = len(q.elems) - 1
			if q.close < q.open {
				return nil
			}
		}
	}
	if wide > 1 || tries > maxTries || len(q.elems) == 0 {
		return nil
	}
	return q
}

// seqElemOf reads t as a literal or a greedy run of a class.
func seqElemOf(t *syntax.Regexp) (seqElem, bool) {
	switch t.Op {
	case syntax.OpLiteral:
		s := string(t.Rune)
		if indexNonASCII(s) >= 0 {
			return seqElem{}, false
		}
		return seqElem{lit: s, fold: t.Flags&syntax.FoldCase != 0}, true
	case syntax.OpCharClass:
		return seqElem{class: asciiClass(t), min: 1, max: 1}, true
	case syntax.OpAlternate:
		strs, ok := exactStrings(t)
		if !ok || !prefixFreeExact(strs) {
			return seqElem{}, false
		}
		return seqElem{lits: strs}, true
	case syntax.OpRepeat, syntax.OpPlus, syntax.OpStar, syntax.OpQuest:
		class := runClass(t.Sub[0])
		if t.Flags&syntax.NonGreedy != 0 || class == nil {
			return seqElem{}, false
		}
		e := seqElem{class: class}
		e.min, e.max = repeatBounds(t)
		return e, true
	}
	return seqElem{}, false
}

// repeatBounds is how often a repeat (x{n,m}, x+, x*, x?) takes its
// operand: at least least, at most most, -1 for no bound.
func repeatBounds(t *syntax.Regexp) (least, most int) {
	switch t.Op {
	case syntax.OpPlus:
		return 1, -1
	case syntax.OpStar:
		return 0, -1
	case syntax.OpQuest:
		return 0, 1
	}
	return t.Min, t.Max
}

// runClass is the ASCII bytes t matches if it is a class or one byte
// (={0,3}), else nil.
func runClass(t *syntax.Regexp) *[256]bool {
	if t.Op == syntax.OpCharClass {
		return asciiClass(t)
	}
	strs, ok := exactStrings(t)
	if !ok || t.Op != syntax.OpLiteral || len(t.Rune) != 1 {
		return nil
	}
	var c [256]bool
	for _, s := range strs {
		c[s[0]] = true
	}
	return &c
}

// find appends to m[:0] the submatch indexes of the tail's match in s, as
// FindStringSubmatchIndex returns them, and returns it, or nil. s must be
// ASCII: beyond it, (?i) makes a class hold the Kelvin sign. A find runs at
// every hit of its word, so it fills the caller's array rather than make
// one.
func (q *seqTail) find(s string, m []int) []int {
	if q.bound && (len(s) == 0 || !wordChar(s[0])) {
		return nil
	}
	var at [16]int // where each element begins, and the last ends
	if len(q.elems) >= len(at) {
		return nil
	}
	e := q.match(s, 0, 0, &at)
	if e < 0 {
		return nil
	}
	m = append(m[:0], 0, e)
	if q.open >= 0 {
		m = append(m, at[q.open], at[q.close+1])
	}
	return m
}

// match reads q.elems[i:] and the end at s[p:], each run as long as it
// can be first, as a backtracking search tries them; it returns where
// the match ends, or -1.
func (q *seqTail) match(s string, i, p int, at *[16]int) int {
	for ; i < len(q.elems); i++ {
		at[i] = p
		el := &q.elems[i]
		if el.lits != nil {
			k := slices.IndexFunc(el.lits, func(l string) bool { return strings.HasPrefix(s[p:], l) })
			if k < 0 {
				return -1
			}
			p += len(el.lits[k])
			continue
		}
		if el.class == nil {
			if len(s)-p < len(el.lit) || !(s[p:p+len(el.lit)] == el.lit || el.fold && strings.EqualFold(s[p:p+len(el.lit)], el.lit)) {
				return -1
			}
			p += len(el.lit)
			continue
		}
		n := len(s) - p
		if el.max >= 0 {
			n = min(n, el.max)
		}
		n = run(s, p, n, el.class)
		if n < el.min {
			return -1
		}
		if el.min != el.max {
			// The longest run that lets the rest match.
			for k := n; k >= el.min; k-- {
				if e := q.match(s, i+1, p+k, at); e >= 0 {
					return e
				}
			}
			return -1
		}
		p += n
	}
	at[i] = p
	return q.endAt(s, p)
}

// endAt is where q's end that begins at s[p] ends, or -1.
func (q *seqTail) endAt(s string, p int) int {
	switch q.end {
	case endUsual:
		return secretEndAt(s, p, q.fold)
	case endNotWord:
		if p == len(s) || !wordChar(s[p]) && s[p] != '-' {
			return min(p+1, len(s))
		}
		return -1
	case endBound:
		if before, after := p > 0 && wordChar(s[p-1]), p < len(s) && wordChar(s[p]); before != after {
			return p
		}
		return -1
	case endText:
		if p == len(s) {
			return p
		}
		return -1
	}
	return p
}

// prefixFreeExact reports whether no string of strs begins another.
func prefixFreeExact(strs []string) bool {
	for i, a := range strs {
		for j, b := range strs {
			if i != j && strings.HasPrefix(b, a) {
				return false
			}
		}
	}
	return len(strs) > 0
}
