package session

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// stream is the live stream of every Session's Events and changes, which
// every socket reads, and the one path by which Session text reaches the
// store. It holds its own state: the watchers and each Session's order.
type stream struct {
	events   *store.Sessions // where its Events are kept
	redactor Redactor
	effects  Effects
	log      *slog.Logger
	// heard moves an awake Session's run by the Events heard, and reports
	// whether they end its Turn by an interrupt, and whether what it is
	// doing changed (Owner.heard).
	heard func(id string, evs []protocol.Event) (ended, changed bool)

	mu   sync.Mutex
	subs map[string]map[chan Update]struct{} // by Session id, while watched
	// order is one per Session, held from taking Events' sequence numbers
	// to publishing them, so a watcher never sees a later one first.
	order map[string]seqLock
}

// seqLock is a lock held across a store write: a channel, not a
// sync.Mutex, because a goroutine waiting on a channel lets a
// testing/synctest bubble's clock move on. The store's write may wait out
// SQLite's busy handler on that clock; while another record waited on a
// sync.Mutex the bubble never went idle and the test hung until its
// timeout.
type seqLock chan struct{}

func (l seqLock) Lock()   { l <- struct{}{} }
func (l seqLock) Unlock() { <-l }

// streamBuffer bounds what waits for one slow watcher; past it the watcher
// is dropped (its channel closed) and resumes from the store by sequence
// number.
const streamBuffer = 256

// Subscribe returns a channel of a Session's live stream and a cancel
// func. Subscribe before reading the store, so nothing falls between.
func (o *stream) Subscribe(id string) (<-chan Update, func()) {
	ch := make(chan Update, streamBuffer)
	o.mu.Lock()
	if o.subs[id] == nil {
		o.subs[id] = map[chan Update]struct{}{}
	}
	o.subs[id][ch] = struct{}{}
	o.mu.Unlock()
	return ch, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if _, ok := o.subs[id][ch]; ok {
			delete(o.subs[id], ch)
			close(ch)
			if len(o.subs[id]) == 0 {
				delete(o.subs, id)
			}
		}
	}
}

// publish sends updates to a Session's watchers; call with o.mu held.
func (o *stream) publish(id string, us ...Update) {
	for ch := range o.subs[id] {
		for _, u := range us {
			select {
			case ch <- u:
				continue
			default:
			}
			delete(o.subs[id], ch)
			close(ch)
			break
		}
	}
}

// Changed tells a Session's watchers that what they show of it changed
// outside the Owner: the branches it pushed, say.
func (o *stream) Changed(id string) { o.changed(id) }

// changed tells a Session's watchers that it or its queue changed.
func (o *stream) changed(id string) {
	o.mu.Lock()
	o.publish(id, Update{ID: id, Changed: true})
	o.publish(All, Update{ID: id, Changed: true})
	o.mu.Unlock()
}

// Record stores a Session's Events, redacted, and sends them to its
// watchers. It is the one path by which Session text reaches the store.
func (o *stream) Record(ctx context.Context, id string, evs ...protocol.Event) error {
	_, err := o.record(ctx, id, evs, evs)
	return err
}

// record is Record, and moves what an awake Session is doing by the Events
// heard (whichever path they came by: the transcript, or the mod's hooks
// through the Hub), of which evs are the ones stored: those that fit the
// Session's Event budget. It reports whether they end a Turn by an
// interrupt, which fires no hook.
func (o *stream) record(ctx context.Context, id string, evs, heard []protocol.Event) (ended bool, err error) {
	if err := o.redactor.RedactEvents(ctx, id, evs); err != nil {
		return false, err
	}
	rows := make([]store.Event, len(evs))
	for i, ev := range evs {
		if ev.At.IsZero() {
			ev.At = time.Now()
		}
		ev.Seq, ev.TurnUsage = 0, nil
		b, err := json.Marshal(ev)
		if err != nil {
			return false, err
		}
		// A reply's usage in the transcript is the Sandbox's to write: it
		// is kept with the Event and counted toward nothing (countSpent).
		rows[i] = store.Event{At: ev.At, Kind: ev.Kind, Data: b}
		if ev.Kind == protocol.EventTurnEnd && ev.Agent == "" {
			rows[i].SumTurn = func(sums []store.Usage) (json.RawMessage, error) {
				ev.TurnUsage = apiUsage(sums)
				return json.Marshal(ev)
			}
		}
	}
	// Numbered and published under one lock: two records at once (a
	// Runner's batch and a timer's note) would otherwise publish 11 before
	// 10, and a watcher, which skips what it has passed, would lose 10.
	order := o.orderLock(id)
	order.Lock()
	defer order.Unlock()
	if len(rows) > 0 {
		if rows, err = o.events.AppendEvents(ctx, id, rows); err != nil {
			return false, err
		}
	}
	us := make([]Update, len(rows))
	for i := range rows {
		us[i] = Update{ID: id, Event: &rows[i]}
	}
	ended, changed := o.heard(id, heard)
	o.mu.Lock()
	o.publish(id, us...)
	if changed {
		o.publish(id, Update{ID: id, Changed: true})
		o.publish(All, Update{ID: id, Changed: true})
	}
	o.mu.Unlock()
	if len(evs) > 0 {
		o.effects.Recorded(id, evs)
	}
	return ended, nil
}

// orderLock returns the lock that keeps one Session's Events in order.
func (o *stream) orderLock(id string) seqLock {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.order[id]
	if l == nil {
		l = make(seqLock, 1)
		o.order[id] = l
	}
	return l
}

// follow moves the run state by a Session's Events and reports whether
// they end its Turn by an interrupt, or end a Turn taken back; on its
// loop.
func (r *run) follow(evs []protocol.Event) (ended bool) {
	for _, ev := range evs {
		if a := r.agents[ev.Agent]; a != nil && a.parent == "" {
			a.parent = ev.Parent // a start that came without it
		}
		switch ev.Kind {
		case protocol.EventPrompt:
			if ev.Agent == "" && r.delivery.state == taken {
				r.delivery.to(written) // in the transcript: a wake resumes it
			}
		case protocol.EventSubagentStart:
			if r.agents == nil {
				r.agents = map[string]*subagent{}
			}
			r.agents[ev.Agent] = &subagent{parent: ev.Parent}
		case protocol.EventSubagentStop:
			if a := r.agents[ev.Agent]; a != nil {
				a.stopAsked = true
			}
		case protocol.EventSubagentEnd:
			delete(r.agents, ev.Agent)
		case protocol.EventQuestion:
			if r.to(asking, "Claude asks") {
				r.asked = ev.ToolID
			}
		case protocol.EventTurnStart, protocol.EventToolResult, protocol.EventAnswer:
			// A tool's result comes once the question it asked is
			// answered.
			if r.phase == asking && r.to(turn, "answered") {
				r.asked = ""
			}
		case protocol.EventTurnEnd:
			// An interrupt fires no hook: the transcript is how the
			// Hub learns the Turn ended; so it is for a Turn taken back
			// from a Runner, whose Stop hook may have been lost.
			if ev.Agent == "" && (ev.Reason == "interrupted" || r.resync) {
				r.resync = false
				ended = true
			}
		}
	}
	return ended
}

// note records what the Hub says about a Session, logging a failure: a
// note lost must not stop the change it tells of.
func (o *stream) note(ctx context.Context, id, kind, text string) {
	if err := o.Record(ctx, id, protocol.Event{Kind: kind, Text: text}); err != nil {
		o.log.Error("record a note", "session", id, "err", err)
	}
}

// apiUsage is the store's sums by model as Events carry them.
func apiUsage(sums []store.Usage) []protocol.Usage {
	var out []protocol.Usage
	for _, u := range sums {
		out = append(out, protocol.Usage{Model: u.Model, Tokens: claude.Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}})
	}
	return out
}
