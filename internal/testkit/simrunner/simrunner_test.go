package simrunner

import (
	"strings"
	"testing"
)

// TestAPromptIsCheckedWholeAndInItsTurn: the Runner takes the next prompt
// as it was made, and names what is wrong with any other.
func TestAPromptIsCheckedWholeAndInItsTurn(t *testing.T) {
	p2 := Prompt(2, 300)
	tests := []struct {
		name, text string
		taken      int
		want       string // in the error; "" for none
	}{
		{"the next one", p2, 2, ""},
		{"the first", Prompt(0, 10), 0, ""},
		{"again", p2, 3, "got prompt 2, want prompt 3"},
		{"skipped one", p2, 1, "got prompt 2, want prompt 1"},
		{"a byte changed", strings.Replace(p2, "simulated", "simulatex", 1), 2, "arrived changed"},
		{"cut short", p2[:len(p2)-1], 2, "arrived changed"},
		{"not the load test's", "hello", 0, "not one of the load test's"},
	}
	for _, tt := range tests {
		err := checkPrompt(tt.text, tt.taken)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
	if n := len(Prompt(1, 4000)); n < 4000 || n > 4100 {
		t.Errorf("Prompt(1, 4000) is %d bytes, want about 4000", n)
	}
}
