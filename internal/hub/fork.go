package hub

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// forkAPI forks Sessions (kndl fork): a new Session of the same Repo,
// Creator, Runner, model, effort and Environment version, starting from a
// copy of its parent's Workspace, disks and conversation that the parent's
// Runner makes (session.fork). Its Events are its own, masked by the same
// Repo's and Creator's values as its parent's.
type forkAPI struct {
	core
	sessions *session.Owner
	runners  *runners.Conns
}

// forkTimeout bounds the Runner's copy: a reflink takes seconds, a plain
// copy of a large Workspace and dependency disk minutes.
const forkTimeout = 10 * time.Minute

// fork answers POST /api/sessions/{id}/fork: the Creator's alone, of a
// Session asleep (or failed) whose Runner is connected, at its last Turn.
// A refusal changes nothing; a prompt given is the fork's first Turn.
func (h forkAPI) fork(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	var req api.NewFork
	err := readJSON(r, &req)
	var parent store.Session
	if err == nil {
		parent, err = h.guard.drivableSession(ctx, p, r.PathValue("id"))
	}
	if err == nil && req.Prompt != "" {
		err = checkPrompt(req.Prompt)
	}
	if err == nil {
		err = forkable(parent, req.At)
	}
	var rc session.Requester
	if err == nil {
		if rc = h.runners.Runner(parent.RunnerID); rc == nil {
			err = fmt.Errorf("the Session's Runner is not connected, and its Workspace is on that machine: fork it once the Runner is back: %w", errdefs.ErrUnavailable)
		}
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	id := uuid.NewString()
	var out protocol.SessionForked
	cctx, cancel := context.WithTimeout(ctx, forkTimeout)
	err = rc.Request(cctx, protocol.TypeSessionFork, protocol.SessionFork{SessionID: id, From: parent.ID}, &out)
	cancel()
	if err != nil {
		h.writeError(w, r, fmt.Errorf("the Runner did not fork the Session: %w", err))
		return
	}
	fork, err := h.store.Sessions.CreateFork(ctx, parent, id, forkTitle(parent.Title), parent.Turns, out.Offsets)
	if err != nil {
		h.log.Error("record a fork the Runner copied; its copy stays on the Runner", "session", id, "from", parent.ID, "err", err)
		h.writeError(w, r, err)
		return
	}
	note := protocol.Event{At: time.Now(), Kind: protocol.EventNote,
		Text: fmt.Sprintf("Forked from Session %s (%s) at the end of Turn %d.", parent.ID, parent.Title, parent.Turns)}
	if err := h.sessions.Record(ctx, fork.ID, note); err != nil {
		h.log.Error("note a fork's parent", "session", fork.ID, "err", err)
	}
	h.sessions.Changed(fork.ID)
	h.sessions.Changed(parent.ID) // its view lists its forks
	if req.Prompt != "" {
		if _, err := h.sessions.Prompt(ctx, fork, store.Prompt{AuthorID: p.User.ID, Text: req.Prompt}); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	f := apiFork(store.Fork{SessionID: fork.ID, ParentID: parent.ID, Turn: parent.Turns, CreatedAt: fork.CreatedAt})
	f.How = out.How
	writeJSON(w, http.StatusCreated, f)
}

// forkable refuses a fork the Runner cannot make now: of a Session that
// is awake or archived, or at a Turn other than its last.
func forkable(s store.Session, at *int) error {
	switch {
	case at != nil && (*at < 1 || *at > s.Turns):
		return fmt.Errorf("the Session has no Turn %d: its Turns are 1 to %d: %w", *at, s.Turns, errdefs.ErrInvalid)
	case at != nil && *at != s.Turns:
		return fmt.Errorf("a fork starts from the end of the Session's last Turn (%d) for now; an earlier Turn is not kept to fork from: leave out --at: %w", s.Turns, errdefs.ErrInvalid)
	case s.State == store.Archived:
		return fmt.Errorf("the Session is archived: restore it (kndl restore), then fork it: %w", errdefs.ErrConflict)
	case s.State != store.Asleep && s.State != store.Failed:
		return fmt.Errorf("the Session is %s: a fork copies an asleep Session; put it to sleep (kndl sleep) once its Turn has ended, then fork it: %w", s.State, errdefs.ErrConflict)
	}
	return nil
}

// forkTitle names a fork after its parent.
func forkTitle(parent string) string {
	if parent == "" {
		return "Fork"
	}
	return "Fork of " + parent
}

// listForks answers GET /api/sessions/{id}/forks to whoever sees the
// Session: what it was forked from and its forks, which are of its Repo.
func (h forkAPI) listForks(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	s, err := h.guard.sessionFor(ctx, p, r.PathValue("id"))
	var out api.Forks
	if err == nil {
		var from store.Fork
		var ok bool
		if from, ok, err = h.store.Sessions.ForkOf(ctx, s.ID); ok {
			f := apiFork(from)
			out.From = &f
		}
	}
	var forks []store.Fork
	if err == nil {
		forks, err = h.store.Sessions.Forks(ctx, s.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out.Forks = []api.Fork{}
	for _, f := range forks {
		out.Forks = append(out.Forks, apiFork(f))
	}
	writeJSON(w, http.StatusOK, out)
}

// apiFork is a fork link's API shape.
func apiFork(f store.Fork) api.Fork {
	return api.Fork{SessionID: f.SessionID, ParentID: f.ParentID, Turn: f.Turn, CreatedAt: f.CreatedAt}
}
