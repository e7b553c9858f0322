package redact

import (
	"fmt"
	"slices"
	"testing"
)

// TestTheWalkLosesNoMarkedShapeWhereverItSits: the walk that passes over
// text where no needed word can begin (registry.skip, four bytes a round)
// loses nothing. Each Marked rule's example, at the start of the text, at
// its end, after multibyte UTF-8 of each length mod 4 and beside colour
// codes, is found in an Event (ScrubMarked) and in a Writer's frames cut
// at every offset exactly as by a walk that stops at every byte; and the
// example alone is masked.
func TestTheWalkLosesNoMarkedShapeWhereverItSits(t *testing.T) {
	every := newRegistry(markedRules().ds)
	for k := range every.starts3 {
		every.starts3[k] = ^uint64(0) // every triple may begin a word
	}
	// The cuts run through every place of four bytes a round; frames is
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
					if got, want := frames(markedRules(), text, cut), frames(every, text, cut); got != want {
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
