package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/notify"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// egressAskAPI serves the Session view's answers to a host its egress
// allowlist refused (a note with Event.Blocked): Allow, for a Member with
// push, adds the host to the Repo's Environment as kndl env edit --allow
// and kndl env apply do; Request, for a Creator without push, asks the
// Repo's Members with push through their notification webhooks. Either
// takes only a host refused in that Session.
type egressAskAPI struct {
	environmentsAPI
	notify *notify.Notifier
	// asks orders a Request's check and its note, so one host is asked
	// for once per Session.
	asks *sync.Mutex
}

// refusedHost reads the body's host, refusing one that is not one exact
// name or that the Session's Sandbox was not refused: the buttons open no
// host but those. The caller has checked who may ask.
func (h egressAskAPI) refusedHost(r *http.Request, s store.Session) (string, error) {
	var req api.EgressHost
	if err := readJSON(r, &req); err != nil {
		return "", err
	}
	if err := egress.CheckHost(req.Host); err != nil {
		return "", err
	}
	if _, err := h.store.Sessions.NoteWith(r.Context(), s.ID, "blocked", req.Host); errors.Is(err, errdefs.ErrNotFound) {
		return "", fmt.Errorf("this Session's Sandbox was not refused %s: the view allows only a host its history shows refused; add another with kndl env edit --allow: %w",
			req.Host, errdefs.ErrInvalid)
	} else if err != nil {
		return "", err
	}
	return req.Host, nil
}

// allowHost adds a refused host to the Repo's allowlist as a new version
// and takes it to the awake Sessions at once.
func (h egressAskAPI) allowHost(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	if err == nil && !h.guard.canPush(r.Context(), p.User, s.RepoURL) {
		err = fmt.Errorf("allowing a host changes the Environment of %s, which takes write (push) permission on it at GitHub: %w", s.RepoURL, errdefs.ErrForbidden)
	}
	var host string
	if err == nil {
		host, err = h.refusedHost(r, s)
	}
	var v environment.Version
	if err == nil {
		v, err = h.envs.Allow(r.Context(), s.RepoID, host, p.User.ID)
	}
	if err == nil {
		h.egressNow(r.Context(), v)
		h.audit(r, p, auditEnvironmentApply, s.RepoURL, fmt.Sprintf("version %d: egress allow %s, from session %s", v.Version, host, s.ID))
	}
	h.reply(w, r, http.StatusOK, apiEnvironmentVersion(v), err)
}

// requestHost has the Creator, who has no push, ask the Repo's Members
// with push to allow a refused host: once per host per Session, noted in
// its history.
func (h egressAskAPI) requestHost(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.drivableSession(r.Context(), p, r.PathValue("id"))
	if err == nil && h.guard.canPush(r.Context(), p.User, s.RepoURL) {
		err = fmt.Errorf("you have push on %s: allow the host yourself with Allow: %w", s.RepoURL, errdefs.ErrConflict)
	}
	var host string
	if err == nil {
		host, err = h.refusedHost(r, s)
	}
	var asked int
	if err == nil {
		asked, err = h.ask(r.Context(), s, p.User, host)
	}
	h.reply(w, r, http.StatusOK, api.EgressAsked{Asked: asked}, err)
}

// ask notes the Request in the Session's history and queues it for each
// Member with push on the Repo but the Creator; a host asked for before
// is refused.
func (h egressAskAPI) ask(ctx context.Context, s store.Session, by store.User, host string) (int, error) {
	// Who has push is asked of GitHub before the lock, which orders the
	// check and the note alone.
	ms, err := h.store.Members.List(ctx)
	if err != nil {
		return 0, err
	}
	var to []string
	for _, m := range ms {
		if m.ID != by.ID && h.guard.canPush(ctx, m, s.RepoURL) {
			to = append(to, m.ID)
		}
	}
	h.asks.Lock()
	defer h.asks.Unlock()
	if _, err := h.store.Sessions.NoteWith(ctx, s.ID, "requested", host); err == nil {
		return 0, fmt.Errorf("%s was asked for in this Session already: the Repo's Members with push were told: %w", host, errdefs.ErrConflict)
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return 0, err
	}
	name := h.names(ctx)[by.ID]
	text := fmt.Sprintf("%s asks to allow %s: the Session's egress allowlist refused it. Allow adds it for every Session of the Repo.", name, host)
	if err := h.notify.Members(ctx, s, to, notify.EgressRequested, text); err != nil {
		return 0, err
	}
	note := fmt.Sprintf("egress: %s asked the Repo's Members with push (%d) to allow %s", name, len(to), host)
	return len(to), h.sessions.Record(ctx, s.ID, protocol.Event{Kind: protocol.EventNote, Text: note, Requested: host})
}
