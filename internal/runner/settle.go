package runner

import (
	"context"
	"sync"
)

// A Runner's hello lists the Sessions it runs; the Hub's welcome says which
// it takes back, and the Runner stops the others (resume). The Hub may wake
// one of those others in between: RunnerBack wakes the Sessions it holds
// asleep on the Runner at once, on a goroutine of its own, and its
// session.start can reach the Runner before the welcome is read (the
// Session still runs here: refused as running) or while the stop runs (the
// stop takes down the Sandbox the start boots). Such a Session is asleep at
// the Hub while it runs here after the Hub slept it with the Runner away,
// or a stop was lost with a connection. A start of a Session the hello
// listed waits until the welcome has settled it.

// settling holds the Sessions a hello listed until the welcome settles
// each: taken back, or stopped.
type settling struct {
	mu   sync.Mutex
	wait map[string]chan struct{}
}

// hold has the starts of ids wait until each is settled.
func (st *settling) hold(ids []string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.wait == nil {
		st.wait = map[string]chan struct{}{}
	}
	for _, id := range ids {
		if st.wait[id] == nil {
			st.wait[id] = make(chan struct{})
		}
	}
}

// settled lets the start of id go on.
func (st *settling) settled(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if ch := st.wait[id]; ch != nil {
		close(ch)
		delete(st.wait, id)
	}
}

// settledAll lets every start go on: the welcome is taken, or none came
// (the next hello lists them again).
func (st *settling) settledAll() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id, ch := range st.wait {
		close(ch)
		delete(st.wait, id)
	}
}

// await waits until id is settled, or ctx ends.
func (st *settling) await(ctx context.Context, id string) error {
	st.mu.Lock()
	ch := st.wait[id]
	st.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
