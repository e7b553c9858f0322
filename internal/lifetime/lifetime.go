// Package lifetime is how a long-lived component (the Hub, its Environment
// service, its pull request tracker) owns its goroutines: a context its
// Close cancels, and the goroutines Close waits for. The component's root
// context is made here, once, so no other package needs
// context.Background (tests/style refuses it elsewhere).
package lifetime

import (
	"context"
	"sync"
)

// Group is one component's lifetime.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex // orders every Go's Add before Close's Wait
	wg     sync.WaitGroup
}

// New starts a lifetime; Close ends it.
func New() *Group {
	ctx, cancel := context.WithCancel(context.Background())
	return &Group{ctx: ctx, cancel: cancel}
}

// Context is done once Close is called: work of the component that must
// outlive a request, but not the component, runs under it.
func (g *Group) Context() context.Context { return g.ctx }

// Go runs f on a goroutine Close waits for, and reports whether it did:
// once Close was called it runs nothing.
func (g *Group) Go(f func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctx.Err() != nil {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f(g.ctx)
	}()
	return true
}

// Close cancels the context and waits for every goroutine Go started.
func (g *Group) Close() {
	g.mu.Lock()
	g.cancel()
	g.mu.Unlock()
	g.wg.Wait()
}
