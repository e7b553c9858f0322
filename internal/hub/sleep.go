package hub

import (
	"fmt"
	"net/http"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// The Creator's controls of a Session's life. Each checks who asks and
// hands the change to the Session's owner (internal/hub/session).

func (h *Hub) sleepHandler(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.drivableSession(r.Context(), p, r.PathValue("id"))
	if err == nil {
		err = h.sessions.Sleep(r.Context(), s.ID, "its Creator put it to sleep")
	}
	h.answerNoContent(w, r, err)
}

func (h *Hub) wakeHandler(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.drivableSession(r.Context(), p, r.PathValue("id"))
	if err == nil {
		err = h.sessions.Wake(r.Context(), s.ID, "its Creator woke it")
	}
	h.answerNoContent(w, r, err)
}

func (h *Hub) restartHandler(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.drivableSession(r.Context(), p, r.PathValue("id"))
	if err == nil {
		err = h.sessions.Restart(r.Context(), s.ID, "its Creator restarted it")
	}
	h.answerNoContent(w, r, err)
}

func (h *Hub) keepAwakeHandler(w http.ResponseWriter, r *http.Request, p Principal) {
	var req struct {
		On *bool `json:"on"`
	}
	err := readJSON(r, &req)
	if err == nil && req.On == nil {
		err = fmt.Errorf(`say {"on": true} or {"on": false}: %w`, errdefs.ErrInvalid)
	}
	if err == nil {
		var s store.Session
		if s, err = h.drivableSession(r.Context(), p, r.PathValue("id")); err == nil {
			err = h.sessions.SetKeepAwake(r.Context(), s.ID, *req.On)
		}
	}
	h.answerNoContent(w, r, err)
}
