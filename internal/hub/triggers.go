package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// triggersAPI serves the GitHub App's webhook (internal/hub/triggers) and
// each Repo's trigger label.
type triggersAPI struct{ *Hub }

// webhook takes a delivery and answers at once: what it asks for is done
// after, under the Receiver's lifetime.
func (h triggersAPI) webhook(w http.ResponseWriter, r *http.Request, _ Principal) {
	if err := h.triggers.Take(r); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// setTriggerLabel sets the label that, added to one of the Repo's issues,
// starts a Session; "" turns it off. It takes push permission, as the
// Repo's other settings do.
func (h triggersAPI) setTriggerLabel(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.TriggerLabel
	err := readJSON(r, &req)
	if err == nil && (len(req.Label) > 50 || strings.TrimSpace(req.Label) != req.Label) {
		err = fmt.Errorf("the trigger label %q is not one GitHub takes: at most 50 characters, no spaces around it: %w", req.Label, errdefs.ErrInvalid)
	}
	var repo store.Repo
	if err == nil {
		repo, err = h.repoToChange(r.Context(), p, r.PathValue("repo"), "trigger label")
	}
	if err == nil {
		err = h.store.SetTriggerLabel(r.Context(), repo.ID, req.Label)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, req)
}

// triggerSessions is the Hub's Sessions as a GitHub trigger starts and
// prompts them: as their Creator would through the API.
type triggerSessions struct{ *Hub }

func (h triggerSessions) Start(ctx context.Context, creator store.User, repoURL, title, prompt string) (string, error) {
	s, err := sessionsAPI{h.Hub}.start(ctx, Principal{Kind: auth.Webhook, User: creator}, api.NewSession{Repo: repoURL, Prompt: prompt}, title)
	return s.ID, err
}

func (h triggerSessions) Prompt(ctx context.Context, creator store.User, id, text string) error {
	s, err := h.store.SessionByID(ctx, id)
	if err == nil {
		_, err = h.sessions.Prompt(ctx, s, store.Prompt{AuthorID: creator.ID, Text: text})
	}
	return err
}

func (h triggerSessions) HasClaudeToken(ctx context.Context, u store.User) bool {
	_, _, err := h.store.UserSecret(ctx, u.ID, claudeTokenSecret)
	return err == nil
}
