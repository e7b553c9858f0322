package redact

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// A Class says how a rule knows a credential, and so how often it is wrong.
type Class uint8

const (
	// Marked: the credential carries its own mark, a prefix (xoxb-, ghp_,
	// glpat-, AIza) or a fixed structure (a PEM block, a JWT), which other
	// text almost never has. Every Event passes these rules.
	Marked Class = iota + 1
	// Named: the credential is known by the name beside it, an assignment
	// to *_TOKEN or password, a header, a URL's userinfo, curl -u. These
	// misread more often (a long identifier after "key:"), so Events pass
	// them only when the Hub is told to (HUB_REDACT_SHAPES=all).
	Named
)

// A Detector finds one shape of credential.
type Detector struct {
	// Name is the rule's id, the only thing about a finding that may be
	// reported, and what its mark says: [masked: slack-bot-token].
	Name        string
	Description string
	Class       Class
	// Examples are lines the rule must find a credential in.
	Examples []string

	// need lists words, lower-case, one of which every match holds or
	// stands beside; re runs only around where one is (lead bytes before
	// it and reach after, within its line unless the rule spans lines).
	// With assign, only where the word is followed by what assignAfter
	// reads.
	need        []string
	lead, reach int
	lines       bool // a match may span lines
	assign      bool
	re          *regexp.Regexp
	// tail, if set, is re from its needed word on, anchored: it is tried
	// at each word alone, and a match starts back bytes of name before
	// the word at most. A gitleaks rule for a named secret begins with
	// [\w.-]{0,50}? before the name, which unanchored costs a pass of the
	// whole regexp over every byte near a word. A rule whose every match
	// begins with one of its words (startsWithWord) has re anchored as
	// its tail, set by newRegistry.
	tail *regexp.Regexp
	// split is tail read as an assignment (splitAssign), if it is one.
	split *assignTail
	// seq is tail read as a plain sequence (seqOf), if it is one and not
	// an assignment.
	seq  *seqTail
	back int
	// starts, for a rule with no tail, are strings one of which each
	// match begins with (matchStarts): re runs anchored (anchored) only
	// where one is.
	starts   []string
	startsAt []int // their anchors (indexFoldAt)
	anchored *regexp.Regexp
	// bound: the match must begin at a word boundary (a leading \b, which
	// an anchored regexp can't see across).
	bound bool
	// leadRun says each match begins with at most 50 bytes of [\w.-]
	// before one of starts, as few as can be (a named rule whose needed
	// words are in its secret, lob-api-key's "live_"): the regexp from the
	// start, anchored, finds the match, which begins as far back as such
	// bytes go, to the end of the last.
	leadRun bool
	// minRun, if set, is the fewest bytes the secret holds, none of them a
	// space or a quote: a window with no such run holds no match, which a
	// byte loop tells far quicker than the regexp.
	minRun int
	// needs are words every match of the regexp run holds (re over a
	// window, tail from the needed word on), each as a set of lower-case
	// alternatives (fold) or exact ones: a window without one of each
	// holds no match, which a substring search tells far quicker than the
	// regexp (kubernetes-secret-yaml's data: and kind: around a "secret").
	needs []literals
	// keep decides whether a match of re is a credential; group is the
	// submatch holding the secret (1 if zero).
	keep  func(text string, m []int) bool
	group int
	// span, if set, replaces keep and group: it returns the secret's span
	// for a match of re, or ok false.
	span func(text string, m []int) (start, end int, ok bool)
	// secretOf, for a rule from the table, is span's first step: where
	// the secret of a match is, before the checks of whether it is one.
	secretOf func(m []int) (start, end int, ok bool)
}

// A rule is a Detector as data, as the gitleaks-derived table holds them.
type rule struct {
	id, description string
	class           Class
	keywords        []string
	pattern         string
	group           int     // the secret's submatch; 0: the first that matched
	entropy         float64 // the secret's Shannon entropy must exceed it
	allow           []allow
	examples        []string
}

// An allow says when a match is not a credential: a regexp matches its
// target (the secret, the whole match or the line) or the secret holds a
// stopword; with and, both must hold.
type allow struct {
	target    string // "" (the secret), "match" or "line"
	and       bool
	regexes   []string
	stopwords []string
}

type allowRule struct {
	target string
	and    bool
	// res are the regexes apart, not one alternation: most are anchored
	// (^\$(?:[A-Z_]+|[a-z_]+)$), which an alternation with one that isn't
	// (^true|false|null$) would try at every byte of the target.
	res       []*regexp.Regexp
	stopwords []string
	// branches are res's top-level alternatives apart, each run only
	// where the target holds the strings its every match holds:
	// generic-api-key's allowlist is 36 alternatives such as
	// key[_.-]?(?:alias|board|…), which as one regexp ran Go's slowest
	// engine over every secret the rule found.
	branches []branch
	// held, if enough branches may run at any target that the strings a
	// target holds are worth reading first (generic-api-key's 27), reads
	// them; the global allowlist's few (false, null$) are cheaper looked
	// for at once.
	held *heldStrings
	// stops finds the stopwords in one pass (generic-api-key has 1,446 of
	// them, each a substring search of every secret it finds): an
	// automaton over those of two bytes or more with no upper-case
	// letter, which a lower-cased secret can't hold.
	stops *matcher
	// fewStops, instead of stops, are a few such stopwords, each found
	// quicker by indexFold's IndexByte than by stepping an automaton over
	// every byte (the global allowlist's two, for every secret of every
	// rule).
	fewStops []string
	fewAt    []int // their anchors
}

// maxFewStops is the most stopwords an allowlist looks for one by one.
const maxFewStops = 4

func (a allow) compile() allowRule {
	out := allowRule{target: a.target, and: a.and, stopwords: a.stopwords}
	for _, re := range a.regexes {
		out.res = append(out.res, regexp.MustCompile(re))
		out.branches = append(out.branches, branches(re)...)
	}
	unanchored := 0
	var held []string
	for i, b := range out.branches {
		if b.first == nil && len(b.needs) > 0 {
			unanchored++
		}
		out.branches[i].held = heldIDs(b.needs, &held)
		out.branches[i].heldAll = !slices.ContainsFunc(b.needs, func(l literals) bool { return !l.fold }) &&
			!slices.ContainsFunc(out.branches[i].held, func(ids []uint16) bool { return ids == nil })
	}
	if unanchored >= minHeldBranches {
		out.held = newHeldStrings(held)
	}
	var words []string
	longest := 0
	for _, w := range a.stopwords {
		if len(w) < 2 || strings.ContainsAny(w, "\x1b\r\n") {
			return out // read one by one
		}
		if strings.ToLower(w) == w {
			words = append(words, w)
			longest = max(longest, len(w))
		}
	}
	if len(words) <= maxFewStops {
		out.fewStops = words
		for _, w := range words {
			out.fewAt = append(out.fewAt, anchor(w))
		}
	} else {
		// Every state dense, a step one load: 670 KiB for
		// generic-api-key's, once a process.
		out.stops = newMatcherDense(words, int32(longest), true)
	}
	return out
}

// minHeldBranches is the fewest branches that need strings and may run at
// any target for which an allowlist reads the strings a target holds.
const minHeldBranches = 4

// A branch is one alternative of an allowlist's regexp, with the strings
// its every match holds, which a target must hold, in any case, before
// they are looked for as they are.
type branch struct {
	re    *regexp.Regexp
	needs []literals
	held  [][]uint16 // needs' strings' ids in the allowlist's heldStrings
	// heldAll: each need folds case and is read by the heldStrings, so
	// what it reads of an ASCII target is what a search would find.
	heldAll bool
	// first, for a branch anchored at the target's start (most of the
	// global allowlist's: ^\$, ^%, ^/), has a bit for each byte its match
	// may begin with; a target beginning with another is passed over
	// before anything else is read.
	first *byteSet
	// same, for a branch that is one byte repeated as the whole target
	// (the global allowlist's ^(?i:a+|b+|…|\*+|\.+)$, which every
	// secret of every rule went through), reads an ASCII target by hand.
	same *repeat
	// class, for a branch that is a run of one class's bytes as the whole
	// target (generic-api-key's ^[a-zA-Z_.-]+$ for every secret it
	// finds), reads an ASCII target by hand: each byte is in class.
	class *byteSet
}

// A byteSet has a bit for each byte value.
type byteSet [4]uint64

func (s *byteSet) has(c byte) bool { return s[c/64]&(1<<(c%64)) != 0 }
func (s *byteSet) add(lo, hi rune) {
	for c := max(lo, 0); c <= min(hi, 0xff); c++ {
		s[c/64] |= 1 << (c % 64)
	}
}

// leading returns the bytes a match of t may begin with, and whether
// every match holds a byte (else those of what follows t may begin it
// too). A rune beyond ASCII may begin with any byte from 0x80 on, as may
// a byte that isn't UTF-8 (read as U+FFFD).
func leading(t *syntax.Regexp) (s byteSet, nonEmpty bool) {
	addRune := func(r rune) {
		if r >= utf8.RuneSelf {
			r = 0x80
			s.add(0x80, 0xff)
		}
		s.add(r, r)
	}
	switch t.Op {
	case syntax.OpLiteral:
		if len(t.Rune) == 0 {
			return s, false
		}
		r := t.Rune[0]
		addRune(r)
		if t.Flags&syntax.FoldCase != 0 {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				addRune(f)
			}
		}
		return s, true
	case syntax.OpCharClass:
		for i := 0; i+1 < len(t.Rune); i += 2 {
			s.add(t.Rune[i], t.Rune[i+1])
			if t.Rune[i+1] >= utf8.RuneSelf {
				s.add(0x80, 0xff)
			}
		}
		return s, true
	case syntax.OpCapture, syntax.OpPlus:
		return leading(t.Sub[0])
	case syntax.OpRepeat:
		s, nonEmpty = leading(t.Sub[0])
		return s, nonEmpty && t.Min > 0
	case syntax.OpStar, syntax.OpQuest:
		s, _ = leading(t.Sub[0])
		return s, false
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpEmptyMatch:
		return s, false
	case syntax.OpConcat:
		for _, sub := range t.Sub {
			ss, ne := leading(sub)
			for i := range s {
				s[i] |= ss[i]
			}
			if ne {
				return s, true
			}
		}
		return s, false
	case syntax.OpAlternate:
		nonEmpty = true
		for _, sub := range t.Sub {
			ss, ne := leading(sub)
			for i := range s {
				s[i] |= ss[i]
			}
			nonEmpty = nonEmpty && ne
		}
		return s, nonEmpty
	}
	s.add(0, 0xff)
	return s, false
}

// anchoredFirst is the bytes a match of t may begin with, if t matches
// only at the start of a text and each match holds a byte, else nil.
func anchoredFirst(t *syntax.Regexp) *byteSet {
	for t.Op == syntax.OpCapture {
		t = t.Sub[0]
	}
	if t.Op != syntax.OpConcat || len(t.Sub) == 0 || t.Sub[0].Op != syntax.OpBeginText {
		return nil
	}
	s, nonEmpty := leading(t)
	if !nonEmpty {
		return nil
	}
	return &s
}

// branches splits pattern into its top-level alternatives: it matches
// somewhere in a text where one of them does.
func branches(pattern string) []branch {
	t, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		panic(fmt.Sprintf("redact: allowlist regexp %q: %v", pattern, err))
	}
	for t.Op == syntax.OpCapture {
		t = t.Sub[0]
	}
	alts := []*syntax.Regexp{t}
	if t.Op == syntax.OpAlternate {
		alts = t.Sub
	}
	var out []branch
	for _, a := range alts {
		b := branch{re: regexp.MustCompile(a.String()), first: anchoredFirst(a), same: repeatOf(a), class: wholeClass(a)}
		for _, l := range requiredLiterals(b.re.String()) {
			b.needs = append(b.needs, l.anchored())
		}
		out = append(out, b)
	}
	return out
}

// matches reports whether one of a's regexps matches target.
func (a *allowRule) matches(target string) bool {
	// A byte beyond ASCII may be a case of an ASCII letter (the Kelvin
	// sign), which the automaton doesn't read: then only the strings are
	// looked for.
	var held heldSet
	// Whether target is ASCII, read when a branch first asks: a line is
	// long, and most of the global allowlist's branches are passed over
	// by their first byte.
	known, isASCII := false, false
	ascii := func() bool {
		if !known {
			known, isASCII = true, indexNonASCII(target) < 0
		}
		return isASCII
	}
	hasHeld := false
	for _, b := range a.branches {
		if b.first != nil && len(target) > 0 && !b.first.has(target[0]) {
			continue
		}
		if b.same != nil && ascii() {
			if b.same.matches(target) {
				return true
			}
			continue
		}
		if b.class != nil && ascii() {
			if len(target) > 0 && allIn(target, b.class) {
				return true
			}
			continue
		}
		if a.held != nil && len(b.needs) > 0 && !hasHeld && ascii() {
			// Read once, for the first branch that needs strings.
			a.held.read(target, &held)
			hasHeld = true
		}
		if hasHeld && !held.mayHoldEach(b.held) {
			continue
		}
		if (hasHeld && b.heldAll || holdsAll(target, b.needs)) && b.re.MatchString(target) {
			return true
		}
	}
	return false
}

// A repeat is a branch ^(?:x+|y+|…)$ with each of x, y, … one ASCII
// byte: a match is the whole target, one of bytes repeated, in either
// case where the byte's alternative folds case (fold).
type repeat struct{ bytes, fold byteSet }

// repeatOf returns t as a repeat, or nil if it is not one.
func repeatOf(t *syntax.Regexp) *repeat {
	for t.Op == syntax.OpCapture {
		t = t.Sub[0]
	}
	if t.Op != syntax.OpConcat || len(t.Sub) != 3 || t.Sub[0].Op != syntax.OpBeginText || t.Sub[2].Op != syntax.OpEndText {
		return nil
	}
	alts := []*syntax.Regexp{t.Sub[1]}
	if t.Sub[1].Op == syntax.OpAlternate {
		alts = t.Sub[1].Sub
	}
	var out repeat
	for _, a := range alts {
		if a.Op != syntax.OpPlus || a.Sub[0].Op != syntax.OpLiteral || len(a.Sub[0].Rune) != 1 || a.Sub[0].Rune[0] >= utf8.RuneSelf {
			return nil
		}
		r, fold := a.Sub[0].Rune[0], a.Sub[0].Flags&syntax.FoldCase != 0
		out.bytes.add(r, r)
		if fold {
			out.fold.add(r, r)
			// The Kelvin sign and the long s fold into k and s too,
			// but an ASCII target holds neither.
			if o := r ^ 0x20; isLetter(byte(r)) {
				out.bytes.add(o, o)
				out.fold.add(o, o)
			}
		}
	}
	return &out
}

// wholeClass is the ASCII bytes of t's class, if t is ^[class]+$, else
// nil.
func wholeClass(t *syntax.Regexp) *byteSet {
	for t.Op == syntax.OpCapture {
		t = t.Sub[0]
	}
	if t.Op != syntax.OpConcat || len(t.Sub) != 3 || t.Sub[0].Op != syntax.OpBeginText || t.Sub[2].Op != syntax.OpEndText ||
		t.Sub[1].Op != syntax.OpPlus || t.Sub[1].Sub[0].Op != syntax.OpCharClass {
		return nil
	}
	var set byteSet
	rs := t.Sub[1].Sub[0].Rune
	for i := 0; i+1 < len(rs); i += 2 {
		if rs[i] < utf8.RuneSelf {
			set.add(rs[i], min(rs[i+1], utf8.RuneSelf-1))
		}
	}
	return &set
}

// allIn reports whether each byte of s is in set.
func allIn(s string, set *byteSet) bool {
	for i := 0; i < len(s); i++ {
		if !set.has(s[i]) {
			return false
		}
	}
	return true
}

// matches reports whether the ASCII target is a match of r's branch.
func (r *repeat) matches(target string) bool {
	if len(target) == 0 || !r.bytes.has(target[0]) {
		return false
	}
	c := target[0]
	for i := 1; i < len(target); i++ {
		if d := target[i]; d != c && (d != c^0x20 || !r.fold.has(c) || !isLetter(c)) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// holdsAll reports whether s holds each of needs, read plainly: what a
// rule's window is held to, and registry.holds answers as.
func holdsAll(s string, needs []literals) bool {
	return !slices.ContainsFunc(needs, func(l literals) bool { return !l.in(s) })
}

// stopped reports whether secret, lower-cased, holds one of a's stopwords.
func (a *allowRule) stopped(secret string) bool {
	if a.stops == nil && a.fewStops == nil || indexNonASCII(secret) >= 0 {
		// strings.ToLower makes ASCII of some runes beyond it (the
		// Kelvin sign's k), which the automaton doesn't read.
		low := strings.ToLower(secret)
		return slices.ContainsFunc(a.stopwords, func(w string) bool { return strings.Contains(low, w) })
	}
	if a.stops == nil {
		for i, w := range a.fewStops {
			if indexFoldAt(secret, w, a.fewAt[i]) >= 0 {
				return true
			}
		}
		return false
	}
	m := a.stops
	var st uint32
	for i := 0; i < len(secret); i++ {
		t := m.dense[st+uint32(m.cls[secret[i]])]
		switch {
		case t&matchFlag != 0:
			return true
		case t&specialFlag != 0:
			st = 0 // no stopword holds ESC, CR or LF
		default:
			st = t & idMask
		}
	}
	return false
}

// secretRun is the fewest bytes a secret of pattern holds, if no secret
// can hold a space or a quote, else 0: the least of its capture groups'
// widths (the secret is one of them), or of the whole match if it has
// none.
func secretRun(pattern string) int {
	t, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0
	}
	t = t.Simplify()
	var groups []*syntax.Regexp
	var walk func(*syntax.Regexp)
	walk = func(t *syntax.Regexp) {
		if t.Op == syntax.OpCapture {
			groups = append(groups, t)
		}
		for _, s := range t.Sub {
			walk(s)
		}
	}
	walk(t)
	if len(groups) == 0 {
		groups = []*syntax.Regexp{t}
	}
	n := -1
	for _, g := range groups {
		if mayHoldSeparator(g) {
			return 0
		}
		if w := minWidth(g); n < 0 || w < n {
			n = w
		}
	}
	return max(n, 0)
}

// separators are the bytes a secret is taken to hold none of.
const separators = " \t\r\n\"'`"

var isSeparator = func() (t [256]bool) {
	for i := 0; i < len(separators); i++ {
		t[separators[i]] = true
	}
	return t
}()

// hasRun reports whether s holds n bytes in a row none of which is a
// separator.
func hasRun(s string, n int) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if isSeparator[s[i]] {
			run = 0
		} else if run++; run >= n {
			return true
		}
	}
	return false
}

// lineRuns are the runs of bytes with no separator in a line, read once a
// line, so that each rule's check that its window holds its secret's run
// looks at a few runs instead of reading the window.
type lineRuns []struct {
	start, end int
	best       int // the most bytes of this run and those after it in the line
}

// read makes l the runs of text[i:nl].
func (l *lineRuns) read(text string, i, nl int) {
	*l = (*l)[:0]
	for i < nl {
		for i < nl && isSeparator[text[i]] {
			i++
		}
		j := i
		for j < nl && !isSeparator[text[j]] {
			j++
		}
		if j > i {
			*l = append(*l, struct{ start, end, best int }{i, j, 0})
		}
		i = j
	}
	best := 0
	for k := len(*l) - 1; k >= 0; k-- {
		best = max(best, (*l)[k].end-(*l)[k].start)
		(*l)[k].best = best
	}
}

// has is hasRun(text[from:to], n) for a stretch within the line.
func (l lineRuns) has(from, to, n int) bool {
	k, _ := slices.BinarySearchFunc(l, from, func(r struct{ start, end, best int }, from int) int { return cmp.Compare(r.end, from+1) })
	for ; k < len(l) && l[k].start < to && l[k].best >= n; k++ {
		if min(l[k].end, to)-max(l[k].start, from) >= n {
			return true
		}
	}
	return false
}

// mayHoldSeparator reports whether a match of t can hold a separator.
func mayHoldSeparator(t *syntax.Regexp) bool {
	switch t.Op {
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return true
	case syntax.OpLiteral:
		return strings.ContainsAny(string(t.Rune), separators)
	case syntax.OpCharClass:
		for i := 0; i+1 < len(t.Rune); i += 2 {
			for _, c := range separators {
				if t.Rune[i] <= c && c <= t.Rune[i+1] {
					return true
				}
			}
		}
		return false
	}
	return slices.ContainsFunc(t.Sub, mayHoldSeparator)
}

// minWidth is the fewest bytes a match of t holds.
func minWidth(t *syntax.Regexp) int {
	switch t.Op {
	case syntax.OpLiteral:
		return len(t.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minWidth(t.Sub[0])
	case syntax.OpRepeat:
		return t.Min * minWidth(t.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, s := range t.Sub {
			n += minWidth(s)
		}
		return n
	case syntax.OpAlternate:
		n := -1
		for _, s := range t.Sub {
			if w := minWidth(s); n < 0 || w < n {
				n = w
			}
		}
		return n
	}
	return 0 // empty-width assertions, a star, an optional part
}

// window is how far from a needed word a match of re can reach: the most
// bytes a match can hold, or maxWindow if more.
func window(re *regexp.Regexp) int {
	t, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return maxWindow // it compiled once, so it parses
	}
	return min(width(t.Simplify()), maxWindow)
}

// maxWindow bounds the bytes a rule reads each side of a needed word.
const maxWindow = 1 << 10

// width is the most bytes a match of t can hold, or maxWindow+1 if it has
// no bound.
func width(t *syntax.Regexp) int {
	const unbounded = maxWindow + 1
	switch t.Op {
	case syntax.OpLiteral:
		return 4 * len(t.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 4
	case syntax.OpCapture:
		return width(t.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		return unbounded
	case syntax.OpQuest:
		return width(t.Sub[0])
	case syntax.OpRepeat:
		if t.Max < 0 {
			return unbounded
		}
		return min(t.Max*width(t.Sub[0]), unbounded)
	case syntax.OpConcat:
		n := 0
		for _, s := range t.Sub {
			n = min(n+width(s), unbounded)
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, s := range t.Sub {
			n = max(n, width(s))
		}
		return n
	}
	return 0 // empty-width assertions
}

// allows reports whether a says the secret, found as the match m of t, is
// no credential.
func (a *allowRule) allows(t, secret string, m []int) bool {
	return a.frees(a.matches(a.targetOf(t, secret, m)), len(a.stopwords) > 0 && a.stopped(secret))
}

// targetOf is what a's regexps read for the secret found as the match m
// of t: the secret, the match or its line.
func (a *allowRule) targetOf(t, secret string, m []int) string {
	switch a.target {
	case "match":
		return t[m[0]:m[1]]
	case "line":
		return lineAt(t, m[0], m[1])
	}
	return secret
}

// frees reports whether a frees a secret, given whether one of its regexps
// matched and whether the secret holds one of its stopwords.
func (a *allowRule) frees(reOK, stopOK bool) bool {
	if a.and {
		return (len(a.res) == 0 || reOK) && (len(a.stopwords) == 0 || stopOK)
	}
	return reOK || stopOK
}

// detector compiles r. Its span takes the secret as gitleaks does (the
// group, or the first submatch that matched, or the whole match), and keeps
// it only if it is random enough, no placeholder, and no allowlist frees it.
func (r rule) detector(global allowRule) *Detector {
	re := regexp.MustCompile(r.pattern)
	allows := []allowRule{global}
	for _, a := range r.allow {
		allows = append(allows, a.compile())
	}
	group := r.group
	d := &Detector{
		Name: r.id, Description: r.description, Class: r.class, Examples: r.examples,
		// A match within a line, unless the pattern says otherwise:
		// gitleaks reads whole files, where its \s crosses lines, but a
		// name on one line and a value on the next is seldom an assignment.
		need: r.keywords, re: re,
		lines: strings.Contains(r.pattern, `(?s`) || strings.Contains(r.pattern, `\n`) || strings.Contains(r.pattern, `[\s\S`),
	}
	for _, f := range tailForms {
		if rest, ok := strings.CutPrefix(r.pattern, f.prefix); ok && namesAre(rest, r.keywords) {
			d.tail, d.back, d.assign = regexp.MustCompile(f.anchor+rest), f.back, true
			d.split = splitAssign(d.tail)
			break
		}
	}
	if rest, ok := strings.CutPrefix(r.pattern, tailForms[0].prefix); ok && d.tail == nil {
		if words, ok := leadNames(rest); ok {
			d.starts, d.leadRun = words, true
			d.anchored = regexp.MustCompile(tailForms[0].anchor + rest)
		}
	}
	d.minRun = secretRun(r.pattern)
	d.secretOf = func(m []int) (int, int, bool) {
		start, end := m[0], m[1]
		if group > 0 && 2*group+1 < len(m) {
			start, end = m[2*group], m[2*group+1]
		} else if group == 0 {
			for g := 1; 2*g+1 < len(m); g++ {
				if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
					start, end = m[2*g], m[2*g+1]
					break
				}
			}
		}
		return start, end, start >= 0 && start < end
	}
	d.span = func(t string, m []int) (int, int, bool) {
		start, end, ok := d.secretOf(m)
		if !ok {
			return 0, 0, false
		}
		secret := t[start:end]
		if r.entropy > 0 && entropy(secret) <= r.entropy || template(secret) {
			return 0, 0, false
		}
		for i := range allows {
			if allows[i].allows(t, secret, m) {
				return 0, 0, false
			}
		}
		return start, end, true
	}
	return d
}

// tailForms are the beginnings of gitleaks' rules for named secrets (its
// GenerateSemiGenericRegex) and what replaces them to anchor the rest at
// the name: the name of up to back bytes before the needed word is found
// by hand.
var tailForms = []struct {
	prefix, anchor string
	back           int
}{
	{`(?i)[\w.-]{0,50}?`, `(?i)^`, 50},
	{`[\w.-]{0,50}?(?i:[\w.-]{0,50}?`, `^(?i:`, 100},
}

// leadNames is the lower-case strings the name group that begins rest, a
// named rule's pattern after [\w.-]{0,50}?, matches, if few and each
// at least 2 bytes long.
func leadNames(rest string) ([]string, bool) {
	t, err := syntax.Parse(`(?i)`+rest[:groupEnd(rest)], syntax.Perl)
	if err != nil || !strings.HasPrefix(rest, "(?:") {
		return nil, false
	}
	words, ok := finiteStrings(t)
	if !ok || slices.ContainsFunc(words, func(w string) bool { return len(w) < 2 || indexNonASCII(w) >= 0 }) {
		return nil, false
	}
	return words, true
}

// startsWithWord reports whether each match of pattern begins with one of
// words, so it can be tried anchored at each: every string its matches
// begin with (prefixes), through groups, flags and a leading \b, begins
// with one of words. bound says the pattern first asserts a word boundary.
func startsWithWord(pattern string, words []string) (bound, ok bool) {
	t, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return false, false
	}
	bound, t = leadingBound(t.Simplify())
	ps, _ := prefixes(t)
	for _, p := range ps {
		p = strings.ToLower(p)
		if !slices.ContainsFunc(words, func(w string) bool { return strings.HasPrefix(p, strings.ToLower(w)) }) {
			return false, false
		}
	}
	return bound, len(ps) > 0
}

// leadingBound goes down t's first elements, through groups and flags, to
// a leading \b: it returns whether there is one, and what follows it.
func leadingBound(t *syntax.Regexp) (bound bool, rest *syntax.Regexp) {
	for {
		switch {
		case t.Op == syntax.OpConcat && len(t.Sub) == 0: // nothing left after the \b
		case t.Op == syntax.OpCapture:
			t = t.Sub[0]
			continue
		case t.Op == syntax.OpConcat && t.Sub[0].Op == syntax.OpCapture:
			t = &syntax.Regexp{Op: syntax.OpConcat, Sub: slices.Concat([]*syntax.Regexp{t.Sub[0].Sub[0]}, t.Sub[1:]), Flags: t.Flags}
			continue
		case t.Op == syntax.OpConcat && t.Sub[0].Op == syntax.OpConcat:
			t = &syntax.Regexp{Op: syntax.OpConcat, Sub: slices.Concat(t.Sub[0].Sub, t.Sub[1:]), Flags: t.Flags}
			continue
		case t.Op == syntax.OpConcat && t.Sub[0].Op == syntax.OpWordBoundary && !bound:
			bound = true
			t = &syntax.Regexp{Op: syntax.OpConcat, Sub: t.Sub[1:], Flags: t.Flags}
			continue
		}
		return bound, t
	}
}

// matchStarts returns strings, lower-case, of two bytes or more, one of
// which each match of pattern begins with, in any case: those of each
// branch of its top-level alternation (prefixes). With bound, each
// branch first asserts a word boundary, and each string begins with a
// word byte, so the anchored pattern's own \b always holds where one
// begins and the boundary before it is read by hand. ok is false if
// they can't be told.
func matchStarts(pattern string) (starts []string, bound, ok bool) {
	t, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, false, false
	}
	t = t.Simplify()
	for t.Op == syntax.OpCapture {
		t = t.Sub[0]
	}
	alts := []*syntax.Regexp{t}
	if t.Op == syntax.OpAlternate {
		alts = t.Sub
	}
	bounds := 0
	for _, a := range alts {
		b, rest := leadingBound(a)
		if b {
			bounds++
		}
		ps, _ := prefixes(rest)
		for _, p := range ps {
			if len(p) < 2 || b && !wordChar(p[0]) {
				return nil, false, false
			}
			if p = strings.ToLower(p); !slices.Contains(starts, p) {
				starts = append(starts, p)
			}
		}
	}
	if bounds != 0 && bounds != len(alts) {
		return nil, false, false
	}
	return starts, bounds > 0, len(starts) > 0
}

// prefixes returns strings, at most maxAlts, one of which each match of t
// begins with, and whether they are all t matches (so a concatenation's
// next element adds to them): a literal, a small class, groups,
// alternations and concatenations of those, up to the first element that
// is none (a repeat, an assertion). Go's parser factors alternations
// (AKIA|ASIA becomes A(?:KIA|SIA)), so the first literal alone says too
// little.
func prefixes(t *syntax.Regexp) ([]string, bool) {
	if l, ok := exact(t); ok {
		return l.alts, true
	}
	switch t.Op {
	case syntax.OpCapture:
		return prefixes(t.Sub[0])
	case syntax.OpConcat:
		ps := []string{""}
		for _, s := range t.Sub {
			qs, whole := prefixes(s)
			if len(ps)*len(qs) > maxAlts {
				return ps, false
			}
			var next []string
			for _, p := range ps {
				for _, q := range qs {
					next = append(next, p+q)
				}
			}
			if ps = next; !whole {
				return ps, false
			}
		}
		return ps, true
	case syntax.OpAlternate:
		var ps []string
		for _, s := range t.Sub {
			qs, _ := prefixes(s)
			ps = append(ps, qs...)
		}
		if len(ps) > maxAlts {
			return []string{""}, false
		}
		return ps, false
	}
	return []string{""}, false
}

// wordChar is what \b divides: [0-9A-Za-z_].
func wordChar(c byte) bool { return isAlnum(c) || c == '_' }

// namesAre reports whether the group rest begins with, the name of a rule
// for named secrets, is each of words and nothing else, so that each match
// begins at one of the words (some rules need a word of the secret
// instead, such as lob-api-key's test_).
func namesAre(rest string, words []string) bool {
	i := groupEnd(rest)
	if !strings.HasPrefix(rest, "(?:") || i == 0 {
		return false
	}
	name := regexp.MustCompile(`(?i)^` + rest[:i] + `$`)
	for _, w := range words {
		if !name.MatchString(w) {
			return false
		}
	}
	return len(words) > 0
}

// groupEnd is where the group that begins rest ends, or 0.
func groupEnd(rest string) int {
	depth := 0
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return 0
}

// lineAt is the text of the lines holding t[a:b], at most maxLine bytes
// of them either side.
func lineAt(t string, a, b int) string {
	lo, hi := max(a-maxLine, 0), min(b+maxLine, len(t))
	a = lo + strings.LastIndexByte(t[lo:a], '\n') + 1
	if i := strings.IndexByte(t[b:hi], '\n'); i >= 0 {
		return t[a : b+i]
	}
	return t[a:hi]
}

// maxLine bounds how much of a line around a match an allowlist reads.
const maxLine = 4 << 10

// entropy is the Shannon entropy of s's bytes, in bits: a term for each
// byte s holds, added in the order of their values.
func entropy(s string) float64 {
	if len(s) > math.MaxUint8 {
		var n [256]int
		return entropyOf(s, &n)
	}
	// A secret is short: a count a byte, and 256 bytes cleared at each.
	var n [256]uint8
	return entropyOf(s, &n)
}

func entropyOf[C uint8 | int](s string, n *[256]C) float64 {
	// Which bytes s holds, in four words kept in registers.
	var held0, held1, held2, held3 uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		n[c]++
		b := uint64(1) << (c % 64)
		switch c / 64 {
		case 0:
			held0 |= b
		case 1:
			held1 |= b
		case 2:
			held2 |= b
		default:
			held3 |= b
		}
	}
	// Most bytes of a secret occur a few times each: the term for such a
	// count in a secret of up to 255 bytes is in termOf.
	var terms *[16]float64
	if len(s) < len(termOf()) {
		terms = &termOf()[len(s)]
	}
	h := 0.0
	for k, w := range [4]uint64{held0, held1, held2, held3} {
		for ; w != 0; w &= w - 1 {
			c := int(n[k*64+bits.TrailingZeros64(w)])
			if terms != nil && c < len(terms) {
				h -= terms[c]
				continue
			}
			p := float64(c) / float64(len(s))
			h -= float64(p * math.Log2(p))
		}
	}
	return h
}

// termOf()[n][c] is p·log2(p) for p = c/n, the term of entropy's sum for
// a byte that occurs c times in n, worked out once a process that finds
// (32 KiB), not at every start of the binary.
var termOf = sync.OnceValue(func() *[256][16]float64 {
	t := new([256][16]float64)
	for n := 1; n < len(t); n++ {
		for c := 1; c < len(t[n]) && c <= n; c++ {
			p := float64(c) / float64(n)
			t[n][c] = float64(p * math.Log2(p))
		}
	}
	return t
})

// A registry is a set of Detectors with the automaton over their needed
// words, so a text is read once to find where any of them may match.
type registry struct {
	ds []*Detector
	m  *matcher
	// byWord: for each needed word, the detectors that need it or a word
	// that ends it (a hit of "api_key" is a hit of "key").
	byWord map[string][]int
	// byState is byWord by the automaton's state (its dense index) where
	// the word is the longest that ends, so a hit costs no lookup by name.
	byState [][]candidate
	// lits holds every detector's needs, a detector's from needAt[i] on.
	lits   []literals
	needAt []int
	// starts3 has a bit for each triple of byte classes a needed word
	// begins with (any third for a word of two bytes): text where no
	// triple is set holds no word, and is passed over from the root or a
	// state one byte deep (ids below shallow). ESC, CR and LF need not
	// stop it: no word holds one, and a hit finds its line's start itself.
	starts3 *triples
	// pairs3 is what skip reads at every second place j: a triple set
	// there may be three classes of a word begun up to maxOffset bytes
	// before (seldomAt, one offset of each parity), or a two-byte word
	// begun at j+1 (any class, then its two), so no word's start is
	// passed over unread. offs says where: bit b of a triple's, a word
	// begun at j-maxOffset+b.
	pairs3 *triples
	offs   *[1 << (3 * clsBits)]uint8
	// deep[k] is the first id of a state k bytes deep (every state is
	// dense, in breadth-first order): from the root, text stays on the
	// trie while each state is as deep as the bytes read (begins).
	deep    [5]uint32
	shallow uint32 // deep[2]

	scratch sync.Pool // of *scratch
	maxRun  int       // the largest minRun of a rule with assign
	// leads[i] is the most text a match of ds[i] holds before its needed
	// word (wordLead), lead the most over the rules and reach the most a
	// window reaches after a word: what a Writer holds back (holdFrom).
	leads       []int
	lead, reach int
}

// A candidate is a detector a state's word brings, with those of its needs
// that word doesn't hold itself: a window holds its word, so
// aws-secret-access-key's "secret" is never looked for at a "secret".
type candidate struct {
	d     int
	needs []need
}

// A need is a literal's id in lits; inWord says the hit's word may be it,
// in the right case (curl-auth-user's case-sensitive "curl" at a "curl"),
// which is read before the window.
type need struct {
	id     int
	inWord bool
}

func newRegistry(ds []*Detector) *registry {
	r := &registry{ds: ds, byWord: map[string][]int{}}
	var words []string
	for i, d := range ds {
		if len(d.need) == 0 {
			panic(fmt.Sprintf("redact: detector %s needs no word", d.Name))
		}
		for _, w := range d.need {
			if len(w) < 2 || len(w) > 64 {
				panic(fmt.Sprintf("redact: detector %s needs %q: a needed word has 2 to 64 bytes", d.Name, w))
			}
		}
		if d.leadRun {
			d.startsAt = make([]int, len(d.starts))
			for i, p := range d.starts {
				d.startsAt[i] = anchor(p)
			}
		} else if d.tail == nil {
			if bound, ok := startsWithWord(d.re.String(), d.need); ok {
				d.tail, d.bound = regexp.MustCompile(`^(?:`+d.re.String()+`)`), bound
			} else if starts, bound, ok := matchStarts(d.re.String()); ok {
				at := make([]int, len(starts))
				for i, p := range starts {
					at[i] = anchor(p)
				}
				d.starts, d.startsAt, d.bound = starts, at, bound
				d.anchored = regexp.MustCompile(`^(?:` + d.re.String() + `)`)
			}
		}
		if d.lead == 0 {
			d.lead = window(d.re)
		}
		if d.reach == 0 {
			d.reach = window(d.re)
		}
		if d.tail != nil && d.split == nil && d.seq == nil {
			d.seq = seqOf(d.tail.String())
		}
		if d.tail != nil {
			d.needs = requiredLiterals(d.tail.String())
		} else {
			d.needs = requiredLiterals(d.re.String())
		}
		if d.assign {
			r.maxRun = max(r.maxRun, d.minRun)
		}
		r.leads = append(r.leads, max(wordLead(d.re, d.need), min(d.back, maxLead)))
		r.lead = max(r.lead, r.leads[i])
		r.reach = max(r.reach, d.reach)
		r.needAt = append(r.needAt, len(r.lits))
		for _, l := range d.needs {
			r.lits = append(r.lits, l.anchored())
		}
		for _, w := range d.need {
			w = strings.ToLower(w)
			if _, ok := r.byWord[w]; !ok {
				words = append(words, w)
			}
			if !slices.Contains(r.byWord[w], i) {
				r.byWord[w] = append(r.byWord[w], i)
			}
		}
	}
	// The automaton reports only the longest word ending at a place, so
	// each word also brings the detectors of the words that end it.
	own := map[string][]int{}
	for w, is := range r.byWord {
		own[w] = slices.Clone(is)
	}
	for _, w := range words {
		for _, v := range words {
			if v != w && strings.HasSuffix(w, v) {
				for _, i := range own[v] {
					if !slices.Contains(r.byWord[w], i) {
						r.byWord[w] = append(r.byWord[w], i)
					}
				}
			}
		}
	}
	longest := 0
	for _, w := range words {
		longest = max(longest, len(w))
	}
	r.scratch.New = func() any {
		return &scratch{done: make([]int, len(ds)), seen: make([]seen, len(r.lits)), sub: make([]int, 0, 8)}
	}
	r.m = newMatcherDense(words, int32(longest), true)
	r.buildStarts3(words)
	r.buildByState()
	return r
}

// buildByState names each state by the string it stands for, down the
// trie's edges (a step one byte deeper), and gives the states where a word
// ends that word's detectors.
func (r *registry) buildByState() {
	m := r.m
	r.byState = make([][]candidate, len(m.dDepth))
	for k, name := range m.stateNames() {
		if o := m.dOut[k]; o > 0 {
			word := name[len(name)-int(o):]
			for _, di := range r.byWord[word] {
				c := candidate{d: di}
				for j, l := range r.ds[di].needs {
					if !l.heldBy(word) {
						c.needs = append(c.needs, need{r.needAt[di] + j, l.mayBeIn(word)})
					}
				}
				r.byState[k] = append(r.byState[k], c)
			}
		}
	}
}

// clsBits are the bits of a byte class in a triple's index: a constant,
// so skip shifts by an immediate and its index needs no bounds check. The
// registries have 43 and 45 classes.
const clsBits = 6

func (r *registry) buildStarts3(words []string) {
	m, n := r.m, r.m.ncls
	if n > 1<<clsBits {
		panic(fmt.Sprintf("redact: %d byte classes, above the %d a triple's index holds", n, 1<<clsBits))
	}
	r.starts3, r.pairs3, r.offs = new(triples), new(triples), new([1 << (3 * clsBits)]uint8)
	// set sets the triples of classes of w's bytes from off on, any class
	// where w has no byte, and before it where off is -1, in tab and, if
	// pairs, its offset in offs.
	set := func(tab *triples, w string, off int, pairs bool) {
		var c [3][]uint32
		for k := range c {
			if p := off + k; p >= 0 && p < len(w) {
				c[k] = []uint32{uint32(m.cls[w[p]])}
				continue
			}
			for a := range n {
				c[k] = append(c[k], a)
			}
		}
		for _, a := range c[0] {
			for _, b := range c[1] {
				for _, d := range c[2] {
					x := (a<<clsBits|b)<<clsBits | d
					tab[x/64] |= 1 << (x % 64)
					if pairs {
						r.offs[x] |= 1 << (maxOffset - off)
					}
				}
			}
		}
	}
	for _, w := range words {
		set(r.starts3, w, 0, false)
		set(r.pairs3, w, seldomAt(w, 0), true)
		if len(w) > 2 {
			set(r.pairs3, w, seldomAt(w, 1), true)
		} else {
			set(r.pairs3, w, -1, true)
		}
	}
	k := 0
	for d := range r.deep {
		for k < len(m.dDepth) && m.dDepth[k] < int32(d) {
			k++
		}
		r.deep[d] = uint32(k) * n
	}
	r.shallow = r.deep[2]
}

// maxOffset is the furthest into a word its triple in pairs3 begins.
const maxOffset = 5

// seldomAt returns the offset, from first on by twos to maxOffset, of
// the triple of w that ordinary text holds least: by its bytes that are
// no letter, then its letters by how seldom English uses them. A walk
// that reads every second place meets a word's triple at an offset of
// each parity; terminal text holds "lin", "age" or "nte" every few
// lines, "n_a", "e-s" or "erp" (lin_api_, age-secret-key-1, enterprise)
// hardly ever.
func seldomAt(w string, first int) int {
	const common = "etaoinshrdlcumwfgypbvkjxqz" // English's letters, most used first
	best, score := first, -1
	for off := first; off <= maxOffset && off+3 <= len(w); off += 2 {
		n := 0
		for _, c := range []byte(w[off : off+3]) {
			if k := strings.IndexByte(common, c); k >= 0 {
				n += k
			} else {
				n += len(common)
			}
		}
		if n > score {
			best, score = off, n
		}
	}
	return best
}

// skip returns the first place from i on where a needed word may begin,
// by starts3 and begins (near the end of text, where four bytes don't
// fit, by starts3 alone), and i where no triple fits. It reads the triples at
// every second place by pairs3, four a round, and the places a round's
// stand for (offs) only where pairs3 has one: terminal text meets one
// every 680 bytes or so. Each triple is read as its first two classes' word of
// pairs3 and the third's bit in it, so the four are independent of each
// other.
func (r *registry) skip(text string, i int) int {
	cls, pairs := &r.m.cls, r.pairs3
	j := i
	for ; j+11 <= len(text); j += 8 { // +11: begins at j+7 reads to j+10
		p := text[j : j+9]
		c0, c1, c2, c3, c4 := uint32(cls[p[0]]), uint32(cls[p[1]]), uint32(cls[p[2]]), uint32(cls[p[3]]), uint32(cls[p[4]])
		c5, c6, c7, c8 := uint32(cls[p[5]]), uint32(cls[p[6]]), uint32(cls[p[7]]), uint32(cls[p[8]])
		if !pairs.has2(c0, c1, c2) && !pairs.has2(c2, c3, c4) && !pairs.has2(c4, c5, c6) && !pairs.has2(c6, c7, c8) {
			continue
		}
		// A hit at j+k stands for the words begun where offs says, up
		// to maxOffset bytes before it or a byte after; they are read
		// in order. Every word begun by j+2 is read by this round, one
		// begun later maybe by the next: the places from j+3 to the one
		// found are read one by one.
		var at uint16 // bit b: j-maxOffset+b
		for k := 0; k < 8; k += 2 {
			at |= uint16(r.offs[r.triple(text, j+k)&(1<<(3*clsBits)-1)]) << k
		}
		for ; at != 0; at &= at - 1 {
			q := j - maxOffset + bits.TrailingZeros16(at)
			if q >= i && r.starts3.has(r.triple(text, q)) && r.begins(text, q) {
				for p := max(j+3, i); p < q; p++ {
					if r.starts3.has(r.triple(text, p)) && r.begins(text, p) {
						return p
					}
				}
				return q
			}
		}
	}
	// A word begun before j may be read at j or later, not yet reached.
	for j = max(j-maxOffset, i); j+2 < len(text); j++ {
		if r.starts3.has(r.triple(text, j)) && (j+4 > len(text) || r.begins(text, j)) {
			return j
		}
	}
	return max(i, len(text)-2)
}

// passOver returns where the automaton, at i in state st, the root or a
// state one byte deep (below shallow), goes on reading text and its state
// there: past text where no needed word can begin (skip). A word under
// way in st began at text[i-1].
func (r *registry) passOver(text string, i int, st uint32) (int, uint32) {
	from := i
	if st != 0 {
		from = i - 1
	}
	if k := r.skip(text, from); k >= i {
		return k, 0
	}
	return i, st
}

// begins reports whether a needed word may begin at q, four bytes before
// text's end or more: whether the automaton, stepped from the root, stays
// on the trie over the four bytes or to where a word ends: not where
// the first three classes begin one word and the next three another
// ("inte": intra, enterprise), which a pair of triple sets reads as one.
func (r *registry) begins(text string, q int) bool {
	m, p := r.m, text[q:q+4]
	st := uint32(0)
	for k := range 4 {
		t := m.dense[st+uint32(m.cls[p[k]])]
		if st = t & idMask; st < r.deep[k+1] {
			return false
		}
		if t&matchFlag != 0 {
			return true
		}
	}
	return true
}

// triple is the index of the classes of text[q:q+3] in a triples.
func (r *registry) triple(text string, q int) uint32 {
	cls := &r.m.cls
	return uint32(cls[text[q]])<<(2*clsBits) | uint32(cls[text[q+1]])<<clsBits | uint32(cls[text[q+2]])
}

// triples has a bit for each triple of byte classes.
type triples [1 << (3 * clsBits) / 64]uint64

// has2 reports whether the triple of classes a, b, c is set: the word of
// a and b, its bit c.
func (t *triples) has2(a, b, c uint32) bool {
	return t[(a<<clsBits|b)&(1<<(2*clsBits)-1)]&(1<<(c%64)) != 0
}

// has reports whether y's bit is set; the mask spares a bounds check.
func (t *triples) has(y uint32) bool {
	y &= 1<<(3*clsBits) - 1
	return t[y/64]&(1<<(y%64)) != 0
}

// The registries: every rule, and the Marked ones.
var (
	allRules = sync.OnceValue(func() *registry {
		global := gitleaksAllow.compile()
		ds := slices.Clone(kndlDetectors)
		for _, r := range gitleaksRules {
			ds = append(ds, r.detector(global))
		}
		return newRegistry(ds)
	})
	markedRules = sync.OnceValue(func() *registry {
		var ds []*Detector
		for _, d := range allRules().ds {
			if d.Class == Marked {
				ds = append(ds, d)
			}
		}
		return newRegistry(ds)
	})
	// The registries a Writer's shapes read frames with: the same rules,
	// reading ESC as a space, as a shaper's view of a frame holds it, so
	// the walk reads the frame itself and the view is made only for a
	// piece with a needed word in it.
	markedFrameRules = sync.OnceValue(func() *registry { return escAsSpace(newRegistry(markedRules().ds)) })
	allFrameRules    = sync.OnceValue(func() *registry { return escAsSpace(newRegistry(allRules().ds)) })
)

// escAsSpace makes r's automaton, and so its walk, read ESC as it reads a
// space, and returns r.
func escAsSpace(r *registry) *registry {
	r.m.cls[0x1b] = r.m.cls[' ']
	return r
}

// Detectors returns a copy of the registry, for documentation and tests.
func Detectors() []Detector {
	ds := allRules().ds
	out := make([]Detector, len(ds))
	for i, d := range ds {
		out[i] = *d
	}
	return out
}

// A Finding is a credential found by Find: text[Start:End] is the secret
// part, Detector the label of what found it, Class its class.
type Finding struct {
	Detector   string
	Class      Class
	Start, End int
}

// Find returns the credentials in text by every rule, ordered by Start.
func Find(text string) []Finding { return allRules().find(text) }

// find reads text once with the automaton over the needed words, and runs
// a detector's regexp only around where one of its words is: from lead bytes
// before it to reach bytes after, within the line unless the rule spans
// lines. A detector's windows don't overlap, so each reads a byte at most
// once and the cost stays linear in len(text).
func (r *registry) find(text string) []Finding { return r.appendFind(nil, text, nil, false) }

// appendFind is find appending to out, which a caller that finds in
// every piece of a stream reuses. With view, the rules read from the
// first needed word on what view returns instead of text: bytes the walk
// reads as it reads text's, the same length (a frame with its ESCs made
// spaces, for a registry that reads ESC as a space). With merging, for a
// caller that masks merged findings, a Named finding inside a Marked one
// is left out: it changes neither what is masked nor its name (settle).
func (r *registry) appendFind(out []Finding, text string, view func() string, merging bool) []Finding {
	m := r.m
	sc := r.scratch.Get().(*scratch)
	defer r.scratch.Put(sc)
	done := sc.done // how far each detector has read
	if sc.dirty {
		// Kept clean for a text with no hit, such as most log messages,
		// which are shorter than what clearing costs.
		clear(done)
		clear(sc.seen)
		sc.dirty = false
	}
	// The start of the line of the last hit, found at the hit from the
	// text read back to scanned: the walk passes over line breaks.
	lineStart, scanned := 0, 0
	// The first line break from the last hit on (or len(text)), and where
	// a '>' ends its line, spaces aside (else -1): found once a line.
	nl, gt := -1, -1
	// The runs of bytes with no separator in the line at runsAt, read
	// once a line, when a rule first asks.
	runs, runsAt := &sc.runs, -1
	as := assignment{end: -1} // what follows the last hit's word, for the named rules
	var later *deferred
	if merging {
		later = &sc.later
		later.list, later.ms = later.list[:0], later.ms[:0]
	}
	var st uint32
	dense, cls := m.dense, &m.cls
	rt := text // what the rules read: text, or from the first hit on its view
	for i := 0; i < len(text); i++ {
		if st < r.shallow {
			i, st = r.passOver(text, i, st)
		}
		c := text[i]
		t := dense[st+uint32(cls[c])] // every state is dense
		if t < deepFlag {
			st = t // the common case: no match, no line break
			continue
		}
		if t&specialFlag != 0 {
			st = 0
			continue
		}
		st = t & idMask
		if t&matchFlag == 0 {
			continue
		}
		hit, end := i+1-int(m.out(st)), i+1
		if view != nil {
			rt, view = view(), nil
		}
		for scanned < hit {
			k := strings.IndexByte(rt[scanned:hit], '\n')
			if k < 0 {
				scanned = hit
				break
			}
			lineStart = scanned + k + 1
			scanned = lineStart
		}
		if nl < hit {
			nl = len(rt)
			if k := strings.IndexByte(rt[hit:], '\n'); k >= 0 {
				nl = hit + k
			}
			gt = lineStart + len(strings.TrimRight(rt[lineStart:nl], " \t\r")) - 1
			if gt < lineStart || rt[gt] != '>' {
				gt = -1
			}
		}
		for _, cand := range r.byState[st/m.ncls] {
			di := cand.d
			d := r.ds[di]
			if hit < done[di] {
				continue
			}
			from, to := max(hit-d.lead, done[di]), min(end+d.reach, len(rt))
			if !d.lines {
				from = max(from, lineStart)
				to = lineEnd(rt, nl, to, d.assign && gt >= hit)
			}
			if d.assign {
				if as.end != end {
					as = readAssignment(rt, end, r.maxRun)
				}
				if as.op < 0 || as.op >= to || d.minRun > 0 && !as.hasRun(rt, to, d.minRun) {
					continue
				}
			}
			if d.tail != nil {
				from = hit
			}
			if !d.assign && d.minRun > 0 && !d.lines && runsAt != lineStart {
				runs.read(rt, lineStart, nl)
				runsAt = lineStart
			}
			// From here on done and seen may be written: the next find
			// clears them. A hit turned away above writes neither, as most
			// of a log line's are (a named rule's word with no operator).
			sc.dirty = true
			if !d.assign && d.minRun > 0 && (!d.lines && !runs.has(from, to, d.minRun) || d.lines && !hasRun(rt[from:to], d.minRun)) ||
				!r.holds(rt, hit, end, from, to, cand.needs, sc.seen) {
				continue
			}
			if d.tail != nil {
				out, done[di] = d.findAt(rt, hit, to, out, done[di], sc.sub, later)
				continue
			}
			done[di] = to
			out = d.findIn(rt, from, to, out, later)
		}
	}
	if later != nil && len(later.list) > 0 {
		out = r.settle(rt, out, sc)
	}
	slices.SortStableFunc(out, func(a, b Finding) int { return a.Start - b.Start })
	return out
}

// deferred are the Named findings a merging find checks at its end.
type deferred struct {
	list []pending
	ms   []int // each one's match, list[i].m0 to m1
}

// A pending is a Named rule's match whose secret is text[start:end]; it
// was found when out held at findings.
type pending struct {
	d                      *Detector
	at, start, end, m0, m1 int
}

// settle checks the pending findings and puts those kept into out where
// they were found, so the order of findings that begin at one place, and
// so the name merged gives them, is as if each was checked at once. One
// whose secret lies inside a Marked finding is not checked: merged names
// a group by its first Marked finding and spans it whole, whatever a
// Named one inside says, and its checks (entropy, allowlists: most of
// generic-api-key's cost) are the dearest part of dense text. Nor is one
// whose secret is that of a Named finding kept before it (generic-api-key
// and a service's rule reading one assignment: half of dense text's): the
// earlier one comes first among those that begin there, so merged names
// and spans their group as if the later one were not there.
func (r *registry) settle(text string, out []Finding, sc *scratch) []Finding {
	// The Marked findings by start, with the furthest end of those
	// beginning at or before each.
	marked := sc.marked[:0]
	for _, f := range out {
		if f.Class == Marked {
			marked = append(marked, span{int64(f.Start), int64(f.End)})
		}
	}
	slices.SortFunc(marked, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(marked); i++ {
		marked[i].end = max(marked[i].end, marked[i-1].end)
	}
	sc.marked = marked
	found := append(sc.found[:0], out...)
	out = out[:0]
	next := 0
	if sc.kept == nil {
		sc.kept = map[span]struct{}{}
	}
	for _, p := range sc.later.list {
		for ; next < p.at; next++ {
			out = append(out, found[next])
		}
		// k: how many Marked findings begin at or before p's secret.
		k, hi := 0, len(marked)
		for k < hi {
			if h := int(uint(k+hi) >> 1); marked[h].start <= int64(p.start) {
				k = h + 1
			} else {
				hi = h
			}
		}
		if k > 0 && marked[k-1].end >= int64(p.end) {
			continue
		}
		if _, ok := sc.kept[span{int64(p.start), int64(p.end)}]; ok {
			continue
		}
		if start, end, ok := p.d.span(text, sc.later.ms[p.m0:p.m1]); ok {
			out = append(out, Finding{p.d.Name, p.d.Class, start, end})
			sc.kept[span{int64(start), int64(end)}] = struct{}{}
		}
	}
	if len(sc.kept) > 0 {
		clear(sc.kept)
	}
	sc.found = found
	return append(out, found[next:]...)
}

// scratch is what a find keeps per detector and per needed literal,
// pooled: Scrub is called on every log record.
type scratch struct {
	done  []int
	seen  []seen
	runs  lineRuns
	sub   []int // a hand-read tail's submatch indexes, refilled at each hit
	dirty bool  // done or seen holds what a find wrote
	// What settle keeps from find to find.
	later  deferred
	marked []span
	found  []Finding
	kept   map[span]struct{} // the spans of the Named findings it kept, by this find

}

// seen is what a find knows of a literal: text[lo:hi] holds none of its
// strings, and text[at:atEnd] holds one.
type seen struct{ lo, hi, at, atEnd int }

// holds reports whether text[from:to], which holds the hit's word
// text[hit:end], holds each of needs, reading only what no earlier call in
// this find read for the same literal: a detector's windows move forward
// and overlap (kubernetes-secret-yaml reads 1 KiB each side of every
// "secret" for a "kind:", curl-auth-user as far back for its
// case-sensitive "curl"), so each byte is read about once.
func (r *registry) holds(text string, hit, end, from, to int, needs []need, known []seen) bool {
	for _, n := range needs {
		l, k := &r.lits[n.id], &known[n.id]
		if from <= k.at && k.atEnd <= to && k.atEnd > 0 || n.inWord && l.in(text[hit:end]) {
			continue
		}
		lo, grow := from, k.lo <= from && from <= k.hi
		if grow {
			if to <= k.hi {
				return false
			}
			// What begins before k.hi-longest+1 ends by k.hi.
			lo = max(from, k.hi-l.longest()+1)
		}
		if i, n := l.index(text[lo:to]); i >= 0 {
			k.at, k.atEnd = lo+i, lo+i+n
			continue
		}
		if grow {
			k.hi = to
		} else {
			k.lo, k.hi = from, to
		}
		return false
	}
	return true
}

// lineEnd is where the line of a hit ends, by to, if its first line break
// from the hit on is at text[nl]. A named secret's value is on the name's
// line, but an XML element's text may begin on the next
// (<apiToken>\n  value\n</apiToken>), so with xml (a named rule's hit
// before a '>' that ends its line) that line counts too.
func lineEnd(text string, nl, to int, xml bool) int {
	if nl >= to {
		return to
	}
	if xml {
		if k := strings.IndexByte(text[nl+1:to], '\n'); k >= 0 {
			return nl + 1 + k
		}
		return to
	}
	return nl
}

// An assignment is what follows a named secret's word, read once a hit for
// all its rules: where the operator is (op, -1 if none), the last place the
// secret may begin (by), the longest run of bytes with no separator in
// text[op:by], and the run that holds text[by], text[from:to], read at
// most maxRun bytes past by.
type assignment struct {
	end, op, by int
	early       int
	from, to    int
}

func readAssignment(text string, end, maxRun int) assignment {
	a := assignment{end: end, op: assignAfter(text, end)}
	if a.op < 0 {
		return a
	}
	a.by = secretBy(text, a.op)
	run := 0
	for k := a.op; k < a.by; k++ {
		if isSeparator[text[k]] {
			run = 0
		} else if run++; run > a.early {
			a.early = run
		}
	}
	a.from, a.to = a.by-run, a.by
	for a.to < len(text) && a.to < a.by+maxRun && !isSeparator[text[a.to]] {
		a.to++
	}
	return a
}

// hasRun is hasRun(text[a.op:min(to, a.by+n)], n), the secret's run
// looked for where its rule's secret begins. A run that begins after
// a.by has fewer than n bytes there, so only those of a.early and the
// one at a.by count, when the range reaches a.by.
func (a *assignment) hasRun(text string, to, n int) bool {
	end := min(to, a.by+n)
	if end < a.by {
		return hasRun(text[a.op:end], n)
	}
	return a.early >= n || min(a.to, end)-a.from >= n
}

// secretBy is the last place a named secret can begin whose assignment
// operator begins at text[op]: after at most maxOperator bytes of the
// operator (:::=) and the quotes, spaces or '=' that follow it.
func secretBy(text string, op int) int {
	k := op
	for k < len(text) && k < op+maxOperator && assignClass[text[k]]&beforeSecret != 0 {
		k++
	}
	return k
}

// assignClass says what a byte may be after a named secret's word, for
// assignAfter and secretBy, which read it at every hit of a named rule.
var assignClass = func() (t [256]uint8) {
	for c := range 256 {
		if isAlnum(byte(c)) {
			t[c] |= inName
		}
	}
	for _, c := range []byte(" \t\r\n\v\f_.-'\"") {
		t[c] |= inName
	}
	for _, c := range []byte("=:>,|?") {
		t[c] |= operator
	}
	for _, c := range []byte("=:>|?,`'\" \t\r\n\f\v") {
		t[c] |= beforeSecret
	}
	return t
}()

const (
	inName       = 1 << iota // more of the name, or spaces and quotes before the operator
	operator                 // begins an operator
	beforeSecret             // in an operator or after it, before the secret
)

// maxOperator is the most bytes from the start of a named secret's
// assignment operator to the secret.
const maxOperator = 4 + 5

// assignAfter returns where the operator begins if what follows a name at
// text[i:] can be an assignment as the gitleaks rules for named secrets
// read one: more of the name, spaces and quotes, at most 23 bytes of them,
// then an operator (=, :, >, ",", ||, ?=); else -1. It is a cheap first
// step of those rules' regexps, which most mentions of "token" in prose
// fail, and their secret, the group after the operator, begins by
// secretBy (TestAssignRulesCaptureAfterTheOperator).
func assignAfter(text string, i int) int {
	for j := i; j < len(text) && j <= i+23; j++ {
		switch c := assignClass[text[j]]; {
		case c&operator != 0:
			return j
		case c&inName == 0:
			return -1
		}
	}
	return -1
}

// findAt appends d's finding whose needed word is at text[hit:], if one
// ends by to, and returns how far d has now read. A tail read by hand
// fills sub, which the finding does not keep.
func (d *Detector) findAt(text string, hit, to int, out []Finding, done int, sub []int, later *deferred) ([]Finding, int) {
	if d.bound && hit > 0 && wordChar(text[hit-1]) == wordChar(text[hit]) {
		return out, done
	}
	var m []int
	if s := text[hit:to]; d.split != nil && indexNonASCII(s) < 0 {
		m = d.split.find(s, sub)
	} else if d.seq != nil && indexNonASCII(s) < 0 {
		m = d.seq.find(s, sub)
	} else {
		m = d.tail.FindStringSubmatchIndex(s)
	}
	if m == nil {
		return out, done
	}
	for i := range m {
		if m[i] >= 0 {
			m[i] += hit
		}
	}
	for m[0] > max(hit-d.back, done) && (isAlnum(text[m[0]-1]) || strings.IndexByte("_.-", text[m[0]-1]) >= 0) {
		m[0]--
	}
	return d.accept(text, m, out, later), m[1]
}

// findIn appends d's findings in text[from:to].
func (d *Detector) findIn(text string, from, to int, out []Finding, later *deferred) []Finding {
	if d.starts != nil && indexNonASCII(text[from:to]) < 0 {
		return d.findAtStarts(text, from, to, out, later)
	}
	for _, m := range d.re.FindAllStringSubmatchIndex(text[from:to], -1) {
		for i := range m {
			if m[i] >= 0 {
				m[i] += from
			}
		}
		out = d.accept(text, m, out, later)
	}
	return out
}

// findAtStarts is findIn over w, text[from:to], ASCII, for a rule whose
// every match begins with one of starts: the leftmost matches
// FindAllStringSubmatchIndex returns are those of the anchored regexp at
// each place one begins, in order, each looked for from the end of the
// last. Go's NFA, with no literal prefix to jump by, stepped every byte of
// a window (kubernetes-secret-yaml's 2 KiB, a tenth of dense text's time).
func (d *Detector) findAtStarts(text string, from, to int, out []Finding, later *deferred) []Finding {
	w := text[from:to]
	last := 0 // where the last match ended
	for pos := 0; pos < len(w); {
		s := -1
		for i, p := range d.starts {
			if k := indexFoldAt(w[pos:], p, d.startsAt[i]); k >= 0 && (s < 0 || pos+k < s) {
				s = pos + k
			}
		}
		if s < 0 {
			break
		}
		m := []int(nil)
		if !d.bound || s == 0 || !wordChar(w[s-1]) {
			m = d.anchored.FindStringSubmatchIndex(w[s:])
		}
		if m == nil {
			pos = s + 1
			continue
		}
		for i := range m {
			if m[i] >= 0 {
				m[i] += from + s
			}
		}
		if d.leadRun {
			for k := s; k > max(s-50, last) && (isAlnum(w[k-1]) || strings.IndexByte("_.-", w[k-1]) >= 0); k-- {
				m[0]--
			}
		}
		out = d.accept(text, m, out, later)
		pos = m[1] - from
		last = pos
	}
	return out
}

// accept appends the finding of d's match m, unless d rejects it. With
// later, a Named rule's match from the table waits there for the find's
// end (settle).
func (d *Detector) accept(text string, m []int, out []Finding, later *deferred) []Finding {
	if later != nil && d.Class == Named && d.secretOf != nil {
		if start, end, ok := d.secretOf(m); ok {
			later.list = append(later.list, pending{d: d, at: len(out), start: start, end: end, m0: len(later.ms), m1: len(later.ms) + len(m)})
			later.ms = append(later.ms, m...)
		}
		return out
	}
	var start, end int
	if d.span != nil {
		var ok bool
		if start, end, ok = d.span(text, m); !ok {
			return out
		}
	} else {
		if !d.keep(text, m) {
			return out
		}
		g := max(d.group, 1)
		start, end = m[2*g], m[2*g+1]
	}
	return append(out, Finding{d.Name, d.Class, start, end})
}

// Mark is what replaces a credential a rule found: [masked: <rule id>], so
// a reader knows why the text is gone.
func Mark(rule string) string { return markOpen + rule + "]" }

// markOpen begins every Mark; the paths that mask many credentials write
// a Mark in its three parts rather than make it.
const markOpen = "[masked: "

// Scrub returns text with each credential Find finds replaced by its Mark;
// overlapping ones become one Mark, of the first Marked rule among them if
// any, since it says most about what was there (merged). Scrub of its own output
// changes nothing. Use it on logs, errors and what else the Hub says
// itself, and on Events when the Hub masks every shape in them.
func Scrub(text string) string { return allRules().scrub(text) }

// ScrubMarked is Scrub with the Marked rules alone, which every Event
// passes: a credential with a mark of its own is masked for watchers too.
func ScrubMarked(text string) string { return markedRules().scrub(text) }

func (r *registry) scrub(text string) string {
	buf, _ := findings.Get().(*[]Finding)
	if buf == nil {
		buf = new([]Finding)
	}
	fs := merged(r.appendFind((*buf)[:0], text, nil, true))
	out := withMarks(text, fs)
	*buf = fs[:0]
	findings.Put(buf)
	return out
}

// findings are the slices scrub finds into, kept from call to call: text
// dense with credentials has thousands, which grew a slice by copies.
var findings sync.Pool // of *[]Finding

// withMarks is text with each of fs, merged, replaced by its Mark.
func withMarks(text string, fs []Finding) string {
	if len(fs) == 0 {
		return text
	}
	n := len(text)
	for _, f := range fs {
		n += len(markOpen) + len(f.Detector) + 1 - (f.End - f.Start)
	}
	var b strings.Builder
	b.Grow(n)
	cur := 0
	for _, f := range fs {
		b.WriteString(text[cur:f.Start])
		b.WriteString(markOpen)
		b.WriteString(f.Detector)
		b.WriteByte(']')
		cur = f.End
	}
	b.WriteString(text[cur:])
	return b.String()
}

// merged joins overlapping findings, sorted by Start, into one, named for
// the first Marked rule among them if any, else the first, in fs's own
// array.
func merged(fs []Finding) []Finding {
	out := fs[:0]
	for _, f := range fs {
		if n := len(out); n > 0 && f.Start <= out[n-1].End {
			last := &out[n-1]
			last.End = max(last.End, f.End)
			if last.Class != Marked && f.Class == Marked {
				last.Detector, last.Class = f.Detector, Marked
			}
			continue
		}
		out = append(out, f)
	}
	return out
}

// spaceEscapes copies text into dst with each ESC made a space, sixteen
// bytes a step and without a branch on what they hold: terminal text has
// a colour code every few words, and finding each with bytes.IndexByte
// cost a call apiece, a fifth of the Marked rules' time in a Writer.
func spaceEscapes(dst, text []byte) []byte {
	dst = slices.Grow(dst[:0], len(text))[:len(text)]
	k := 0
	for ; k+16 <= len(text); k += 16 {
		t, d := text[k:k+16], dst[k:k+16]
		binary.LittleEndian.PutUint64(d, spaceEscapes8(binary.LittleEndian.Uint64(t)))
		binary.LittleEndian.PutUint64(d[8:], spaceEscapes8(binary.LittleEndian.Uint64(t[8:])))
	}
	for ; k < len(text); k++ {
		c := text[k]
		if c == 0x1b {
			c = ' '
		}
		dst[k] = c
	}
	return dst
}

// spaceEscapes8 is w, eight bytes, with each ESC made a space.
func spaceEscapes8(w uint64) uint64 {
	const ones, highs, lows = 0x0101010101010101, 0x8080808080808080, 0x7f7f7f7f7f7f7f7f
	x := w ^ 0x1b*ones
	// The high bit of each byte of x that is zero, exactly: no carry
	// crosses a byte, as (x&lows)+lows is at most 0xfe a byte.
	z := ^((x & lows) + lows | x) & highs
	return w ^ (z>>7)*(0x1b^' ')
}

// A shaper masks credentials by shape in the pieces of one stream, with
// the buffers it reuses from piece to piece, so a piece costs no
// allocation once they have grown.
type shaper struct {
	r     *registry
	view  []byte
	found []Finding
}

// find finds the credentials s.r finds in text, for maskWidth, and
// reports whether there are any. An escape sequence's ESC reads as a
// space, so a coloured token is found too: s.r walks text reading ESC
// so, and the rules read a view of text with each ESC a space, made only
// once the walk meets a needed word.
func (s *shaper) find(text []byte) bool {
	view := func() string {
		s.view = spaceEscapes(s.view, text)
		return unsafe.String(unsafe.SliceData(s.view), len(s.view))
	}
	// text and the view are read as strings without a copy: neither is
	// written until the next piece, and find keeps no part of them (a
	// Finding is offsets).
	s.found = merged(s.r.appendFind(s.found[:0], unsafe.String(unsafe.SliceData(text), len(text)), view, true))
	return len(s.found) > 0
}

// maskWidth appends text to dst with each credential find found in it
// replaced character for character: by its mark padded with '*', or by
// '*' alone where the mark is longer, so a terminal keeps its columns.
func (s *shaper) maskWidth(dst, text []byte) []byte {
	cur := 0
	for _, f := range s.found {
		dst = append(dst, text[cur:f.Start]...)
		n, stars := utf8.RuneCount(text[f.Start:f.End]), 0
		if mark := len(markOpen) + len(f.Detector) + 1; mark > n {
			stars = n
		} else {
			dst = append(append(append(dst, markOpen...), f.Detector...), ']')
			stars = n - mark
		}
		for range stars {
			dst = append(dst, '*')
		}
		cur = f.End
	}
	return append(dst, text[cur:]...)
}
