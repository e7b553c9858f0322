// Package placement is the one rule for which Runner a new Session runs
// on: the least loaded of those the Creator may use, within each Runner's
// reported capacity. A full Runner is skipped; when all are, the start is
// refused naming each and its load, rather than piling Sessions onto a
// host that cannot hold them.
package placement

import (
	"fmt"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// Amount is a count of Sessions with the CPUs and memory they reserve.
type Amount = protocol.Amount

// Runner is one Runner a Session may go to.
type Runner struct {
	Name string
	// Load is what its running Sessions ask.
	Load Amount
	// Capacity is what the Runner offers all its Sessions together; a zero
	// field is one the Runner did not report, and so no limit.
	Capacity Amount
	// Caps are the most the Runner gives one Sandbox; a zero field is none.
	Caps Ask
}

// Add counts a running Session asking a in the Runner's load.
func (r *Runner) Add(a Ask) {
	a = r.capped(a)
	r.Load.Sessions++
	r.Load.CPUs += a.CPUs
	r.Load.MemoryMiB += a.MemoryMiB
}

// capped is what a Session asking a gets here: no more than the caps.
func (r Runner) capped(a Ask) Ask {
	if r.Caps.CPUs > 0 && a.CPUs > r.Caps.CPUs {
		a.CPUs = r.Caps.CPUs
	}
	if r.Caps.MemoryMiB > 0 && a.MemoryMiB > r.Caps.MemoryMiB {
		a.MemoryMiB = r.Caps.MemoryMiB
	}
	return a
}

// Ask is what the new Session asks: the CPUs and memory its Environment
// reserves (zero: none, the Sandbox runs within the Runner's caps).
type Ask struct {
	CPUs      float64
	MemoryMiB int
}

// fits reports whether the Runner holds one more Session asking a.
func (r Runner) fits(a Ask) bool {
	a = r.capped(a)
	c, l := r.Capacity, r.Load
	return (c.Sessions == 0 || l.Sessions+1 <= c.Sessions) &&
		(c.CPUs == 0 || a.CPUs == 0 || l.CPUs+a.CPUs <= c.CPUs) &&
		(c.MemoryMiB == 0 || a.MemoryMiB == 0 || l.MemoryMiB+a.MemoryMiB <= c.MemoryMiB)
}

// share is how full the Runner would be with the new Session: the largest
// of its fractions of each capacity it reports.
func (r Runner) share(a Ask) float64 {
	a = r.capped(a)
	c, l := r.Capacity, r.Load
	f := 0.0
	if c.Sessions > 0 {
		f = max(f, float64(l.Sessions+1)/float64(c.Sessions))
	}
	if c.CPUs > 0 {
		f = max(f, (l.CPUs+a.CPUs)/c.CPUs)
	}
	if c.MemoryMiB > 0 {
		f = max(f, float64(l.MemoryMiB+a.MemoryMiB)/float64(c.MemoryMiB))
	}
	return f
}

// String is the Runner's load against its capacity, as a refusal shows it.
func (r Runner) String() string {
	return fmt.Sprintf("%s (%s)", r.Name, api.FormatLoad(r.Load, r.Capacity))
}

// Pick returns the index of the Runner a new Session asking a goes to:
// the one it leaves least full, ties to the first name. named says the
// Creator named the one Runner in rs. With none that fits, it fails with
// ErrUnavailable naming each Runner's load; rs must not be empty.
func Pick(rs []Runner, a Ask, named bool) (int, error) {
	best := -1
	for i, r := range rs {
		if !r.fits(a) {
			continue
		}
		if best < 0 || r.share(a) < rs[best].share(a) || (r.share(a) == rs[best].share(a) && r.Name < rs[best].Name) {
			best = i
		}
	}
	if best >= 0 {
		return best, nil
	}
	why := fmt.Sprintf("reserving %g CPUs and %d MiB", a.CPUs, a.MemoryMiB)
	if a.CPUs == 0 && a.MemoryMiB == 0 {
		why = "one more Session"
	}
	if named {
		return -1, fmt.Errorf("the Runner %s is full and cannot take %s: stop or archive a Session there, or leave out --runner to use another: %w", rs[0], why, errdefs.ErrUnavailable)
	}
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.String()
	}
	return -1, fmt.Errorf("every Runner you may use is full and none can take %s: %s; stop or archive a Session, or pair another Runner: %w", why, strings.Join(names, ", "), errdefs.ErrUnavailable)
}
