package session

import "sync"

// steps runs each Session's queue steps (a dispatch, an acknowledgement,
// a Turn's end) one at a time, in the order they came, each whole: no
// dispatch, acknowledgement or end of a Turn of the Session starts while
// another runs, so none sees another's half-done state. The first caller
// to find none running runs them, its own and any posted meanwhile, on
// its goroutine; the others wait for theirs. A step never posts another
// (it calls the inner form: dispatchNow, ackNow) and never waits on a
// Session's lock, which a move holds across a Runner's answer.
type steps struct {
	mu sync.Mutex
	// waiting are the steps posted and not yet run, by Session id; a
	// Session has a key while a caller runs its steps.
	waiting map[string][]func()
}

// do runs f as the Session's next step and returns once it ran.
func (s *steps) do(id string, f func()) {
	done := make(chan struct{})
	step := func() {
		defer close(done)
		f()
	}
	s.mu.Lock()
	q, running := s.waiting[id]
	s.waiting[id] = append(q, step)
	s.mu.Unlock()
	if running {
		<-done
		return
	}
	for {
		s.mu.Lock()
		q := s.waiting[id]
		if len(q) == 0 {
			delete(s.waiting, id)
			s.mu.Unlock()
			return
		}
		next := q[0]
		s.waiting[id] = q[1:]
		s.mu.Unlock()
		next()
	}
}
