package hub

import (
	"context"
	"fmt"
	"net/http"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/store"
)

// The Creator's controls of a Session's life. Each checks who asks and
// hands the change to the Session's owner (internal/hub/session).

// lifeHandler answers a change of a Session's life (sleep, wake, restart,
// archive, restore): only its Creator may ask, and the owner makes it,
// saying why.
func (h sessionsAPI) lifeHandler(change func(ctx context.Context, id, why string) error, why string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p Principal) {
		s, err := h.guard.drivableSession(r.Context(), p, r.PathValue("id"))
		if err == nil {
			err = change(r.Context(), s.ID, why)
		}
		h.answerNoContent(w, r, err)
	}
}

// switchHandler answers a change of one of the Creator's switches of a
// Session (api.Switch): only its Creator may set it, by set.
func (h sessionsAPI) switchHandler(set func(ctx context.Context, id string, on bool) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p Principal) {
		var req api.Switch
		err := readJSON(r, &req)
		if err == nil && req.On == nil {
			err = fmt.Errorf(`say {"on": true} or {"on": false}: %w`, errdefs.ErrInvalid)
		}
		if err == nil {
			var s store.Session
			if s, err = h.guard.drivableSession(r.Context(), p, r.PathValue("id")); err == nil {
				err = set(r.Context(), s.ID, *req.On)
			}
		}
		h.answerNoContent(w, r, err)
	}
}

func (h sessionsAPI) answerHandler(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.Answer
	err := readJSON(r, &req)
	var s store.Session
	if err == nil {
		s, err = h.guard.drivableSession(r.Context(), p, r.PathValue("id"))
	}
	if err == nil {
		choices := make([]session.Choice, len(req.Answers))
		for i, c := range req.Answers {
			choices[i] = session.Choice{Option: c.Option, Text: c.Text}
		}
		err = h.sessions.Answer(r.Context(), s.ID, req.QuestionID, choices)
	}
	h.answerNoContent(w, r, err)
}

// stopSubagent stops one subagent of the Session: its Creator alone.
func (h sessionsAPI) stopSubagent(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.drivableSession(r.Context(), p, r.PathValue("id"))
	if err == nil {
		err = h.sessions.StopSubagent(r.Context(), s.ID, r.PathValue("agent"))
	}
	h.answerNoContent(w, r, err)
}
