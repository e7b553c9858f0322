package redact

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// generatedTexts are n texts made from every rule's examples, whole,
// cut, case-flipped or with a byte made a rune of another plane, among
// words, assignments, allowlist words, runes of every Unicode plane
// (0 to 16), tabs, colour codes and every kind of line end, with
// credentials laid across the 4 KiB edges a Writer's pieces end at.
func generatedTexts(n int) []string {
	var examples []string
	for _, d := range Detectors() {
		examples = append(examples, d.Examples...)
	}
	var allowWords []string
	for _, r := range append([]rule{{allow: []allow{gitleaksAllow}}}, gitleaksRules...) {
		for _, a := range r.allow {
			for i, w := range a.stopwords {
				if i%37 == 0 {
					allowWords = append(allowWords, w)
				}
			}
		}
	}
	allowWords = append(allowWords, "true", "false", "null", "$HOME", "${PATH}", "{{ x.y }}", "%s", "/usr/local/bin/x", "aaaaaaaaaaaa", "abcdefghijklmnopqrstuvwxyz", "014df517-39d1-4453-b7b3-9930c563627c")
	words := strings.Fields("the a token key secret api_key password auth access credential creds passwd Bearer Authorization: export " +
		"kind: Secret data: curl -u -H gh sk-ant- AKIA xoxb- glpat- eyJ https:// user:pass@host = := : => , ? || ' \" ` ; {} [] () <apiToken> </apiToken>")
	r := rand.New(rand.NewPCG(38, 50))
	planeRune := func() string {
		plane := r.IntN(17)
		for {
			c := rune(plane<<16 | r.IntN(0x10000))
			if utf8.ValidRune(c) {
				return string(c)
			}
		}
	}
	ends := []string{"\n", "\r\n", "\r", "\t", " ", "\x1b[0m\n", "\x1b[31m"}
	secret := func() string {
		e := examples[r.IntN(len(examples))]
		switch r.IntN(6) {
		case 0: // cut
			return e[:r.IntN(len(e)+1)]
		case 1: // a byte made a rune of some plane
			if len(e) > 0 {
				k := r.IntN(len(e))
				return e[:k] + planeRune() + e[k+1:]
			}
		case 2: // a letter's case flipped
			if k := r.IntN(len(e) + 1); k < len(e) && isLetter(e[k]) {
				return e[:k] + string(e[k]^0x20) + e[k+1:]
			}
		}
		return e
	}
	piece := func() string {
		switch k := r.IntN(10); {
		case k < 3:
			return secret()
		case k < 5:
			return words[r.IntN(len(words))]
		case k < 6:
			return allowWords[r.IntN(len(allowWords))]
		case k < 8:
			var b strings.Builder
			for range 1 + r.IntN(6) {
				b.WriteString(planeRune())
			}
			return b.String()
		default:
			return fmt.Sprintf("%x", r.Uint64())
		}
	}
	texts := make([]string, 0, n)
	for i := range n {
		var b strings.Builder
		size := r.IntN(12 << 10)
		for b.Len() < size {
			b.WriteString(piece())
			b.WriteString(ends[r.IntN(len(ends))])
		}
		text := b.String()
		if i%2 == 1 && len(text) > 4<<10 {
			// A credential across a piece's edge, cut at any of its bytes.
			e := secret()
			at := 4<<10 - r.IntN(len(e)+1)
			text = text[:at] + e + ends[r.IntN(len(ends))] + text[at:]
		}
		texts = append(texts, text)
	}
	return texts
}

// TestGeneratedTextIsMaskedAsBefore holds Scrub, ScrubMarked, Find and
// a Writer's shapes, marked and all, to what main at a34128b (before the
// dense text's fast paths of issue 38) made of 600 generated texts:
// generated.golden has a digest of each output.
func TestGeneratedTextIsMaskedAsBefore(t *testing.T) {
	var got strings.Builder
	for i, text := range generatedTexts(600) {
		fmt.Fprintf(&got, "%d marks=%d scrub=%s marked=%s writer-marked=%s writer-all=%s\n", i,
			len(merged(Find(text))), digest(Scrub(text))[:8], digest(ScrubMarked(text))[:8], digest(written(t, text, false))[:8], digest(written(t, text, true))[:8])
	}
	want := golden(t, "testdata/shapes/generated.golden", got.String())
	g, w := strings.Split(got.String(), "\n"), strings.Split(want, "\n")
	if len(g) != len(w) {
		t.Fatalf("%d lines, want %d", len(g), len(w))
	}
	marks := 0
	for i := range g {
		if g[i] != w[i] {
			t.Errorf("got  %s\nwant %s", g[i], w[i])
		}
		var n, k int
		fmt.Sscanf(g[i], "%d marks=%d", &n, &k)
		marks += k
	}
	if marks < 1000 {
		t.Fatalf("%d marks in all: the texts hold too few credentials to test", marks)
	}
}

// TestScrubMasksAsThePlainFind holds Scrub and ScrubMarked, whose find
// leaves unchecked a Named finding inside a Marked one or with the secret
// of a Named one kept before it (settle), to the plain find, which checks
// every finding, merged and masked, on the generated texts, text dense
// with credentials and the corpora.
func TestScrubMasksAsThePlainFind(t *testing.T) {
	texts := generatedTexts(600)
	for _, text := range maskInputs(t) {
		texts = append(texts, text)
	}
	for i, text := range texts {
		if got, want := Scrub(text), withMarks(text, merged(allRules().find(text))); got != want {
			t.Fatalf("text %d: Scrub masks %s, the plain find %s", i, digest(got), digest(want))
		}
		if got, want := ScrubMarked(text), withMarks(text, merged(markedRules().find(text))); got != want {
			t.Fatalf("text %d: ScrubMarked masks %s, the plain find %s", i, digest(got), digest(want))
		}
	}
}
