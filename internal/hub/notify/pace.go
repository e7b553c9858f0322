package notify

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"kndl.dev/kndl/internal/store"
)

// A Session's Sandbox can end Turns as fast as it likes (a Stop hook or a
// transcript line it writes), so what one Session may queue is paced:
// perSession notifications in a paceWindow, each queued at once; the rest
// of the window's are held in memory and queued as one when the window
// ends (or the Session's next comes), the latest of them saying how many
// it stands for. What is held is lost with a Hub restart.
const (
	perSession = 3
	paceWindow = time.Minute
)

// pace is one Session's notifications in its window.
type pace struct {
	start  time.Time
	queued int
	held   map[string]int // by kind, past the pace
	heldN  int
	last   notice // the latest held, which the coalesced one carries
}

// notice is a notification before it is queued: its Session, kind and
// text, how many held ones it stands for besides itself, and the Members
// whose webhooks it goes to (nil: the Session's Creator).
type notice struct {
	s          store.Session
	kind, text string
	coalesced  int
	to         []string
	url        string // a Repo's notice links its page, not a Session's
}

// admit reports whether a notice of s may be queued now, and holds it if
// not; a window ended returns what it held, to queue first. Call with
// n.mu held.
func (n *Notifier) admit(now time.Time, x notice) (held *notice, ok bool) {
	p := n.paces[x.s.ID]
	if p == nil {
		p = &pace{start: now}
		n.paces[x.s.ID] = p
	}
	if now.Sub(p.start) >= paceWindow {
		held = p.restart(now)
	}
	if p.queued < perSession {
		p.queued++
		return held, true
	}
	if p.held == nil {
		p.held = map[string]int{}
	}
	p.held[x.kind]++
	p.heldN++
	p.last = x
	return held, false
}

// restart begins a new window at now and returns the notice that stands
// for what the old one held, nil for none; that notice counts in the new
// window.
func (p *pace) restart(now time.Time) *notice {
	var c *notice
	if p.heldN > 0 {
		c = &notice{s: p.last.s, kind: p.last.kind, coalesced: p.heldN - 1, text: p.last.text}
		if p.heldN > 1 {
			var kinds []string
			for k, v := range p.held {
				kinds = append(kinds, fmt.Sprintf("%d %s", v, k))
			}
			slices.Sort(kinds)
			c.text += fmt.Sprintf(" (This and %d more of this Session's notifications were held past its pace of %d a minute: %s.)",
				c.coalesced, perSession, strings.Join(kinds, ", "))
		}
	}
	*p = pace{start: now}
	if c != nil {
		p.queued = 1
	}
	return c
}

// ended returns the notices that stand for what each window ended by now
// held, starting those Sessions' windows again, and forgets the windows
// that ended holding nothing; with the earliest end of a window that holds
// something (false for none). Call with n.mu held.
func (n *Notifier) ended(now time.Time) (held []notice, next time.Time, ok bool) {
	for id, p := range n.paces {
		switch {
		case now.Sub(p.start) < paceWindow:
		case p.heldN == 0:
			delete(n.paces, id)
			continue
		default:
			held = append(held, *p.restart(now))
		}
		if end := p.start.Add(paceWindow); p.heldN > 0 && (!ok || end.Before(next)) {
			next, ok = end, true
		}
	}
	return held, next, ok
}
