package hub

import (
	"context"
	"sync"
	"time"
)

// catchUps bounds the watchers reading a Session's history at once (the
// Session view's /live, kndl watch's /watch), from the Session to the last
// stored Event. A standby taking over a load is dialled by every watcher
// at once (5,000 at 1,000 Sessions), each seven store reads (its token,
// the Session, its queue, branches, spend, lineage, Events): unbounded,
// they filled the store's connections (64 on PostgreSQL) and their
// waiting line, from which database/sql hands a freed connection to a
// waiter at random, and /health and the Runners' hellos waited there for
// seconds (the standby served 7.7 s after it listened). Past the bound a
// watcher waits its turn here, and the store's other callers keep the rest
// of its connections.
type catchUps chan struct{}

// maxCatchUps is the bound: a quarter of the PostgreSQL store's
// connections, and more than a 2-core machine's store runs at once.
const maxCatchUps = 16

func newCatchUps() catchUps { return make(catchUps, maxCatchUps) }

// catchUpTurn ends a turn by itself: /watch writes as it reads, so a
// watcher that stops reading would keep its turn, and with 16 of them
// every other watcher would wait for good. A catch-up takes milliseconds.
const catchUpTurn = 5 * time.Second

// enter waits for a turn, and returns what ends it (it may be called
// more than once; catchUpTurn ends it anyway); ok is false if ctx ended
// first.
func (c catchUps) enter(ctx context.Context) (leave func(), ok bool) {
	select {
	case c <- struct{}{}:
		end := sync.OnceFunc(func() { <-c })
		t := time.AfterFunc(catchUpTurn, end)
		return func() { t.Stop(); end() }, true
	case <-ctx.Done():
		return nil, false
	}
}

// turnKey is the context key of the turn authenticate took.
type turnKey struct{}

// withTurn is ctx carrying leave, the turn authenticate took.
func withTurn(ctx context.Context, leave func()) context.Context {
	return context.WithValue(ctx, turnKey{}, leave)
}

// turnOf returns the turn authenticate took for the request of ctx, or
// waits for one (enter).
func (c catchUps) turnOf(ctx context.Context) (leave func(), ok bool) {
	if leave, ok := ctx.Value(turnKey{}).(func()); ok {
		return leave, true
	}
	return c.enter(ctx)
}
