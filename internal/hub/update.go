package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// maxTitle is the most bytes a Session's title may have.
const maxTitle = 200

// updateSession renames a Session or changes its model and effort, which
// its Claude Code takes only on its command line: an awake Session
// restarts into the same conversation to take them.
func (h sessionsAPI) updateSession(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	var req api.SessionUpdate
	err := readJSON(r, &req)
	var s store.Session
	if err == nil {
		s, err = h.guard.drivableSession(ctx, p, r.PathValue("id"))
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
	case title == "" || len(title) > maxTitle || strings.ContainsAny(title, "\r\n"):
		err = fmt.Errorf("a title is one line of 1 to %d characters: %w", maxTitle, errdefs.ErrInvalid)
	case model != s.Model || effort != s.Effort:
		err = h.checkModel(ctx, p.User, model, effort)
	}
	if err == nil && title != s.Title {
		title, err = h.masks.MaskTitle(ctx, s.RepoID, s.CreatorID, title)
	}
	if err == nil {
		err = h.sessions.Update(ctx, s.ID, title, model, effort)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if (model != s.Model || effort != s.Effort) && s.State == store.Active {
		why := fmt.Sprintf("it takes model %s and effort %s, which Claude Code reads only as it starts", or(model, "default"), or(effort, "default"))
		if err := h.sessions.Restart(ctx, s.ID, why); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	s, err = h.store.Sessions.SessionByID(ctx, s.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeSession(w, r, s, http.StatusOK)
}

// titleFromPull gives a Session its pull request's title, masked as its
// text is, on one line and cut to maxTitle bytes, unless a person named it.
func (h sessionsAPI) titleFromPull(ctx context.Context, sessionID, title string) {
	title = strings.Join(strings.Fields(h.masks.RedactText(ctx, sessionID, title)), " ")
	if len(title) > maxTitle {
		cut := maxTitle - len("…")
		for !utf8.RuneStart(title[cut]) {
			cut--
		}
		title = title[:cut] + "…"
	}
	if title == "" {
		return
	}
	changed, err := h.store.Sessions.TitleFromPull(ctx, sessionID, title)
	if err != nil {
		h.log.Error("title a session from its pull request", "session", sessionID, "err", err)
		return
	}
	if changed {
		h.sessions.Changed(sessionID)
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
