package hub

import (
	"context"
	"encoding/json"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/redact"
	"kndl.dev/kndl/internal/store"
)

// live is what the Hub knows of a Session only while it runs: who watches
// it, and where Claude Code is in its Turns. It is never stored: after a Hub
// restart a Session's Runner reports it again.
type live struct {
	subs map[chan store.Event]struct{}
	// ready: Claude Code is up; busy: a Turn runs. A prompt is delivered
	// only when ready and not busy.
	ready, busy bool
	// delivering is the prompt typed but not yet confirmed by the mod's
	// UserPromptSubmit hook; tries counts deliveries of it.
	delivering string
	tries      int
	timer      *time.Timer
	// set is the Session's redaction set while it runs (redaction.go), for
	// the Session of repoID whose Creator is creatorID.
	set               *redact.Set
	repoID, creatorID string
	// held are hook Events waiting for the transcript's next Events.
	held     []protocol.Event
	holdTime *time.Timer
}

// holdMax bounds how long a hook's Events wait for the transcript's next
// Events (Claude Code wrote them within a few hundred ms of the hook,
// measured).
const holdMax = 1500 * time.Millisecond

// liveOf returns a Session's live state, making it; call with h.mu held.
func (h *Hub) liveOf(id string) *live {
	l := h.live[id]
	if l == nil {
		l = &live{subs: map[chan store.Event]struct{}{}}
		h.live[id] = l
	}
	return l
}

// subscribe returns a channel of a Session's new Events and a cancel func.
// A subscriber too slow to keep up is dropped (its channel closed), and
// resumes from the store by sequence number.
func (h *Hub) subscribe(id string) (<-chan store.Event, func()) {
	ch := make(chan store.Event, 256)
	h.mu.Lock()
	h.liveOf(id).subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		if l := h.live[id]; l != nil {
			if _, ok := l.subs[ch]; ok {
				delete(l.subs, ch)
				close(ch)
			}
		}
		h.mu.Unlock()
	}
}

// record stores a Session's Events and sends them to its watchers. It is the
// one path by which Session text reaches the store.
func (h *Hub) record(ctx context.Context, sessionID string, evs ...protocol.Event) error {
	if err := h.redactEvents(ctx, sessionID, evs); err != nil {
		return err
	}
	rows := make([]store.Event, len(evs))
	for i, ev := range evs {
		if ev.At.IsZero() {
			ev.At = time.Now()
		}
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		rows[i] = store.Event{At: ev.At, Kind: ev.Kind, Data: b}
	}
	rows, err := h.store.AppendEvents(ctx, sessionID, rows)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.live[sessionID]
	if l == nil {
		return nil
	}
	for ch := range l.subs {
		for _, r := range rows {
			select {
			case ch <- r:
				continue
			default:
			}
			delete(l.subs, ch)
			close(ch)
			break
		}
	}
	return nil
}

// recordAfterTranscript records a hook's Events after the transcript's next
// Events, or after holdMax if none come.
func (h *Hub) recordAfterTranscript(ctx context.Context, sessionID string, evs ...protocol.Event) {
	for i := range evs {
		if evs[i].At.IsZero() {
			evs[i].At = time.Now()
		}
	}
	h.mu.Lock()
	l := h.liveOf(sessionID)
	l.held = append(l.held, evs...)
	if l.holdTime == nil {
		l.holdTime = time.AfterFunc(holdMax, func() { h.releaseHeld(sessionID) })
	}
	h.mu.Unlock()
}

// releaseHeld records a Session's held hook Events.
func (h *Hub) releaseHeld(sessionID string) {
	h.mu.Lock()
	l := h.liveOf(sessionID)
	out := l.held
	l.held = nil
	if l.holdTime != nil {
		l.holdTime.Stop()
		l.holdTime = nil
	}
	h.mu.Unlock()
	if len(out) > 0 {
		h.record(context.Background(), sessionID, out...)
	}
}
