package redact

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// maxLead bounds the text a match holds before its needed word that a
// Writer holds back for it; a longer one (a run without a bound, as a
// host name before .webhook.office.com) is read from there on.
const maxLead = 64

// wordLead is the most bytes a match of re holds before the first of
// words in it (at most maxLead), or 0 if no word is inside the match (it
// stands beside it).
func wordLead(re *regexp.Regexp, words []string) int {
	t, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return maxLead
	}
	n, _ := leadOf(t.Simplify(), words)
	return min(n, maxLead)
}

// leadOf is the most bytes t matches before one of words, and whether a
// word is in every match of t that counts.
func leadOf(t *syntax.Regexp, words []string) (int, bool) {
	switch t.Op {
	case syntax.OpLiteral:
		s := strings.ToLower(string(t.Rune))
		for _, w := range words {
			if k := strings.Index(s, w); k >= 0 {
				return k, true
			}
		}
		return len(s), false
	case syntax.OpCapture:
		return leadOf(t.Sub[0], words)
	case syntax.OpConcat:
		n := 0
		for _, s := range t.Sub {
			k, ok := leadOf(s, words)
			if n += k; ok || n > maxLead {
				return n, ok
			}
		}
		return n, false
	case syntax.OpAlternate:
		n, found := 0, false
		for _, s := range t.Sub {
			k, ok := leadOf(s, words)
			n, found = max(n, k), found || ok
		}
		return n, found
	case syntax.OpCharClass:
		if len(t.Rune) > 0 && t.Rune[len(t.Rune)-1] >= utf8.RuneSelf {
			return utf8.UTFMax, false
		}
		return 1, false
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax, false
	case syntax.OpStar, syntax.OpPlus:
		return maxLead + 1, false
	case syntax.OpQuest:
		k, _ := leadOf(t.Sub[0], words)
		return k, false
	case syntax.OpRepeat:
		k, _ := leadOf(t.Sub[0], words)
		if t.Max < 0 {
			return maxLead + 1, false
		}
		return min(k*t.Max, maxLead+1), false
	}
	return 0, false // empty-width assertions
}

// holdFrom returns where the end of data that a Writer must hold back for
// the shapes begins, given run, the start of its last run of token bytes:
// the earliest of the last run's last lead bytes (the text before a word
// yet to come), the text a match may hold before a needed word in data's
// last line whose rule's window reaches past data's end (leads), and the
// lead bytes before a word's start that ends data; never before the line.
func (r *registry) holdFrom(data []byte, run int) int {
	m := r.m
	n := len(data)
	line := bytes.LastIndexByte(data, '\n') + 1
	var st uint32
	from := max(run, n-r.lead)
	text := unsafe.String(unsafe.SliceData(data), n) // read, not kept
	// 64: the longest needed word.
	for i := max(line, n-r.reach-64); i < n; i++ {
		if st < r.shallow { // as find walks
			i, st = r.passOver(text, i, st)
		}
		t := m.dense[st+uint32(m.cls[data[i]])]
		if st = t & idMask; t&specialFlag != 0 {
			st = 0
		} else if lead := r.liveLead(t, n-i-1); lead >= 0 {
			from = min(from, i+1-int(m.out(st))-lead)
		}
	}
	if st != 0 {
		from = min(from, n-int(m.depth(st))-r.lead)
	}
	return max(from, line)
}

// liveLead is, for t, a step of the automaton, the most text a match holds
// before the word it ends among its rules whose window reaches more than
// left bytes on, or -1 if it ends no word or none does.
func (r *registry) liveLead(t uint32, left int) int {
	lead := -1
	if t&matchFlag == 0 {
		return lead
	}
	st := t & idMask
	for _, c := range r.byState[st/r.m.ncls] {
		if r.ds[c.d].reach > left {
			lead = max(lead, r.leads[c.d])
		}
	}
	return lead
}
