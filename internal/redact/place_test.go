package redact

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestTheWalkLosesNoMarkedShapeWhereverItSits: the walk that passes over
// text where no needed word can begin (registry.skip, eight bytes a round)
// loses nothing. Each Marked rule's example, at the start of the text, at
// its end, after multibyte UTF-8 of each length mod 4 and beside colour
// codes, is found in an Event (ScrubMarked) and in a Writer's frames cut
// at every offset exactly as by a walk that stops at every byte; and the
// example alone is masked.
func TestTheWalkLosesNoMarkedShapeWhereverItSits(t *testing.T) {
	stopEverywhere := func(r *registry) *registry {
		for k := range r.starts3 {
			r.starts3[k] = ^uint64(0) // every triple may begin a word
			r.pairs3[k] = ^uint64(0)
		}
		for x := range r.offs {
			r.offs[x] = 1<<(maxOffset+2) - 1 // a word begun at every place a triple stands for
		}
		r.deep = [5]uint32{} // every state is deep enough: begins always holds
		return r
	}
	every := stopEverywhere(newRegistry(markedRules().ds))
	everyFrame := stopEverywhere(escAsSpace(newRegistry(markedRules().ds)))
	// The cuts run through every place of eight bytes a round; frames is
	// set where the text differs otherwise.
	places := []struct {
		name, before, after string
		frames              bool
	}{
		{"alone", "", "", true},
		{"start", "", "\r\nthe rest of the output\r\n", false},
		{"end", "some output before it\r\n", "", false},
		{"after one multibyte rune", "é ", " ñ", false},
		{"after two", "日本 ", " → done", false},
		{"after three", "ça→ ", " …", false},
		{"after four", "🔑 ", " ✓", false},
		{"touching multibyte", "→", "←", true},
		{"coloured", "\x1b[1;32m→ ", "\x1b[0m\r\n", true},
	}
	frames := func(r *registry, text string, cut int) string {
		var out sink
		w := NewWriter(new(Set), &out).MaskShapes(false)
		w.shapes.r = r
		w.Write([]byte(text[:cut]))
		w.Write([]byte(text[cut:]))
		w.Close()
		return out.String()
	}
	n := 0
	for _, d := range markedRules().ds {
		for _, ex := range d.Examples {
			if !slices.ContainsFunc(markedRules().find(ex), func(f Finding) bool { return f.Detector == d.Name }) {
				t.Errorf("rule %s finds nothing in its example %q", d.Name, ex)
			}
			for _, p := range places {
				n++
				text := p.before + ex + p.after
				name := fmt.Sprintf("%s/%s/%q", d.Name, p.name, ex)
				if got, want := markedRules().find(text), every.find(text); !slices.Equal(got, want) {
					t.Errorf("%s, an Event:\ngot  %v\nwant %v", name, got, want)
				}
				for cut := 0; p.frames && cut <= len(text); cut++ {
					if got, want := frames(markedFrameRules(), text, cut), frames(everyFrame, text, cut); got != want {
						t.Errorf("%s, frames cut at %d:\ngot  %q\nwant %q", name, cut, got, want)
						break
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no Marked rule has an example")
	}
}

// TestTheWalkStopsAtOrBeforeEveryNeededWord: registry.skip, from every
// place and with the text ending at every place near it, never passes a
// place where a needed word of any registry, a Writer's too, begins (in either case, or
// cut short by the text's end), over terminal text with the words at
// every alignment.
func TestTheWalkStopsAtOrBeforeEveryNeededWord(t *testing.T) {
	for _, r := range []*registry{markedRules(), allRules(), markedFrameRules()} {
		words := slices.Collect(maps.Keys(r.byWord))
		slices.Sort(words)
		term := string(benchText(1<<14, benchValues()))
		var b strings.Builder
		for k := range 1500 {
			a := k * 7919 % (len(term) - 16)
			b.WriteString(term[a : a+k%13])
			w := words[k*31%len(words)]
			switch k % 5 {
			case 0:
				w = strings.ToUpper(w)
			case 1:
				w = w[:len(w)-1]
			}
			b.WriteString(w)
		}
		text := b.String()
		lower := strings.ToLower(text)
		// first[i] is the first place from i on where a word begins.
		first := make([]int, len(text)+1)
		first[len(text)] = len(text)
		for i := len(text) - 1; i >= 0; i-- {
			first[i] = first[i+1]
			for _, w := range words {
				if strings.HasPrefix(lower[i:], w) {
					first[i] = i
					break
				}
			}
		}
		for i := range text {
			for _, end := range []int{len(text), i + 1, i + 2, i + 3, i + 5, i + 8, i + 11, i + 12} {
				if end > len(text) {
					continue
				}
				want := max(i, end-2) // near the end, at most where no triple fits
				if f := first[i]; f < end && f+2 < end {
					want = f
				}
				if got := r.skip(text[:end], i); got > want {
					t.Fatalf("skip(%q, %d) = %d, past a word at %d", text[i:end], i, got, want)
				}
			}
		}
	}
}

// TestTheWalkStopsAtOrBeforeEveryWordItPassesFrom: registry.skip, from
// every place of generated texts and terminal text, in every registry,
// returns a place at or before the first where a needed word begins
// whole, by the automaton: a word whose triple in pairs3 lies a round
// later than that of a word begun after it (CO_API_KEY's, API_KEY's) is
// not passed over, which the words laid among terminal text above did
// not meet.
func TestTheWalkStopsAtOrBeforeEveryWordItPassesFrom(t *testing.T) {
	texts := append(generatedTexts(12), string(benchText(16<<10, benchValues())))
	for name, r := range map[string]*registry{"all": allRules(), "marked": markedRules(), "frames": markedFrameRules()} {
		for _, text := range texts {
			next := len(text) // the first place from i on where a word begins
			for i := len(text) - 1; i >= 0; i-- {
				if wordBegins(r, text, i) {
					next = i
				}
				if k := r.skip(text, i); k > next {
					t.Fatalf("%s: skip(%d) = %d passes over a word at %d: %q", name, i, k, next, text[next:min(next+16, len(text))])
				}
			}
		}
	}
}

// wordBegins reports whether one of r's words begins at text[q], by its
// automaton from the root: each state as deep as the bytes read, to one
// where a word ends.
func wordBegins(r *registry, text string, q int) bool {
	m := r.m
	st := uint32(0)
	for k := q; k < len(text); k++ {
		t := m.dense[st+uint32(m.cls[text[k]])]
		st = t & idMask
		if d := int32(k - q + 1); t&specialFlag != 0 || m.dDepth[st/m.ncls] != d {
			return false
		} else if m.dOut[st/m.ncls] == d {
			return true
		}
	}
	return false
}
