package redact

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// gitleaks' named rules (its GenerateSemiGenericRegex, 95 of them) share
// what lies between the name and the secret: a few name bytes, spaces or
// quotes, an operator, quotes or spaces again. assignSeparators is that
// part as their tails hold it, after the name's alternatives.
const assignSeparators = `(?i)(?:[ \t\w.-]{0,20})[\s'"]{0,3}(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[\x60'"\s=]{0,5}`

// An assignTail is a named rule's tail split where its secret begins: the
// name's regexp, the separators read by hand (Go's backtracker paid for
// their bounded repeats at every byte they might end on, about 6 µs a
// run of generic-api-key's tail), and the secret with what must follow it
// as a regexp tried only where the separators can end. It finds the match
// the whole tail finds, the first in the order a backtracking search tries
// them: the longest run of name bytes first, then of spaces, the
// operators in their order, and the longest run after the operator.
type assignTail struct {
	// name is ^(?:name)$, held to the one of words, lower case, that
	// begins the text: no word begins a longer one, so the name matches
	// in one length at most (and no slice is made for where).
	name  *regexp.Regexp
	words []string
	// cases, by word, has a bit for each way of writing the word's letters
	// that name matches (bit k of the index: the k-th letter is upper
	// case), for a word of at most maxCaseLetters letters, else nil: a
	// name is read at every hit of its word, and the regexp cost about
	// as much as the rest of the tail (generic-api-key's (?-i:[Aa]pi|API)).
	cases  [][]uint64
	secret *regexp.Regexp // ^(secret)(?:end)
	// parts, if set, are the secret's alternatives read by hand, each a run
	// of one class's bytes (generic-api-key's [\w.=-]{10,150}) or a
	// regexp ^(alternative)(?:end); ends says the end is gitleaks' usual
	// one, a quote, space or ';', \n or \r written out, or the text's end
	// (foldEnd: \N and \R too).
	parts   []secretPart
	foldEnd bool
}

type secretPart struct {
	class    *[256]bool
	min, max int // max -1: no bound
	re       *regexp.Regexp
	// seq, if set, is re read by hand: a sequence of greedy runs of one
	// class's bytes each (generic-api-key's [a-z0-9][a-z0-9+/]{11,}={0,3},
	// at 10-20 µs a base64 secret in Go's backtracker).
	seq []classRun
}

// A classRun is min to max (-1: no bound) bytes of class, as many as
// can be first.
type classRun struct {
	class    *[256]bool
	min, max int
}

// splitAssign returns tail as an assignTail, or nil where tail is not of
// the shared form or its name could match in two lengths at one place.
func splitAssign(tail *regexp.Regexp) *assignTail {
	t, err := syntax.Parse(tail.String(), syntax.Perl)
	if err != nil {
		return nil
	}
	subs := flatConcat(t)
	seps := flatConcat(mustParse(assignSeparators))
	// ^, the name, the separators, the secret, what ends it.
	k := 1
	for k+len(seps)+2 <= len(subs) && !equalAll(subs[k:k+len(seps)], seps) {
		k++
	}
	if subs[0].Op != syntax.OpBeginText || k == 1 || k+len(seps)+2 != len(subs) || subs[k+len(seps)].Op != syntax.OpCapture {
		return nil
	}
	name := &syntax.Regexp{Op: syntax.OpConcat, Sub: subs[1:k]}
	secret, end := subs[len(subs)-2], subs[len(subs)-1]
	words, ok := finiteStrings(name)
	// A capture would number the groups otherwise, and an assertion about
	// the byte before the secret can't be read from where it begins.
	if !ok || hasOp(name, syntax.OpCapture) || hasOp(end, syntax.OpCapture) || !prefixFree(words) ||
		hasOp(secret, syntax.OpWordBoundary) || hasOp(secret, syntax.OpNoWordBoundary) || hasOp(secret, syntax.OpBeginLine) {
		return nil
	}
	a := &assignTail{
		name:   regexp.MustCompile(`^(?:` + name.String() + `)$`),
		words:  words,
		secret: regexp.MustCompile(`^` + secret.String() + `(?:` + end.String() + `)`),
	}
	for _, w := range words {
		a.cases = append(a.cases, nameCases(a.name, w))
	}
	a.splitSecret(secret.Sub[0], end)
	return a
}

// splitSecret sets a.parts where end is gitleaks' usual one.
func (a *assignTail) splitSecret(secret, end *syntax.Regexp) {
	switch {
	case end.Equal(mustParse(secretEnd)):
	case end.Equal(mustParse(`(?i)` + secretEnd)):
		a.foldEnd = true
	default:
		return
	}
	alts := []*syntax.Regexp{secret}
	if secret.Op == syntax.OpAlternate {
		alts = secret.Sub
	}
	for _, alt := range alts {
		r := secretPart{min: alt.Min, max: alt.Max}
		switch alt.Op {
		case syntax.OpPlus:
			r.min, r.max = 1, -1
		case syntax.OpStar:
			r.min, r.max = 0, -1
		}
		if (alt.Op == syntax.OpRepeat || alt.Op == syntax.OpPlus || alt.Op == syntax.OpStar) &&
			alt.Flags&syntax.NonGreedy == 0 && alt.Sub[0].Op == syntax.OpCharClass {
			r.class = asciiClass(alt.Sub[0])
		} else {
			r.re = regexp.MustCompile(`^(` + alt.String() + `)(?:` + end.String() + `)`)
			r.seq = classRuns(alt)
		}
		a.parts = append(a.parts, r)
	}
}

// classRuns is t as a sequence of greedy runs of one class's bytes each,
// if it is a concatenation of character classes, literals and greedy
// repeats of a class or of one byte, with at most one run of no bound
// or more than maxRunSpread lengths and at most maxRunWays ways of
// taking the others (a bounded number of tries for each length of the
// one), else nil.
func classRuns(t *syntax.Regexp) []classRun {
	var out []classRun
	wide, ways := 0, 1
	for _, e := range flatConcat(t) {
		r := classRun{min: 1, max: 1}
		sub := e
		switch e.Op {
		case syntax.OpRepeat, syntax.OpPlus, syntax.OpStar, syntax.OpQuest:
			if e.Flags&syntax.NonGreedy != 0 {
				return nil
			}
			sub = e.Sub[0]
			r.min, r.max = repeatBounds(e)
		}
		switch {
		case sub.Op == syntax.OpCharClass:
			r.class = asciiClass(sub)
		case sub.Op == syntax.OpLiteral && (len(sub.Rune) == 1 || sub == e):
			for _, c := range sub.Rune[:len(sub.Rune)-1] {
				b, ok := literalClass(c, sub.Flags)
				if !ok {
					return nil
				}
				out = append(out, classRun{class: b, min: 1, max: 1})
			}
			b, ok := literalClass(sub.Rune[len(sub.Rune)-1], sub.Flags)
			if !ok {
				return nil
			}
			r.class = b
		default:
			return nil
		}
		if r.max < 0 || r.max-r.min > maxRunSpread {
			wide++
		} else {
			ways *= r.max - r.min + 1
		}
		if wide > 1 || ways > maxRunWays {
			return nil
		}
		out = append(out, r)
	}
	return out
}

// maxRunSpread bounds the lengths a run of classRuns may take but one,
// and maxRunWays the ways of taking them all.
const maxRunSpread, maxRunWays = 8, 64

// literalClass is the class of an ASCII rune of a literal with flags, or
// false beyond ASCII.
func literalClass(c rune, flags syntax.Flags) (*[256]bool, bool) {
	if c >= utf8.RuneSelf {
		return nil, false
	}
	var b [256]bool
	b[c] = true
	if flags&syntax.FoldCase != 0 && isLetter(byte(c)) {
		b[c|0x20], b[c&^0x20] = true, true
	}
	return &b, true
}

// seqIn is where the runs seq, then the secret's end, match from s[p:],
// the lengths tried as a backtracking search tries them (the longest run
// first, from the first run on), as the secret's end and the secret's
// ends; or -1.
func (a *assignTail) seqIn(s string, p int, seq []classRun) (int, int) {
	if len(seq) == 0 {
		return a.endAt(s, p), p
	}
	r := seq[0]
	n := len(s) - p
	if r.max >= 0 {
		n = min(n, r.max)
	}
	for k := run(s, p, n, r.class); k >= r.min; k-- {
		if e, q := a.seqIn(s, p+k, seq[1:]); e >= 0 {
			return e, q
		}
	}
	return -1, -1
}

// secretEnd is what follows the secret in gitleaks' named rules.
const secretEnd = `(?:[\x60'"\s;]|\\[nr]|$)`

// asciiClass is the ASCII bytes of a character class.
func asciiClass(t *syntax.Regexp) *[256]bool {
	var c [256]bool
	for i := 0; i+1 < len(t.Rune); i += 2 {
		for r := t.Rune[i]; r <= t.Rune[i+1] && r < utf8.RuneSelf; r++ {
			c[r] = true
		}
	}
	return &c
}

// secretIn appends to dst[:0] the submatch indexes of the secret and its
// end at s[p:], by hand, as a.secret finds them, and returns it, or nil.
func (a *assignTail) secretIn(s string, p int, dst []int) []int {
	for _, r := range a.parts {
		if r.seq != nil {
			if e, q := a.seqIn(s, p, r.seq); e >= 0 {
				return append(dst[:0], p, e, p, q)
			}
			continue
		}
		if r.re != nil {
			if m := r.re.FindStringSubmatchIndex(s[p:]); m != nil {
				for i := range m {
					m[i] += p
				}
				return m
			}
			continue
		}
		n := len(s) - p
		if r.max >= 0 {
			n = min(n, r.max)
		}
		n = run(s, p, n, r.class)
		for k := n; k >= r.min; k-- {
			if e := a.endAt(s, p+k); e >= 0 {
				return append(dst[:0], p, e, p, p+k)
			}
		}
	}
	return nil
}

// endAt is where the secret's end that begins at s[i] ends, or -1.
func (a *assignTail) endAt(s string, i int) int { return secretEndAt(s, i, a.foldEnd) }

// secretEndAt is where gitleaks' usual end (secretEnd, with fold: its
// case-folded form) that begins at s[i] ends, or -1.
func secretEndAt(s string, i int, fold bool) int {
	switch {
	case i == len(s):
		return i
	case secretEndByte[s[i]]:
		return i + 1
	case s[i] == '\\' && i+1 < len(s) && (s[i+1] == 'n' || s[i+1] == 'r' || fold && (s[i+1] == 'N' || s[i+1] == 'R')):
		return i + 2
	}
	return -1
}

var secretEndByte = byteClass("`'\"\t\n\f\r ;")

func equalAll(a, b []*syntax.Regexp) bool {
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func mustParse(pattern string) *syntax.Regexp {
	t, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		panic(err)
	}
	return t
}

// flatConcat is t's sequence of elements, through nested concatenations.
func flatConcat(t *syntax.Regexp) []*syntax.Regexp {
	if t.Op != syntax.OpConcat {
		return []*syntax.Regexp{t}
	}
	var out []*syntax.Regexp
	for _, s := range t.Sub {
		out = append(out, flatConcat(s)...)
	}
	return out
}

func hasOp(t *syntax.Regexp, op syntax.Op) bool {
	if t.Op == op {
		return true
	}
	for _, s := range t.Sub {
		if hasOp(s, op) {
			return true
		}
	}
	return false
}

// finiteStrings is every string t matches, lower-cased, if they are few
// (a name's alternatives: passw(?:or)?d, (?-i:[Aa]pi|API)).
func finiteStrings(t *syntax.Regexp) ([]string, bool) { return stringsOf(t, false) }

// exactStrings is every ASCII string t matches, each case of a folded
// letter apart, if they are few and t holds no group: runes beyond ASCII
// are left out, for a text read as ASCII.
func exactStrings(t *syntax.Regexp) ([]string, bool) { return stringsOf(t, true) }

// maxStrings bounds the strings stringsOf makes.
const maxStrings = 64

// stringsOf is finiteStrings, or exactStrings if exact.
func stringsOf(t *syntax.Regexp, exact bool) ([]string, bool) {
	switch t.Op {
	case syntax.OpLiteral:
		if !exact {
			return []string{strings.ToLower(string(t.Rune))}, true
		}
		out := []string{""}
		for _, r := range t.Rune {
			if r >= utf8.RuneSelf {
				return nil, false
			}
			cs := []string{string(r)}
			if c := byte(r); t.Flags&syntax.FoldCase != 0 && isLetter(c) {
				cs = []string{string(c | 0x20), string(c &^ 0x20)}
			}
			if out = cross(out, cs); len(out) > maxStrings {
				return nil, false
			}
		}
		return out, true
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(t.Rune); i += 2 {
			for r := t.Rune[i]; r <= t.Rune[i+1] && (!exact || r < utf8.RuneSelf); r++ {
				if out = append(out, strings.ToLower(string(r))); exact {
					out[len(out)-1] = string(r)
				}
				if len(out) > maxStrings {
					return nil, false
				}
			}
		}
		return out, true
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpCapture:
		if exact {
			return nil, false // a group would number the submatches
		}
		return stringsOf(t.Sub[0], exact)
	case syntax.OpQuest:
		s, ok := stringsOf(t.Sub[0], exact)
		return append(s, ""), ok
	case syntax.OpAlternate, syntax.OpConcat:
		out := []string{""}
		if t.Op == syntax.OpAlternate {
			out = nil
		}
		for _, sub := range t.Sub {
			s, ok := stringsOf(sub, exact)
			if !ok {
				return nil, false
			}
			if t.Op == syntax.OpAlternate {
				out = append(out, s...)
			} else {
				out = cross(out, s)
			}
			if len(out) > maxStrings {
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

// cross is each of a followed by each of b.
func cross(a, b []string) []string {
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return out
}

// prefixFree reports whether no string of words begins a longer one
// (lower case): then a name matches in at most one length at a place of
// ASCII text ((?-i:[Aa]pi|API) matches in one).
func prefixFree(words []string) bool {
	for _, a := range words {
		for _, b := range words {
			if len(a) < len(b) && strings.HasPrefix(b, a) {
				return false
			}
		}
	}
	return true
}

// The byte classes of the separators.
var (
	nameByte  = byteClass(" \t.-_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
	spaceByte = byteClass("\t\n\f\r '\"")
	afterOp   = byteClass("`'\"\t\n\f\r =")
)

func byteClass(s string) (c [256]bool) {
	for i := 0; i < len(s); i++ {
		c[s[i]] = true
	}
	return c
}

// find appends to m[:0] the submatch indexes of the tail's first match in
// s, as FindStringSubmatchIndex returns them, and returns it, or nil. s
// must be ASCII: beyond it, (?i) makes \w hold the Kelvin sign.
func (a *assignTail) find(s string, dst []int) []int {
	start := a.nameEnd(s)
	if start < 0 {
		return nil
	}
	// failed[k]: the secret was tried at start+k and is not there; the
	// same place is reached by many ways of reading the separators.
	var failed [20 + 3 + 4 + 5 + 1]bool
	secretAt := func(p int) []int {
		if failed[p-start] {
			return nil
		}
		var m []int
		if a.parts != nil {
			m = a.secretIn(s, p, dst)
		} else if m = a.secret.FindStringSubmatchIndex(s[p:]); m != nil {
			for i := range m {
				m[i] += p
			}
		}
		if m == nil {
			failed[p-start] = true
			return nil
		}
		m[0] = 0
		return m
	}
	n1 := run(s, start, 20, &nameByte)
	for b := start + n1; b >= start; b-- {
		n2 := run(s, b, 3, &spaceByte)
		for c := b + n2; c >= b; c-- {
			ends, n := operatorEnds(s, c)
			for _, d := range ends[:n] {
				n3 := run(s, d, 5, &afterOp)
				for p := d + n3; p >= d; p-- {
					if m := secretAt(p); m != nil {
						return m
					}
				}
			}
		}
	}
	return nil
}

// nameEnd is where the name that begins s ends, or -1.
func (a *assignTail) nameEnd(s string) int {
	for i, w := range a.words {
		if len(w) <= len(s) && strings.EqualFold(s[:len(w)], w) {
			if c := a.cases[i]; c != nil {
				if k := caseIndex(s[:len(w)]); c[k/64]&(1<<(k%64)) == 0 {
					return -1
				}
				return len(w)
			}
			if a.name.MatchString(s[:len(w)]) {
				return len(w)
			}
			return -1
		}
	}
	return -1
}

// maxCaseLetters bounds the letters of a word whose every way of being
// written is tried when its rule is built (2^10 regexp runs of a few
// bytes each).
const maxCaseLetters = 10

// nameCases is the set of ways of writing w's letters that name matches,
// by caseIndex, or nil if w has more than maxCaseLetters letters.
func nameCases(name *regexp.Regexp, w string) []uint64 {
	var at []int // w's letters
	for i := 0; i < len(w); i++ {
		if 'a' <= w[i]|0x20 && w[i]|0x20 <= 'z' {
			at = append(at, i)
		}
	}
	if len(at) > maxCaseLetters {
		return nil
	}
	set := make([]uint64, max(1<<len(at)/64, 1))
	b := []byte(strings.ToLower(w))
	for k := range 1 << len(at) {
		for j, i := range at {
			b[i] = b[i]&^0x20 | byte(k>>j&1^1)<<5
		}
		if name.Match(b) {
			set[k/64] |= 1 << (k % 64)
		}
	}
	return set
}

// caseIndex is the index in nameCases of how s, ASCII, writes its letters.
func caseIndex(s string) int {
	k, j := 0, 0
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; 'a' <= c && c <= 'z' {
			if s[i]&0x20 == 0 {
				k |= 1 << j
			}
			j++
		}
	}
	return k
}

// run is how many of the bytes of s from i on, at most n, are in class.
func run(s string, i, n int, class *[256]bool) int {
	k := i
	for k < len(s) && k < i+n && class[s[k]] {
		k++
	}
	return k - i
}

// operatorEnds is where each operator that s holds at c ends, in the
// order the tail tries them: =, >, :{1,3}= (three colons first), ||, :,
// =>, ?=, and ','.
func operatorEnds(s string, c int) (ends [8]int, n int) {
	at := func(i int, b byte) bool { return i < len(s) && s[i] == b }
	out := ends[:0]
	if at(c, '=') {
		out = append(out, c+1)
	}
	if at(c, '>') {
		out = append(out, c+1)
	}
	colons := run(s, c, 3, &colonByte)
	for k := colons; k >= 1; k-- {
		if at(c+k, '=') {
			out = append(out, c+k+1)
		}
	}
	if at(c, '|') && at(c+1, '|') {
		out = append(out, c+2)
	}
	if at(c, ':') {
		out = append(out, c+1)
	}
	if at(c, '=') && at(c+1, '>') {
		out = append(out, c+2)
	}
	if at(c, '?') && at(c+1, '=') {
		out = append(out, c+2)
	}
	if at(c, ',') {
		out = append(out, c+1)
	}
	return ends, len(out)
}

var colonByte = byteClass(":")
