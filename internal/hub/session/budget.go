package session

import (
	"context"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/protocol"
)

// Every Session has an Event budget, so that nothing a Sandbox prints can
// fill the Hub's disk: at most EventsMax bytes of Events in all, and a
// thirty-second of that in any minute. What comes past it is summarized
// ("n bytes of tool output dropped"), and the history says so once per
// overrun.

// budgetWindow is how long a rate budget lasts.
const budgetWindow = time.Minute

// budget is one Session's Event accounting, kept with its run.
type budget struct {
	loaded        bool
	total         int64 // bytes stored in all, read from the store once
	windowStart   time.Time
	inWindow      int64
	overTotal     bool // the history said the total is spent
	overWindowEnd time.Time
}

// eventBytes is what an Event costs: the text a Sandbox sent.
func eventBytes(ev protocol.Event) int64 {
	return int64(len(ev.Text) + len(ev.Input) + len(ev.Tool) + len(ev.ToolID) + len(ev.Agent) + len(ev.Parent) + len(ev.Reason))
}

// spend summarizes the Events a Runner sent that are past the Session's
// budget, and returns the notes the history gets for it.
func (o *Owner) spend(ctx context.Context, id string, evs []protocol.Event) ([]protocol.Event, error) {
	o.mu.Lock()
	r := o.runs[id]
	loaded := r != nil && r.budget.loaded
	o.mu.Unlock()
	var stored int64
	if !loaded {
		n, err := o.store.EventBytes(ctx, id)
		if err != nil {
			return nil, err
		}
		stored = n
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	b := &budget{}
	if r := o.runs[id]; r != nil { // a Session with no run keeps no rate: it holds no Claude Code
		b = &r.budget
	}
	if !b.loaded {
		b.loaded, b.total = true, stored
	}
	total, perWindow, now := o.opts.EventsMax, o.opts.EventsMax/32, time.Now()
	if now.Sub(b.windowStart) >= budgetWindow {
		b.windowStart, b.inWindow = now, 0
	}
	var notes []protocol.Event
	for i := range evs {
		n := eventBytes(evs[i])
		switch {
		case b.total+n > total:
			if !b.overTotal {
				b.overTotal = true
				notes = append(notes, protocol.Event{Kind: protocol.EventNote, Text: fmt.Sprintf(
					"This Session's Events reached their budget of %d MiB (HUB_SESSION_EVENTS_MAX): what comes now is summarized.", total>>20)})
			}
		case b.inWindow+n > perWindow:
			if now.After(b.overWindowEnd) {
				b.overWindowEnd = b.windowStart.Add(budgetWindow)
				notes = append(notes, protocol.Event{Kind: protocol.EventNote, Text: fmt.Sprintf(
					"This Session sent more than %d MiB of Events within a minute: the rest of the minute's is summarized.", perWindow>>20)})
			}
		default:
			b.total += n
			b.inWindow += n
			continue
		}
		evs[i] = summarized(evs[i], n)
		b.total += eventBytes(evs[i])
	}
	return notes, nil
}

// summarized is an Event past the budget: its kind, agent, tool call and
// the usage of the reply it came from kept (the tokens were spent all the
// same), its text and input dropped, saying how much.
func summarized(ev protocol.Event, n int64) protocol.Event {
	what := ev.Kind
	if ev.Kind == protocol.EventToolResult {
		what = "tool output"
	}
	return protocol.Event{At: ev.At, Kind: ev.Kind, ToolID: ev.ToolID, Agent: ev.Agent, Parent: ev.Parent, Reason: ev.Reason,
		Tool: ev.Tool, IsError: ev.IsError, Usage: ev.Usage, Text: fmt.Sprintf("[%d bytes of %s dropped: the Session is over its Event budget]", n, what)}
}
