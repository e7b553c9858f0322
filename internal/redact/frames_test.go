package redact

import "testing"

// TestAMarkedShapeSplitAcrossTwoFramesIsMaskedAsIfWhole: each Marked
// rule's example, alone, between lines of other output, coloured and
// beside multibyte UTF-8, cut into two frames at every offset, leaves a
// Writer masked as the text in one frame is, the cut before the rule's
// needed word or after it: what a match may still go on from is held back.
func TestAMarkedShapeSplitAcrossTwoFramesIsMaskedAsIfWhole(t *testing.T) {
	through := func(frames ...string) string {
		var out sink
		w := NewWriter(new(Set), &out).MaskShapes(false)
		for _, f := range frames {
			w.Write([]byte(f))
		}
		w.Close()
		return out.String()
	}
	places := [][2]string{
		{"", ""},
		{"some output before it\r\n", "\r\nthe rest of the output\r\n"},
		{"\x1b[1;32m→ ", "\x1b[0m\r\n"},
		{"é ", " ñ"},
	}
	for _, d := range markedRules().ds {
		for _, ex := range d.Examples {
			for _, p := range places {
				text := p[0] + ex + p[1]
				want := through(text)
				for cut := 1; cut < len(text); cut++ {
					if got := through(text[:cut], text[cut:]); got != want {
						t.Errorf("%s, %q cut at %d:\ngot  %q\nwant %q", d.Name, text, cut, got, want)
					}
				}
			}
		}
	}
}
