package attempts

import (
	"errors"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
)

func TestAttemptsRankPassedFirstThenSmallerDiffThenLowerCost(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []Attempt
		want string
	}{
		{"a pass beats a smaller diff and a lower cost", []Attempt{{"a", false, 1, 0.1}, {"b", true, 500, 9}}, "b a"},
		{"then the smaller diff", []Attempt{{"a", true, 40, 0.1}, {"b", true, 12, 3}, {"c", false, 1, 0}}, "b a c"},
		{"then the lower cost", []Attempt{{"a", true, 12, 0.3}, {"b", true, 12, 0.2}}, "b a"},
		{"an unknown diff after every known", []Attempt{{"a", true, -1, 0}, {"b", true, 900, 5}}, "b a"},
		{"failed ones rank among themselves too", []Attempt{{"a", false, 30, 1}, {"b", false, 10, 2}, {"c", true, 50, 3}}, "c b a"},
		{"ties keep their places", []Attempt{{"a", false, 5, 1}, {"b", false, 5, 1}, {"c", false, 5, 1}}, "a b c"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			Rank(tt.in)
			var got []string
			for _, a := range tt.in {
				got = append(got, a.SessionID)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %v, want %s", got, tt.want)
			}
		})
	}
}

func TestASetOutsideTwoToEightIsRefusedNamingTheRange(t *testing.T) {
	for _, tt := range []struct {
		n  int
		ok bool
	}{{-1, false}, {0, false}, {1, false}, {2, true}, {8, true}, {9, false}} {
		err := CheckCount(tt.n)
		if tt.ok != (err == nil) || (err != nil && (!errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "2 to 8"))) {
			t.Errorf("CheckCount(%d) = %v, want ok=%v or invalid naming 2 to 8", tt.n, err, tt.ok)
		}
	}
}
