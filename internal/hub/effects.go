package hub

import "kndl.dev/kndl/internal/hub/session"

// effects is what the Hub does when the Session Owner says what happened
// to a Session: each room ends its own part, here and nowhere else.
type effects struct{ h *Hub }

// Stopped: a Session no longer runs. Its redaction set goes, to be made
// afresh at its next start without the values replaced meanwhile, with the
// masks the store kept for it; its Sandbox token, of no more use, is
// revoked at GitHub.
func (e effects) Stopped(sessionID string) {
	h := e.h
	ctx := h.life.Context()
	if err := h.masks.Drop(ctx, sessionID); err != nil {
		h.log.Error("drop a session's kept masks", "session", sessionID, "err", err)
	}
	h.tokens.Stopped(ctx, sessionID)
}

// LeftActive: a Session left Active. What only an Active Session has goes:
// its open ports.
func (e effects) LeftActive(sessionID string) {
	h := e.h
	h.web.mu.Lock()
	delete(h.web.ports, sessionID)
	h.web.mu.Unlock()
	viewAPI{h}.portsChanged(sessionID)
}

var _ session.Effects = effects{}
