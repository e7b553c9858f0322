package session

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestASessionsStepsRunOneAtATimeInOrder: steps posted side by side for
// one Session never overlap, each poster's run in the order it posted
// them, and each do returns once its step ran; another Session's steps
// run beside them.
func TestASessionsStepsRunOneAtATimeInOrder(t *testing.T) {
	s := steps{waiting: map[string][]func(){}}
	const posters, each = 8, 200
	var in [2]atomic.Int32
	var overlaps atomic.Int32
	last := make([][2]int, posters)
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			for i := range each {
				session := p % 2
				ran := false
				s.do([]string{"a", "b"}[session], func() {
					if in[session].Add(1) != 1 {
						overlaps.Add(1)
					}
					if i != 0 && last[p][1] != i-1 {
						t.Errorf("poster %d: step %d ran after step %d, want %d", p, i, last[p][1], i-1)
					}
					last[p][1] = i
					ran = true
					runtime.Gosched() // room for another to start, were it let
					in[session].Add(-1)
				})
				if !ran {
					t.Errorf("poster %d: do returned before step %d ran", p, i)
				}
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d steps of one Session ran while another did, want none", n)
	}
	if len(s.waiting) != 0 {
		t.Errorf("steps left waiting: %v, want none", len(s.waiting))
	}
}
