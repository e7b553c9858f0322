package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// updateSession renames a Session or changes its model and effort, which
// its Claude Code takes only on its command line: an awake Session
// restarts into the same conversation to take them.
func (h *Hub) updateSession(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	var req api.SessionUpdate
	err := readJSON(r, &req)
	var s store.Session
	if err == nil {
		s, err = h.drivableSession(ctx, p, r.PathValue("id"))
	}
	title, model, effort := s.Title, s.Model, s.Effort
	if req.Title != nil {
		title = strings.TrimSpace(*req.Title)
	}
	if req.Model != nil {
		model = *req.Model
	}
	if req.Effort != nil {
		effort = *req.Effort
	}
	switch {
	case err != nil:
	case title == "" || len(title) > 200 || strings.ContainsAny(title, "\r\n"):
		err = fmt.Errorf("a title is one line of 1 to 200 characters: %w", errdefs.ErrInvalid)
	default:
		err = checkModel(model, effort)
	}
	if err == nil {
		err = h.store.UpdateSession(ctx, s.ID, title, model, effort)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if (model != s.Model || effort != s.Effort) && (s.State == store.Active) {
		h.record(ctx, s.ID, protocol.Event{Kind: protocol.EventNote,
			Text: fmt.Sprintf("Model %s, effort %s: Claude Code restarts into the same conversation to take them.", or(model, "default"), or(effort, "default"))})
		go h.restartSession(s.ID)
	}
	s, err = h.store.SessionByID(ctx, s.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeSession(w, r, s, http.StatusOK)
}

// restartSession stops an awake Session's Claude Code and starts it again,
// with what the Session says now (its model, effort and a fresh mod).
func (h *Hub) restartSession(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	s, err := h.store.SessionByID(ctx, id)
	if err == nil {
		err = h.sleepSession(ctx, s, "it restarts to take a new model or effort")
	}
	if err == nil {
		s, err = h.store.SessionByID(ctx, id)
	}
	if err == nil {
		err = h.wakeSession(ctx, s)
	}
	if err != nil {
		h.log.Warn("session restart failed", "session", id, "err", err)
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
