package redact

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite testdata/shapes/*.golden from this code's output")

// golden returns the golden file at path, written from got first under
// -update.
func golden(t *testing.T, path, got string) string {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(want)
}

// denseSecrets is size bytes of lines nearly every one of which holds a
// credential: the examples of every rule, in an order of their own, over
// and over, as a file of keys or a dump of a process's environment
// would be.
func denseSecrets(size int) string {
	var lines []string
	for _, d := range Detectors() {
		lines = append(lines, d.Examples...)
	}
	r := rand.New(rand.NewPCG(7, 8))
	r.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	unit := strings.Join(lines, "\n") + "\n"
	return strings.Repeat(unit, size/len(unit)+1)[:size]
}

// maskInputs are the texts masked.golden holds what each path made of,
// generated or read from testdata: text dense with credentials, terminal
// output with one every 64 KiB, near misses of every rule, and ordinary
// text and code that must keep every byte.
func maskInputs(t *testing.T) map[string]string {
	in := map[string]string{
		"dense":       denseSecrets(256 << 10),
		"terminal":    string(benchText(1<<20, []string{"ghp_O9hFAiOh29oB93c0F6UJ5YtuALNUEJMUUqAs", "Authorization: Bearer hpODtmtyS9z8iLtoJ22zT4fNH2pdh6uLdVgq", "postgres://app:NVWTBxUPds5tYOodx@db/app"})),
		"near-misses": nearMisses(256 << 10),
	}
	for name, path := range map[string]string{"negative": "testdata/shapes/negative.txt", "positive": "testdata/shapes/positive.txt", "code": "testdata/gitleaks/validate.go"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		in[name] = string(b)
	}
	return in
}

// maskLines are the lines of the first 64 KiB of each of maskInputs but
// the terminal text.
func maskLines(t *testing.T) []string {
	in := maskInputs(t)
	var lines []string
	for _, name := range []string{"code", "dense", "near-misses", "negative", "positive"} {
		text := in[name]
		if len(text) > 64<<10 {
			text = text[:64<<10]
		}
		lines = append(lines, strings.Split(text, "\n")...)
	}
	return lines
}

// written is what a Writer with no values and the shapes makes of text
// written in 4 KiB pieces.
func written(t *testing.T, text string, all bool) string {
	var out bytes.Buffer
	w := NewWriter(&Set{}, &out).MaskShapes(all)
	for i := 0; i < len(text); i += 4 << 10 {
		if _, err := w.Write([]byte(text[i:min(i+4<<10, len(text))])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func digest(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s)))[:16] }

// TestEveryPathMasksTheBytesItMaskedBefore holds Scrub, ScrubMarked and a
// Writer's shapes to what they made of generated and ordinary texts
// before the registry was made to do its work per match (main at
// 645a05e): masked.golden has a digest of each output and how many marks
// Scrub made.
func TestEveryPathMasksTheBytesItMaskedBefore(t *testing.T) {
	in := maskInputs(t)
	var got strings.Builder
	for _, name := range []string{"code", "dense", "near-misses", "negative", "positive", "terminal"} {
		text := in[name]
		fmt.Fprintf(&got, "%s marks=%d scrub=%s marked=%s writer-marked=%s writer-all=%s\n", name,
			len(merged(Find(text))), digest(Scrub(text)), digest(ScrubMarked(text)), digest(written(t, text, false)), digest(written(t, text, true)))
	}
	if want := golden(t, "testdata/shapes/masked.golden", got.String()); got.String() != want {
		t.Errorf("got\n%s\nwant\n%s", got.String(), want)
	}
}

// allowsPlain is allowRule.allows as it was before its regexps ran by
// branch and its stopwords by automaton: each regexp whole, each
// stopword a substring search.
func allowsPlain(a allowRule, t, secret string, m []int) bool {
	target := a.targetOf(t, secret, m)
	reOK := false
	for _, re := range a.res {
		reOK = reOK || re.MatchString(target)
	}
	stopOK := false
	low := strings.ToLower(secret)
	for _, w := range a.stopwords {
		stopOK = stopOK || strings.Contains(low, w)
	}
	return a.frees(reOK, stopOK)
}

// TestAllowlistsAnswerAsTheirPlainReads holds every rule's allowlists,
// read by branch and by automaton, to the plain reads on each line of the
// generated and ordinary texts, each of its words taken for the secret,
// and on the words of the allowlists themselves.
func TestAllowlistsAnswerAsTheirPlainReads(t *testing.T) {
	lines := maskLines(t)
	var rules []allowRule
	for _, r := range gitleaksRules {
		for _, a := range r.allow {
			rules = append(rules, a.compile())
			// The stopwords and the alternatives of the regexps, alone and
			// inside a secret, where they must free it.
			for _, w := range a.stopwords {
				lines = append(lines, w, "api_key = x"+strings.ToUpper(w)+"9Q", "K\u212aey_"+w)
			}
			for _, re := range a.regexes {
				for _, b := range branches(re) {
					for _, l := range b.needs {
						for _, alt := range l.alts {
							lines = append(lines, "token_"+alt+"_file = 0123456789abcdef", alt+"=\n"+alt+"=\n")
						}
					}
				}
			}
		}
	}
	rules = append(rules, gitleaksAllow.compile())
	freed := 0
	for _, line := range lines {
		for _, secret := range append(strings.Fields(line), line) {
			i := strings.Index(line, secret)
			m := []int{i, i + len(secret)}
			for _, a := range rules {
				got, want := a.allows(line, secret, m), allowsPlain(a, line, secret, m)
				if got != want {
					t.Fatalf("allows(%q, secret %q) with %q: got %v, want %v", line, secret, a.res, got, want)
				}
				if want {
					freed++
				}
			}
		}
	}
	if freed == 0 {
		t.Fatal("no allowlist freed anything: the test reads nothing")
	}
	t.Logf("%d lines, %d secrets freed", len(lines), freed)
}

// TestAnAnchoredBranchIsPassedOverOnlyWhereItCannotMatch holds each
// allowlist branch's first bytes (leading) to its regexp: every target it
// matches begins with one of them, whatever byte, case or rune beyond
// ASCII a matching target begins with instead.
func TestAnAnchoredBranchIsPassedOverOnlyWhereItCannotMatch(t *testing.T) {
	all := []allow{gitleaksAllow}
	for _, r := range gitleaksRules {
		all = append(all, r.allow...)
	}
	matching := strings.Fields("true TRUE null false aaaa *** $1 ${2} $HOME $home ${PATH} {{ x.y }} ${{ secrets.TOKEN }} %PATH% %s %+v {12} @VAR@ " +
		"/Users/Bob/src/x /usr/local/bin keyword kelvin access_id CSRF_token api_version Monkey")
	anchored, checked := 0, 0
	for _, a := range all {
		for _, re := range a.regexes {
			for _, b := range branches(re) {
				if b.first == nil {
					continue
				}
				anchored++
				for _, m := range matching {
					_, n := utf8.DecodeRuneInString(m)
					rest := m[n:]
					variants := []string{m, "\u212a" + rest, "\u017f" + rest, "\xff" + rest}
					for c := range 256 {
						variants = append(variants, string([]byte{byte(c)})+rest)
					}
					for _, v := range variants {
						if b.re.MatchString(v) {
							checked++
							if !b.first.has(v[0]) {
								t.Fatalf("%q matches %q, but its first bytes leave out %#x", b.re, v, v[0])
							}
						}
					}
				}
			}
		}
	}
	if anchored < 10 || checked < 50 {
		t.Fatalf("%d anchored branches, %d matches checked: the test reads too little", anchored, checked)
	}
	t.Logf("%d anchored branches, %d matches checked", anchored, checked)
}

// TestEntropyIsAsItWas holds entropy, which adds a term only for the bytes
// a secret holds, to the sum over all 256 it was, to the last bit: a rule
// keeps a secret whose entropy exceeds its bound, so a rounding could
// change what it masks.
func TestEntropyIsAsItWas(t *testing.T) {
	plain := func(s string) float64 {
		var n [256]int
		for i := 0; i < len(s); i++ {
			n[s[i]]++
		}
		h := 0.0
		for _, c := range n {
			if c > 0 {
				p := float64(c) / float64(len(s))
				h -= p * math.Log2(p)
			}
		}
		return h
	}
	r := rand.New(rand.NewPCG(9, 10))
	for range 20000 {
		b := make([]byte, 1+r.IntN(600)) // past 255 too, counted wider
		for i := range b {
			b[i] = byte(r.IntN(1 + r.IntN(256)))
		}
		if got, want := entropy(string(b)), plain(string(b)); got != want {
			t.Fatalf("entropy(%q): got %v, want %v", b, got, want)
		}
	}
}

// xRun reports whether v holds n x's in a row, in either case: what
// strings.ToLower(v) holding them says, since only X lower-cases to x,
// read without making the lower-cased copy.
func xRun(v string, n int) bool {
	run := 0
	for i := 0; i < len(v); i++ {
		if v[i]|0x20 != 'x' {
			run = 0
		} else if run++; run >= n {
			return true
		}
	}
	return false
}

// sequence reports whether v holds n characters in a row that each follow
// the one before (abcdef, 123456, KLMNOP), as made-up values do and a
// random one of any length almost never does.
func sequence(v string, n int) bool {
	run := 1
	for i := 1; i < len(v); i++ {
		a, b := v[i-1]|0x20, v[i]|0x20 // letters case-folded
		if b == a+1 && (isAlnum(v[i-1]) && isAlnum(v[i])) {
			if run++; run >= n {
				return true
			}
		} else {
			run = 1
		}
	}
	return false
}

// TestMadeUpIsAsItsTwoReads holds madeUp, one pass, to the two reads it
// fuses, xRun(v, 4) || sequence(v, 6), on random text of x's, runs of
// letters and digits in both cases, other bytes and runes beyond ASCII.
func TestMadeUpIsAsItsTwoReads(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	parts := []string{"x", "X", "xx", "abc", "DEF", "gH", "123", "456", "789", "a", "b", "C", "d", "E", "f", "0", "1", "2", "34", "56", "@", "[", "`", "{", "/", ":", "\u212a", "\xff", "_", "-"}
	made, runs := 0, 0
	for range 50000 {
		var b strings.Builder
		for range 1 + r.IntN(16) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		v := b.String()
		want := xRun(v, 4) || sequence(v, 6)
		if got := madeUp(v); got != want {
			t.Fatalf("madeUp(%q): got %v, want %v", v, got, want)
		}
		if want {
			made++
		}
		if sequence(v, 6) && !xRun(v, 4) {
			runs++
		}
	}
	if made < 100 || runs < 100 {
		t.Fatalf("%d texts made up, %d by a run alone: the test reads too few", made, runs)
	}
}

// TestXRunIsAsTheLowerCasedRead holds xRun to the read it replaces,
// strings.ToLower's copy searched for "xxxx", on random text of x's, X's,
// other letters and runes beyond ASCII.
func TestXRunIsAsTheLowerCasedRead(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	parts := []string{"x", "X", "a", "\u212a", "\u0445", "\xff", "xx", "XX"}
	found := 0
	for range 20000 {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		v := b.String()
		want := strings.Contains(strings.ToLower(v), "xxxx")
		if got := xRun(v, 4); got != want {
			t.Fatalf("xRun(%q): got %v, want %v", v, got, want)
		}
		if want {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no text held a run: the test reads nothing")
	}
}

// TestARepeatedByteBranchAnswersAsItsRegexp holds each allowlist branch
// read as a repeat (the global ^(?i:a+|b+|…|\*+|\.+)$) to its regexp, on
// every ASCII target of up to three bytes from its own bytes in both
// cases and a few others, and random longer ones.
func TestARepeatedByteBranchAnswersAsItsRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	repeats, checked, matched := 0, 0, 0
	for _, b := range allowBranches() {
		if b.same == nil {
			continue
		}
		repeats++
		var alphabet []byte
		for c := range 128 {
			if b.same.bytes.has(byte(c)) || c%17 == 0 {
				alphabet = append(alphabet, byte(c))
			}
		}
		targets := []string{""}
		for _, x := range alphabet {
			for _, y := range alphabet {
				targets = append(targets, string([]byte{x}), string([]byte{x, y}), string([]byte{x, y, x}))
			}
		}
		for range 5000 {
			c := alphabet[r.IntN(len(alphabet))]
			v := []byte(strings.Repeat(string([]byte{c}), 1+r.IntN(40)))
			for range r.IntN(3) {
				k := r.IntN(len(v))
				v[k] ^= byte(r.IntN(2)) << 5
			}
			targets = append(targets, string(v))
		}
		for _, v := range targets {
			got, want := b.same.matches(v), b.re.MatchString(v)
			if got != want {
				t.Fatalf("%q on %q: got %v, the regexp says %v", b.re, v, got, want)
			}
			checked++
			if want {
				matched++
			}
		}
	}
	if repeats == 0 || matched < 1000 {
		t.Fatalf("%d branches read as repeats, %d of %d targets matched: the test reads too little", repeats, matched, checked)
	}
	t.Logf("%d branches read as repeats, %d of %d targets matched", repeats, matched, checked)
}

// TestAllCapitalsIsAsTheTrim holds allCapitals to the strings.Trim it
// replaces in template, on random text of capitals, '_' and other bytes.
func TestAllCapitalsIsAsTheTrim(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	parts := []string{"A", "Z", "_", "a", "@", "[", "0", "\u212a", "\xff", "TOKEN"}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		v := b.String()
		if got, want := allCapitals(v), strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == ""; got != want {
			t.Fatalf("allCapitals(%q): got %v, want %v", v, got, want)
		}
	}
}

// TestAClassRunBranchAnswersAsItsRegexp holds each allowlist branch read
// as a run of a class (generic-api-key's ^[a-zA-Z_.-]+$) to its regexp,
// on every ASCII target of up to two bytes and random longer ones made
// mostly of the class.
func TestAClassRunBranchAnswersAsItsRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	runs, checked, matched := 0, 0, 0
	for _, b := range allowBranches() {
		if b.class == nil {
			continue
		}
		runs++
		var in []byte
		for c := range 128 {
			if b.class.has(byte(c)) {
				in = append(in, byte(c))
			}
		}
		targets := []string{""}
		for x := range 128 {
			for y := range 128 {
				targets = append(targets, string([]byte{byte(x)}), string([]byte{byte(x), byte(y)}))
			}
		}
		for range 20000 {
			v := make([]byte, 1+r.IntN(60))
			for i := range v {
				v[i] = in[r.IntN(len(in))]
			}
			if r.IntN(2) == 0 {
				v[r.IntN(len(v))] = byte(r.IntN(128))
			}
			targets = append(targets, string(v))
		}
		for _, v := range targets {
			got, want := len(v) > 0 && allIn(v, b.class), b.re.MatchString(v)
			if got != want {
				t.Fatalf("%q on %q: got %v, the regexp says %v", b.re, v, got, want)
			}
			checked++
			if want {
				matched++
			}
		}
	}
	if runs == 0 || matched < 10000 {
		t.Fatalf("%d branches read as runs, %d of %d targets matched: the test reads too little", runs, matched, checked)
	}
	t.Logf("%d branches read as runs, %d of %d targets matched", runs, matched, checked)
}

// allowBranches is every branch of every allowlist, the global one's first.
func allowBranches() []branch {
	all := []allow{gitleaksAllow}
	for _, r := range gitleaksRules {
		all = append(all, r.allow...)
	}
	var out []branch
	for _, a := range all {
		for _, re := range a.regexes {
			out = append(out, branches(re)...)
		}
	}
	return out
}
