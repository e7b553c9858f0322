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

// TestASecretSequenceReadByHandMatchesAsItsRegexp holds each secret
// alternative read as runs of classes (classRuns, seqIn) to its regexp,
// ^(alternative)(?:end), from random texts of the bytes its classes hold
// (the first and last of each class, and a few beside them), '=', the
// secret's ends and bytes no class holds, in runs of every length about
// its bounds; at least generic-api-key's [a-z0-9][a-z0-9+/]{11,}={0,3}.
func TestASecretSequenceReadByHandMatchesAsItsRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	type part struct {
		name string
		a    *assignTail
		secretPart
	}
	var all []part
	for _, d := range allRules().ds {
		if d.split != nil {
			for _, p := range d.split.parts {
				all = append(all, part{d.Name, d.split, p})
			}
		}
	}
	// And sequences whose runs overlap, where the lengths are tried back.
	for _, alt := range []string{`[a-z0-9]{3,}[a-f]{2,4}=?`, `ab?[bc]{2,9}c;?`, `(?i)x[a-z]+[0-9a-z]{0,3}`, `[a-z/]{1,40}/[a-z]{2}`} {
		a := &assignTail{}
		a.splitSecret(mustParse(alt), mustParse(`(?i)`+secretEnd))
		all = append(all, part{alt, a, a.parts[0]})
	}
	parts, checked, matched := 0, 0, 0
	generic := false
	for _, p := range all {
		if p.seq == nil {
			continue
		}
		parts++
		generic = generic || p.name == "generic-api-key"
		var alphabet []byte
		for _, c := range p.seq {
			for b := range 128 {
				if c.class[b] && (b == 0 || !c.class[b-1] || b == 127 || !c.class[b+1] || r.IntN(8) == 0) {
					alphabet = append(alphabet, byte(b))
				}
			}
		}
		alphabet = append(alphabet, []byte("=\\nr;'\"` \t\r\n+/.-_~#")...)
		for range 3000 {
			var b []byte
			for _, c := range p.seq {
				n := c.min
				if c.max != c.min {
					n = c.min + r.IntN(int(min(uint(c.max-c.min), 20))+3) - 1
				} else if r.IntN(20) == 0 {
					n += r.IntN(3) - 1
				}
				for range max(n, 0) {
					if r.IntN(40) == 0 {
						b = append(b, alphabet[r.IntN(len(alphabet))])
						continue
					}
					for {
						if x := alphabet[r.IntN(len(alphabet))]; c.class[x] {
							b = append(b, x)
							break
						}
					}
				}
			}
			for range r.IntN(3) {
				b = append(b, alphabet[r.IntN(len(alphabet))])
			}
			if r.IntN(2) == 0 {
				b = append(b, []string{`"`, " ", ";", "\\n", "\\N", ""}[r.IntN(6)]...)
			}
			s := "x = " + string(b)
			want := p.re.FindStringSubmatchIndex(s[4:])
			for i := range want {
				want[i] += 4
			}
			var got []int
			if e, q := p.a.seqIn(s, 4, p.seq); e >= 0 {
				got = []int{4, e, 4, q}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s, %s on %q: got %v, want %v", p.name, p.re, s[4:], got, want)
			}
			checked++
			if want != nil {
				matched++
			}
		}
	}
	if !generic || parts < 10 || matched < checked/5 {
		t.Fatalf("%d alternatives, generic-api-key's among them: %v, %d of %d texts matched: the test reads too little", parts, generic, matched, checked)
	}
	t.Logf("%d alternatives read by hand; %d texts checked, %d matched", parts, checked, matched)
}

// TestAMatchFoundFromItsNameMatchesAsTheRegexp holds each rule read from
// its name back (leadRun: [\w.-]{0,50}? before the name) to its regexp
// over the whole window: the same matches, groups and all, in texts of
// its examples, its names in random cases behind runs of name bytes of
// every length about 50, operators, spaces, and the secrets of its
// examples, several in a line.
func TestAMatchFoundFromItsNameMatchesAsTheRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	rules, checked, matched := 0, 0, 0
	for _, d := range allRules().ds {
		if !d.leadRun {
			continue
		}
		rules++
		var secrets []string
		for _, e := range d.Examples {
			for _, m := range d.re.FindAllStringSubmatchIndex(e, -1) {
				secrets = append(secrets, e[m[2]:m[3]])
			}
		}
		if len(secrets) == 0 {
			t.Fatalf("%s: no secret in its examples", d.Name)
		}
		pieces := []string{" ", "\t", "'", `"`, "=", ":", ":=", "||", "=>", ",", "_", ".", "-", "a", "Z", "9", "key", "\\n", ";", "/", "\n", "é"}
		texts := slices.Clone(d.Examples)
		for range 2000 {
			var b strings.Builder
			for range 1 + r.IntN(3) {
				for range r.IntN(60) {
					b.WriteByte("aZ9_.-"[r.IntN(6)])
				}
				for _, c := range []byte(d.starts[r.IntN(len(d.starts))]) {
					if r.IntN(2) == 0 {
						c = byte(unicode.ToUpper(rune(c)))
					}
					b.WriteByte(c)
				}
				for range r.IntN(4) {
					b.WriteString(pieces[r.IntN(len(pieces))])
				}
				b.WriteString([]string{" = ", ": '", "=", " "}[r.IntN(4)])
				sec := secrets[r.IntN(len(secrets))]
				if r.IntN(4) == 0 {
					sec = sec[:r.IntN(len(sec))]
				}
				b.WriteString(sec)
				for range r.IntN(3) {
					b.WriteString(pieces[r.IntN(len(pieces))])
				}
			}
			texts = append(texts, b.String())
		}
		for _, text := range texts {
			if indexNonASCII(text) >= 0 {
				continue
			}
			var got [][]int
			e := *d
			e.span = func(_ string, m []int) (int, int, bool) {
				got = append(got, slices.Clone(m))
				return m[0], m[1], true
			}
			e.secretOf = nil
			e.findAtStarts(text, 0, len(text), nil, nil)
			want := d.re.FindAllStringSubmatchIndex(text, -1)
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("%s on %q: got %v, want %v", d.Name, text, got, want)
			}
			checked++
			matched += len(want)
		}
	}
	if rules < 5 || matched < 3000 {
		t.Fatalf("%d rules, %d matches: the test reads too little", rules, matched)
	}
	t.Logf("%d rules read from their names; %d texts checked, %d matches", rules, checked, matched)
}
