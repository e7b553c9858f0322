package idleheap

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// TestTrimReturnsTheFreeHeapAndKeepsGOGCLow checks Trim's two promises: the
// free heap is not left resident (init's garbage goes back to the
// system), and the heap's goal from then on is a quarter over what is live.
func TestTrimReturnsTheFreeHeapAndKeepsGOGCLow(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	garbage := make([][]byte, 0, 1024)
	for range 1024 {
		garbage = append(garbage, make([]byte, 8<<10))
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	runtime.GC() // the garbage is free heap now, still resident

	Trim()

	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	// Not 0: the test's own goroutines free a span or two meanwhile.
	if free := s[0].Value.Uint64(); free > 256<<10 {
		t.Errorf("after Trim %d bytes of the 8 MiB of garbage stay resident as free heap, want at most 256 KiB", free)
	}
	if got := s[1].Value.Uint64(); got != gcPercent {
		t.Errorf("GOGC is %d after Trim, want %d", got, gcPercent)
	}
}
