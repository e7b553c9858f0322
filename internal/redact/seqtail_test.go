package redact

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestATailReadAsASequenceMatchesAsItsRegexp holds each tail read as a
// plain sequence (seqOf) to its regexp: the same match and secret, or
// none, wherever one of its rule's words begins in the test texts and its
// examples, and in texts made from each word and runs of its classes'
// bytes of every length near their bounds, ends of every kind, bytes
// flipped in case or swapped for others, cut at every length.
func TestATailReadAsASequenceMatchesAsItsRegexp(t *testing.T) {
	lines := maskLines(t)
	r := rand.New(rand.NewPCG(23, 24))
	ends := []string{"", " ", "\t", "'", `"`, "`", ";", "\\n", "\\r", "\\N", "\\R", "-", "_", ".", "a", "Z", "9", "/", "+", "=", "\n", "!"}
	seqs, checked, matched := 0, 0, 0
	for _, d := range allRules().ds {
		if d.seq == nil {
			continue
		}
		seqs++
		texts := slices.Clone(d.Examples)
		for _, w := range d.need {
			for range 200 {
				var b strings.Builder
				b.WriteString(w)
				for _, el := range d.seq.elems[1:] {
					if el.lits != nil {
						b.WriteString(el.lits[r.IntN(len(el.lits))])
						continue
					}
					if el.class == nil {
						b.WriteString(el.lit)
						continue
					}
					var in []byte
					for c := range 128 {
						if el.class[c] {
							in = append(in, byte(c))
						}
					}
					n := el.min + r.IntN(3) - 1
					if el.max > el.min {
						n = el.min + r.IntN(el.max-el.min+3) - 1
					} else if el.max < 0 {
						n = el.min + r.IntN(40) - 1
					}
					for range max(n, 0) {
						b.WriteByte(in[r.IntN(len(in))])
					}
				}
				b.WriteString(ends[r.IntN(len(ends))])
				b.WriteString(ends[r.IntN(len(ends))])
				v := []byte(b.String())
				for range r.IntN(3) {
					k := r.IntN(len(v))
					if r.IntN(2) == 0 {
						v[k] ^= 0x20 * byte(r.IntN(2))
					} else {
						v[k] = byte(32 + r.IntN(95))
					}
				}
				texts = append(texts, string(v))
			}
		}
		atWords(d, append(texts, lines...), func(s string) {
			for end := len(s); end >= 0 && end >= len(s)-8; end-- {
				got, want := d.seq.find(s[:end], nil), d.tail.FindStringSubmatchIndex(s[:end])
				if !slices.Equal(got, want) {
					t.Fatalf("%s (%s) on %q: got %v, want %v", d.Name, d.tail, s[:end], got, want)
				}
				checked++
				if want != nil {
					matched++
				}
			}
		})
	}
	if seqs < 60 || matched < 10000 {
		t.Fatalf("%d tails read as sequences, %d matches: the test reads too little", seqs, matched)
	}
	t.Logf("%d tails read as sequences; %d places checked, %d matched", seqs, checked, matched)
}
