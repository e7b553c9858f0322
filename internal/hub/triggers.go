package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/hub/triggers"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// triggersAPI serves the GitHub App's webhook (internal/hub/triggers) and
// each Repo's trigger label.
type triggersAPI struct {
	core
	triggers *triggers.Receiver
	sessions *session.Owner
}

// webhook takes a delivery and answers at once: what it asks for is done
// after, under the Receiver's lifetime.
func (h triggersAPI) webhook(w http.ResponseWriter, r *http.Request, _ Principal) {
	if err := h.triggers.Take(r); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// showTriggerLabel answers a Repo's trigger label to anyone who may see
// it; "" is none.
func (h triggersAPI) showTriggerLabel(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoFor(r.Context(), p, r.PathValue("repo"))
	var req api.TriggerLabel
	if err == nil {
		req.Label, err = h.store.Repos.TriggerLabel(r.Context(), repo.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, req)
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
		repo, err = h.guard.repoToChange(r.Context(), p, r.PathValue("repo"), "trigger label")
	}
	if err == nil {
		err = h.store.Repos.SetTriggerLabel(r.Context(), repo.ID, req.Label)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, req)
}

// setThreadContext sets the Session's switch for others' comments on its
// issue or pull request as context in its history, and tells its
// watchers.
func (h triggersAPI) setThreadContext(ctx context.Context, id string, on bool) error {
	if err := h.store.Sessions.SetThreadContext(ctx, id, on); err != nil {
		return err
	}
	h.sessions.Changed(id)
	return nil
}

// showAutoFix answers a Repo's auto-fix settings to anyone who may see it.
func (h triggersAPI) showAutoFix(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoFor(r.Context(), p, r.PathValue("repo"))
	var a store.AutoFix
	if err == nil {
		a, err = h.store.Repos.RepoAutoFix(r.Context(), repo.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAutoFix(a))
}

// editAutoFix changes the settings said of a Repo's auto-fix. It takes
// push permission, as the Repo's other settings do.
func (h triggersAPI) editAutoFix(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.AutoFixChange
	err := readJSON(r, &req)
	if err == nil && req.Max != nil && (*req.Max < 1 || *req.Max > api.MaxAutoFixes) {
		err = fmt.Errorf("auto-fix's most per pull request is %d; it takes 1 to %d: %w", *req.Max, api.MaxAutoFixes, errdefs.ErrInvalid)
	}
	var repo store.Repo
	if err == nil {
		repo, err = h.guard.repoToChange(r.Context(), p, r.PathValue("repo"), "auto-fix")
	}
	var a store.AutoFix
	if err == nil {
		a, err = h.store.Repos.RepoAutoFix(r.Context(), repo.ID)
	}
	if err == nil {
		a = changeAutoFix(a, req)
		err = h.store.Repos.SetRepoAutoFix(r.Context(), repo.ID, a)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAutoFix(a))
}

// changeAutoFix is a with what req says.
func changeAutoFix(a store.AutoFix, req api.AutoFixChange) store.AutoFix {
	if req.CI != nil {
		a.CI = *req.CI
	}
	if req.Reviews != nil {
		a.Reviews = *req.Reviews
	}
	if req.Max != nil {
		a.Max = *req.Max
	}
	return a
}

// triggerSessions is the Hub's Sessions as a GitHub trigger starts and
// prompts them: as their Creator would through the API. It holds the Hub
// rather than embedding it, so it reaches only the triggers.Sessions it is.
type triggerSessions struct{ h *Hub }

func (t triggerSessions) Start(ctx context.Context, creator store.User, repoURL, title, prompt string) (string, error) {
	s, err := newSessionsAPI(t.h).start(ctx, Principal{Kind: auth.Webhook, User: creator}, api.NewSession{Repo: repoURL, Prompt: prompt}, title)
	return s.ID, err
}

// StartAttempts starts an attempt set as POST /api/attempts does, each
// attempt a Session started from GitHub, so held to the Repo's limits for
// those and counted in its Creator's awake Sessions.
func (t triggerSessions) StartAttempts(ctx context.Context, creator store.User, repoURL, title, prompt string, n int) ([]string, error) {
	a := attemptsAPI{core: t.h.core, sessions: newSessionsAPI(t.h), masks: t.h.masks}
	set, err := a.startSet(ctx, Principal{Kind: auth.Webhook, User: creator}, api.NewAttempts{NewSession: api.NewSession{Repo: repoURL, Prompt: prompt}, Attempts: n}, title)
	return set.Sessions, err
}

func (t triggerSessions) Prompt(ctx context.Context, creator store.User, id, text string, src store.PromptSource) error {
	s, err := t.h.store.Sessions.SessionByID(ctx, id)
	if err == nil {
		_, err = t.h.sessions.Prompt(ctx, s, store.Prompt{AuthorID: creator.ID, Text: text, Source: src})
	}
	return err
}

func (t triggerSessions) HasClaudeToken(ctx context.Context, u store.User) bool {
	_, _, err := t.h.store.Members.UserSecret(ctx, u.ID, claudeTokenSecret)
	return err == nil
}

// Note records a comment shown as context in the Session's history, by
// the one path Session text reaches the store (redacted).
func (t triggerSessions) Note(ctx context.Context, id, text string) error {
	return t.h.sessions.Record(ctx, id, protocol.Event{Kind: protocol.EventNote, Text: text})
}

// Progress is how the Session goes, for its reply in the thread: its state,
// what the Owner says it does, and its pull requests.
func (t triggerSessions) Progress(ctx context.Context, id string) (triggers.Progress, error) {
	s, err := t.h.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		return triggers.Progress{}, err
	}
	p := triggers.Progress{State: s.State, Activity: t.h.sessions.Activity(id)}
	if p.Set, err = t.h.store.Attempts.AttemptSetOf(ctx, id); errors.Is(err, errdefs.ErrNotFound) {
		err = nil
	}
	if err != nil {
		return p, err
	}
	bs, err := t.h.pulls.Branches(ctx, id)
	for _, b := range bs {
		for _, pull := range b.Pulls {
			p.Pulls = append(p.Pulls, pull.URL)
		}
	}
	return p, err
}

// followSessions tells the webhook's Receiver of every change the Session
// Owner publishes, so a Session's reply in its thread follows it; the
// Owner stays the one that moves it.
func (h *Hub) followSessions(ctx context.Context) {
	for ctx.Err() == nil {
		changes, cancel := h.sessions.Subscribe(session.All)
		h.relay(ctx, changes)
		cancel()
	}
}

// relay hands changes to the Receiver until ctx ends or the Owner drops
// the subscription as too slow (then the caller subscribes again).
func (h *Hub) relay(ctx context.Context, changes <-chan session.Update) {
	for {
		select {
		case u, ok := <-changes:
			if !ok {
				h.log.Warn("the Sessions' changes came faster than GitHub replies followed; following again")
				return
			}
			h.triggers.Changed(u.ID)
		case <-ctx.Done():
			return
		}
	}
}
