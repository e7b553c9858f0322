package api

import "testing"

// TestAPullRequestsLineSaysItsStateChecksAndReview: the line the CLI and
// the Sessions list's badge show, each part only when known.
func TestAPullRequestsLineSaysItsStateChecksAndReview(t *testing.T) {
	tests := []struct {
		p    Pull
		want string
	}{
		{Pull{State: "open"}, "open"},
		{Pull{State: "open", Draft: true, Checks: "pending"}, "draft · checks pending"},
		{Pull{State: "open", Checks: "failing", Review: "changes_requested"}, "open · checks failing · changes requested"},
		{Pull{State: "closed", Merged: true, Review: "approved"}, "merged · approved"},
	}
	for _, tt := range tests {
		if got := tt.p.Line(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.p, got, tt.want)
		}
	}
}
