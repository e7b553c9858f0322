package session

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// Every Session has an Event budget, so that nothing a Sandbox sends can
// fill the Hub's disk: its Events may cost at most EventsMax in all, and a
// thirty-second of that in any minute. An Event costs its row
// (eventRowCost) plus its JSON as stored, so many small Events are bounded
// as one large one is. Past the budget, Events are counted and dropped:
// nothing of them is stored but one note per Session, whose count the Hub
// keeps up to date. A dropped Event still moves the Session's Turn state,
// and its Creator's notifications (rated per Session) still hear of it.

// budgetWindow is how long a rate budget lasts.
const budgetWindow = time.Minute

// eventRowCost is what an Event costs besides its JSON: the store's key
// (the Session's id and the sequence number), time, kind, row header and
// page space, with room for pages half full. SQLite packs a one-byte text
// Event's row in about 136 bytes, 65 of them its JSON;
// TestManySmallEventsStoreNoMoreThanTheBudget measures it.
const eventRowCost = 256

// budgets keeps each Session's Events to its budget.
type budgets struct{ deps }

// budget is one Session's Event accounting, kept with its run.
type budget struct {
	loaded      bool
	total       int64 // what the Session's stored Events cost, read from the store once
	windowStart time.Time
	inWindow    int64
	// dropped is how many Events the Session dropped in all; noteSeq is
	// the note that says so, 0 before it is stored; noting is set while
	// one record stores it.
	dropped int64
	noteSeq int64
	noting  bool
}

// drops is what spend dropped from one batch, for the note.
type drops struct {
	n, total int64 // in this batch, in all
	noteSeq  int64 // the note to bring up to date; 0 with first
	first    bool  // this batch stores the note
}

// eventCost is what an Event costs against the budget: its row and its
// JSON as the store keeps it.
func eventCost(ev protocol.Event) int64 {
	b, _ := json.Marshal(ev)
	return eventRowCost + int64(len(b))
}

// spend keeps the Events a Runner sent that fit the Session's budget, in
// order, and counts the rest dropped.
func (o *budgets) spend(ctx context.Context, id string, evs []protocol.Event) ([]protocol.Event, drops, error) {
	var loaded bool
	o.runs.on(id, func(r *run) { loaded = r.budget.loaded })
	var use store.EventUse
	if !loaded {
		var err error
		if use, err = o.store.Sessions.EventUse(ctx, id); err != nil {
			return nil, drops{}, err
		}
	}
	costs := make([]int64, len(evs))
	for i := range evs {
		costs[i] = eventCost(evs[i])
	}
	var kept []protocol.Event
	var d drops
	take := func(b *budget) { kept, d = o.fit(b, use, evs, costs) }
	if !o.runs.on(id, func(r *run) { take(&r.budget) }) {
		take(&budget{}) // a Session with no run keeps no rate: it holds no Claude Code
	}
	return kept, d, nil
}

// fit keeps what of evs, costing costs, fits b, loaded from use if it
// is not yet.
func (o *budgets) fit(b *budget, use store.EventUse, evs []protocol.Event, costs []int64) ([]protocol.Event, drops) {
	if !b.loaded {
		b.loaded, b.total = true, use.Rows*eventRowCost+use.Bytes
		b.dropped, b.noteSeq = use.Dropped, use.NoteSeq
	}
	total, perWindow, now := o.opts.EventsMax, o.opts.EventsMax/32, o.opts.Now()
	if now.Sub(b.windowStart) >= budgetWindow {
		b.windowStart, b.inWindow = now, 0
	}
	kept := make([]protocol.Event, 0, len(evs))
	var d drops
	for i, ev := range evs {
		if n := costs[i]; b.total+n <= total && b.inWindow+n <= perWindow {
			b.total += n
			b.inWindow += n
			kept = append(kept, ev)
			continue
		}
		d.n++
	}
	if d.n == 0 {
		return kept, d
	}
	b.dropped += d.n
	d.total, d.noteSeq = b.dropped, b.noteSeq
	if b.noteSeq == 0 && !b.noting {
		b.noting, d.first = true, true
	}
	return kept, d
}

// noteDropped stores the note of how many Events the Session dropped, or
// brings the one stored up to date: one note a Session, whatever the
// drops. A note another batch is storing meanwhile is brought up to date
// by that batch. The note is the Hub's own words and numbers, so its
// rewrite needs no masking; a watcher sees the count as of when the note
// first reached it, the history read again has it up to date.
func (o *budgets) noteDropped(ctx context.Context, id string, d drops) error {
	bringUp := func(seq, dropped int64) error {
		b, err := json.Marshal(droppedNote(dropped, o.opts.EventsMax))
		if err != nil {
			return err
		}
		return o.store.Sessions.SetEventData(ctx, id, seq, b)
	}
	if !d.first {
		if d.noteSeq == 0 {
			return nil
		}
		return bringUp(d.noteSeq, d.total)
	}
	// settle records the note's sequence number as stored (0: it was
	// not) and returns how many Events the Session has dropped by now.
	settle := func(seq int64) (dropped int64) {
		o.runs.on(id, func(r *run) {
			r.budget.noting, r.budget.noteSeq = false, seq
			dropped = r.budget.dropped
		})
		return dropped
	}
	err := o.Record(ctx, id, droppedNote(d.total, o.opts.EventsMax))
	var use store.EventUse
	if err == nil {
		use, err = o.store.Sessions.EventUse(ctx, id)
	}
	if err != nil {
		settle(0)
		return err
	}
	if now := settle(use.NoteSeq); now > d.total {
		return bringUp(use.NoteSeq, now)
	}
	return nil
}

// droppedNote is the note that a Session with a budget of eventsMax
// dropped n Events.
func droppedNote(n, eventsMax int64) protocol.Event {
	return protocol.Event{At: time.Now(), Kind: protocol.EventNote, Dropped: n, Text: fmt.Sprintf(
		"%d of this Session's Events were dropped, not stored: it went past its Event budget of %s in all and %s in any minute "+
			"(HUB_SESSION_EVENTS_MAX; an Event costs %d bytes besides its text).",
		n, size(eventsMax), size(eventsMax/32), eventRowCost)}
}

// size says n bytes in the largest binary unit that divides it.
func size(n int64) string {
	for _, u := range []struct {
		shift int
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
