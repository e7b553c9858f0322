package redact

import "testing"

// TestAMarkedShapeSplitAcrossTwoFramesIsMaskedAsIfWhole: each Marked
// rule's example, cut into two frames at every offset, leaves a Writer
// masked as the example in one frame is: the end of the first frame that
// could be the part of a match before its needed word is held back too.
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
	for _, d := range markedRules().ds {
		for _, ex := range d.Examples {
			want := through(ex)
			for cut := 1; cut < len(ex); cut++ {
				if got := through(ex[:cut], ex[cut:]); got != want {
					t.Errorf("%s, %q cut at %d:\ngot  %q\nwant %q", d.Name, ex, cut, got, want)
				}
			}
		}
	}
}
