// Package attempts is best of N: an attempt set's size, the order its
// attempts rank in, and the Environment's check run in each attempt's
// Sandbox after its Turns (checks.go). Only internal/hub and
// internal/hub/triggers import it.
package attempts

import (
	"cmp"
	"fmt"
	"slices"

	"kndl.dev/kndl/internal/errdefs"
)

// Min and Max bound how many attempts a set has.
const (
	Min = 2
	Max = 8
)

// CheckCount refuses a set size out of Min..Max, saying the range.
func CheckCount(n int) error {
	if n < Min || n > Max {
		return fmt.Errorf("%d attempts: an attempt set has %d to %d (for one Session, leave --attempts out): %w", n, Min, Max, errdefs.ErrInvalid)
	}
	return nil
}

// Attempt is what ranks an attempt: whether its last check passed, the
// lines its Changes add and delete (negative when unknown, as when its
// Runner is away), and its estimated cost.
type Attempt struct {
	SessionID string
	Passed    bool
	DiffLines int
	CostUSD   float64
}

// Rank orders attempts best first: a passed check first, then the smaller
// diff (an unknown one after every known), then the lower cost; ties keep
// their places in the set.
func Rank(as []Attempt) {
	slices.SortStableFunc(as, func(a, b Attempt) int {
		if a.Passed != b.Passed {
			if a.Passed {
				return -1
			}
			return 1
		}
		if (a.DiffLines < 0) != (b.DiffLines < 0) {
			if a.DiffLines < 0 {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(a.DiffLines, b.DiffLines); c != 0 {
			return c
		}
		return cmp.Compare(a.CostUSD, b.CostUSD)
	})
}
