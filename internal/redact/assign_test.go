package redact

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestAnAssignmentReadByHandMatchesAsItsTail holds each named rule's
// split tail (splitAssign) to the tail's regexp: the same match and
// secret, or none, wherever one of the rule's words is in the test texts, in its
// examples, and in assignments made of its name, every operator, runs of
// spaces, quotes and name bytes, and values of many lengths and ends.
func TestAnAssignmentReadByHandMatchesAsItsTail(t *testing.T) {
	lines := maskLines(t)
	r := rand.New(rand.NewPCG(13, 14))
	pieces := []string{" ", "\t", "'", `"`, "`", "=", ":", "::", ":::", ">", "|", "||", "?", ",", "=>", "?=", "_", ".", "-", "a", "Z", "9",
		"\\n", "\\r", "\\N", "\\R", ";", "0123456789", "abcdefABCDEF0123456789abcdef", "AbC0/+xyz9876543210==", "\r", "\n"}
	operators := []string{"=", ">", ":=", "::=", ":::=", "||", ":", "=>", "?=", ","}
	split, checked, matched := 0, 0, 0
	for _, d := range allRules().ds {
		if d.split == nil {
			continue
		}
		split++
		texts := slices.Clone(d.Examples)
		// The secrets of its examples, behind separators of every kind.
		secrets := []string{"0123456789abcdef0123456789abcdef"}
		for _, e := range d.Examples {
			for i := range e {
				if m := d.tail.FindStringSubmatchIndex(e[i:]); m != nil {
					secrets = append(secrets, e[i+m[2]:i+m[3]])
					break
				}
			}
		}
		some := func(b *strings.Builder, n int) {
			for range r.IntN(n) {
				b.WriteString(pieces[r.IntN(len(pieces))])
			}
		}
		for _, w := range d.need {
			for range 300 {
				var b strings.Builder
				b.WriteString(w)
				some(&b, 5)
				b.WriteString(operators[r.IntN(len(operators))])
				some(&b, 4)
				b.WriteString(secrets[r.IntN(len(secrets))])
				some(&b, 3)
				texts = append(texts, b.String())
			}
		}
		atWords(d, append(texts, lines...), func(s string) {
			for _, end := range []int{len(s), min(len(s), 40), min(len(s), 90)} {
				got, want := d.split.find(s[:end], nil), d.tail.FindStringSubmatchIndex(s[:end])
				if !slices.Equal(got, want) {
					t.Fatalf("%s on %q: got %v, want %v", d.Name, s[:end], got, want)
				}
				checked++
				if want != nil {
					matched++
				}
			}
		})
	}
	if split < 70 || matched < 3000 {
		t.Fatalf("%d rules split, %d matches: the test reads too little", split, matched)
	}
	t.Logf("%d rules split; %d places checked, %d matched", split, checked, matched)
}

// TestANameReadByItsCasesMatchesAsItsRegexp holds nameEnd, which reads a
// word's letters' cases from a table made when the rule is built, to the
// name's regexp, over every way of writing each word of every split rule
// (some random ones past maxCaseLetters letters) with text after it.
func TestANameReadByItsCasesMatchesAsItsRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	checked, refused := 0, 0
	for _, d := range allRules().ds {
		if d.split == nil {
			continue
		}
		a := d.split
		for _, w := range a.words {
			for k := range 1 << min(len(w), 12) {
				b := []byte(w)
				for i := range b {
					if (k>>(i%12)&1 == 1) != (len(w) > 12 && r.IntN(2) == 0) {
						b[i] = byte(unicode.ToUpper(rune(b[i])))
					}
				}
				s := string(b) + "_KEY = x"
				want := -1
				for _, v := range a.words {
					if len(v) <= len(s) && strings.EqualFold(s[:len(v)], v) {
						if a.name.MatchString(s[:len(v)]) {
							want = len(v)
						}
						break
					}
				}
				if got := a.nameEnd(s); got != want {
					t.Fatalf("%s: nameEnd(%q) = %d, the regexp says %d", d.Name, s, got, want)
				}
				checked++
				if want < 0 {
					refused++
				}
			}
		}
	}
	if checked < 10000 || refused == 0 {
		t.Fatalf("%d names checked, %d refused: the test reads too little", checked, refused)
	}
	t.Logf("%d names checked, %d refused by their case", checked, refused)
}

// atWords calls f with each text's rest from every place one of d's
// needed words begins, where the registry tries d's tail, if it is ASCII.
func atWords(d *Detector, texts []string, f func(s string)) {
	for _, text := range texts {
		for i := 0; i < len(text); i++ {
			s := text[i:]
			if slices.ContainsFunc(d.need, func(w string) bool { return len(w) <= len(s) && strings.EqualFold(s[:len(w)], w) }) && indexNonASCII(s) < 0 {
				f(s)
			}
		}
	}
}
