package testenv

import (
	"sync"
	"time"
)

// Clock is a clock a test turns: code that takes a func() time.Time (or
// an interface with Now) reads it, and Advance moves it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a Clock at now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
