package hub

import (
	"context"
	"time"

	"kndl.dev/kndl/internal/protocol"
)

// held are a Session's hook Events waiting for the transcript's next
// Events: hooks fire before Claude Code writes what led to them (measured
// on 2.1.328), so a hook's Events go after the transcript's next batch.
type held struct {
	evs   []protocol.Event
	timer *time.Timer
}

// holdMax bounds how long a hook's Events wait for the transcript's next
// Events (Claude Code wrote them within a few hundred ms of the hook,
// measured).
const holdMax = 1500 * time.Millisecond

// recordAfterTranscript records a hook's Events after the transcript's next
// Events, or after holdMax if none come.
func (h *Hub) recordAfterTranscript(ctx context.Context, sessionID string, evs ...protocol.Event) {
	for i := range evs {
		if evs[i].At.IsZero() {
			evs[i].At = time.Now()
		}
	}
	h.mu.Lock()
	hd := h.held[sessionID]
	if hd == nil {
		hd = &held{}
		h.held[sessionID] = hd
		hd.timer = time.AfterFunc(holdMax, func() { h.releaseHeld(sessionID) })
	}
	hd.evs = append(hd.evs, evs...)
	h.mu.Unlock()
}

// releaseHeld records a Session's held hook Events.
func (h *Hub) releaseHeld(sessionID string) {
	h.mu.Lock()
	hd := h.held[sessionID]
	delete(h.held, sessionID)
	h.mu.Unlock()
	if hd == nil {
		return
	}
	hd.timer.Stop()
	if err := h.sessions.Record(context.Background(), sessionID, hd.evs...); err != nil {
		h.log.Error("record hook events", "session", sessionID, "err", err)
	}
}
