package testenv

import (
	"strings"
	"testing"
)

func TestDiffNamesWhereTwoTextsPart(t *testing.T) {
	long := strings.Repeat("0123456789\n", 100)
	tests := []struct{ name, got, want, says string }{
		{"same", long, long, ""},
		{"a byte inserted", long[:500] + "X" + long[500:], long,
			"got 1101 bytes, want 1100; they first differ at byte 500 (line 46), and agree again for the last 600 bytes of each"},
		{"doubled", long + long, long, "got 2200 bytes, want 1100; they first differ at byte 1100 (line 101), and agree again for the last 0 bytes"},
		{"cut at a character's start", strings.Repeat("ü", 40) + "ya", strings.Repeat("ü", 40) + "yb", "got  …\"" + strings.Repeat("ü", 30) + "ya\"…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Diff(tt.got, tt.want)
			if tt.says == "" && got != "" || !strings.Contains(got, tt.says) {
				t.Errorf("got %q, want it to say %q", got, tt.says)
			}
		})
	}
}
