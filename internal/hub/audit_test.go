package hub

import (
	"testing"
	"time"
)

// TestSignInRefusalsAreAuditedAtMost30AMinute: refused sign-ins cost the
// refused nothing, so the audit log records at most 30 a minute, and the
// first one recorded after says how many were not.
func TestSignInRefusalsAreAuditedAtMost30AMinute(t *testing.T) {
	var rf refusals
	minute := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	recorded := 0
	for i := range 100 {
		if ok, skipped := rf.take(minute.Add(time.Duration(i) * 500 * time.Millisecond)); ok {
			recorded++
			if skipped != 0 {
				t.Fatalf("refusal %d: %d skipped within the first minute", i, skipped)
			}
		}
	}
	if recorded != refusalsPerMinute {
		t.Fatalf("recorded %d refusals in a minute, want %d", recorded, refusalsPerMinute)
	}
	ok, skipped := rf.take(minute.Add(time.Minute))
	if !ok || skipped != 100-refusalsPerMinute {
		t.Fatalf("the next minute's first refusal: recorded %v, saying %d skipped; want recorded, saying %d", ok, skipped, 100-refusalsPerMinute)
	}
	if ok, skipped := rf.take(minute.Add(time.Minute + time.Second)); !ok || skipped != 0 {
		t.Fatalf("the one after: recorded %v, saying %d skipped; want recorded, none", ok, skipped)
	}
}
