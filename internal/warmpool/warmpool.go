// Package warmpool is the bookkeeping of a Runner's warm pool: which ready
// Sandboxes it holds for which Environment version, which versions were
// used lately, how much memory the pool may take, and the rules by which
// one is handed to a Session: once, and only while what it was started with
// still holds. It runs nothing itself. Only internal/runner imports it.
package warmpool

import (
	"sync"
	"time"
)

// Key is an Environment version of a Repo, the unit the pool keeps
// Sandboxes for (Version 0: a Repo with no Environment yet).
type Key struct {
	Repo    string
	Version int
}

// Fit is what a pool Sandbox was started with that a Session taking it
// must share: a digest of the Variables it ran its Start script and Claude
// Code with, and of its Installations. A Session whose Fit differs can't be
// bound cleanly to it, and it is thrown away.
type Fit struct {
	Variables, Installations string
}

// Entry is one ready pool Sandbox.
type Entry struct {
	// ID names it (its Sandbox is the Runner's to name from it).
	ID  string
	Key Key
	Fit Fit
	// Effort is the --effort its Claude Code runs with, which only a
	// restart changes; Model its --model, which /model changes.
	Effort, Model string
	// MemoryMiB is what it counts against the pool's memory bound.
	MemoryMiB int
}

// Recent is how long an Environment version counts as used: the pool keeps
// Sandboxes only for those used within it.
const Recent = 24 * time.Hour

// Pool is the bookkeeping; its methods are safe to call at once.
type Pool struct {
	size      int
	memoryMiB int

	mu    sync.Mutex
	ready map[Key][]*Entry
	// filling counts fills under way, by Key, and their memory.
	filling    map[Key]int
	fillingMiB int
	used       map[Key]time.Time
	// handed holds every ID ever handed out or thrown away: none comes
	// back (Ready refuses it).
	handed map[string]bool
}

// New makes a Pool that keeps size Sandboxes per recently used Environment
// version, all of them within memoryMiB together (0: no bound).
func New(size, memoryMiB int) *Pool {
	return &Pool{size: size, memoryMiB: memoryMiB, ready: map[Key][]*Entry{}, filling: map[Key]int{},
		used: map[Key]time.Time{}, handed: map[string]bool{}}
}

// Used records a start of k at now.
func (p *Pool) Used(k Key, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used[k] = now
}

// Next returns an Environment version that lacks a ready Sandbox, used
// within Recent of now, and records a fill of memMiB for it begun; false
// when none lacks one or the memory bound leaves no room. The caller ends
// the fill with Ready or Failed.
func (p *Pool) Next(now time.Time, memMiB func(Key) int) (Key, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, at := range p.used {
		if now.Sub(at) > Recent {
			delete(p.used, k)
			continue
		}
		if len(p.ready[k])+p.filling[k] >= p.size {
			continue
		}
		m := memMiB(k)
		if p.memoryMiB > 0 && p.memoryLocked()+m > p.memoryMiB {
			continue
		}
		p.filling[k]++
		p.fillingMiB += m
		return k, true
	}
	return Key{}, false
}

// Ready adds a Sandbox a fill made, ending the fill Next began for its
// Key with memMiB. It reports false, adding nothing, for an ID handed out
// or thrown away before: that one is the caller's to remove.
func (p *Pool) Ready(e *Entry, memMiB int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endFillLocked(e.Key, memMiB)
	if p.handed[e.ID] {
		return false
	}
	p.ready[e.Key] = append(p.ready[e.Key], e)
	return true
}

// Failed ends a fill that made nothing.
func (p *Pool) Failed(k Key, memMiB int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endFillLocked(k, memMiB)
}

func (p *Pool) endFillLocked(k Key, memMiB int) {
	if p.filling[k]--; p.filling[k] <= 0 {
		delete(p.filling, k)
	}
	p.fillingMiB -= memMiB
}

// Take hands out a ready Sandbox of k started with fit and effort, taking
// it out of the pool for good. Those of k started with another Fit are
// thrown away, returned in stale for the caller to remove; one of another
// effort stays for a Session that asks for it. e is nil when none fits.
func (p *Pool) Take(k Key, fit Fit, effort string) (e *Entry, stale []*Entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keep []*Entry
	for _, x := range p.ready[k] {
		switch {
		case x.Fit != fit:
			stale = append(stale, x)
			p.handed[x.ID] = true
		case e == nil && x.Effort == effort:
			e = x
			p.handed[x.ID] = true
		default:
			keep = append(keep, x)
		}
	}
	if len(keep) == 0 {
		delete(p.ready, k)
	} else {
		p.ready[k] = keep
	}
	return e, stale
}

// Drain takes every ready Sandbox out of the pool, for the caller to
// remove: the Runner stops.
func (p *Pool) Drain() []*Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var all []*Entry
	for _, es := range p.ready {
		for _, e := range es {
			p.handed[e.ID] = true
			all = append(all, e)
		}
	}
	clear(p.ready)
	return all
}

// Stats are the pool's ready Sandboxes and the memory they and the fills
// under way count.
func (p *Pool) Stats() (ready, memoryMiB int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, es := range p.ready {
		ready += len(es)
	}
	return ready, p.memoryLocked()
}

func (p *Pool) memoryLocked() int {
	n := p.fillingMiB
	for _, es := range p.ready {
		for _, e := range es {
			n += e.MemoryMiB
		}
	}
	return n
}
