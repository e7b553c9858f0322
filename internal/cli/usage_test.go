package cli

import (
	"testing"

	"kndl.dev/kndl/internal/api"
)

// TestKndlUsageDrawsADayALineScaledToTheMost: kndl usage's bars are the
// Usage page's chart in text: a day a line, the most spent the longest.
func TestKndlUsageDrawsADayALineScaledToTheMost(t *testing.T) {
	tests := []struct {
		name string
		days []api.DayCost
		want string
	}{
		{"none spent", []api.DayCost{{Day: "2026-12-04"}, {Day: "2026-12-05"}}, "2026-12-04      $0.00  \n2026-12-05      $0.00  \n"},
		{"scaled", []api.DayCost{{Day: "2026-12-04", EstimatedUSD: 1}, {Day: "2026-12-05", EstimatedUSD: 4}},
			"2026-12-04      $1.00  ##########\n2026-12-05      $4.00  ########################################\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dayBars(tt.days); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
