package hub

import (
	"cmp"
	"context"
	"fmt"
	"net/http"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/pulls"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// runnersAPI serves the Runner endpoint and what a Runner may send about its
// Sessions and their tokens (runners.go, runner_sessions.go,
// sandboxtokens.go), and a person's Runner routes.
type runnersAPI struct {
	core
	runners  *runners.Conns
	sessions *session.Owner
	place    placer
	pulls    *pulls.Tracker
	masks    *masks.Sets
	tokens   *masks.Tokens
	// credentials is the Hub's sessionCredentials: a Session's setup
	// token and Variables, opened.
	credentials func(ctx context.Context, s store.Session) (protocol.SessionCredentials, error)
}

// runnerConnect is where a Runner connects (runners.Conns.Serve).
func (h runnersAPI) runnerConnect(w http.ResponseWriter, r *http.Request, p Principal) {
	h.runners.Serve(w, r, p.Runner)
}

// runnerStream is where a Runner dials a stream back
// (runners.Conns.ServeStream).
func (h runnersAPI) runnerStream(w http.ResponseWriter, r *http.Request, p Principal) {
	if err := h.runners.ServeStream(w, r, p.Runner.ID); err != nil {
		h.writeError(w, r, err)
	}
}

// handleRunner registers what a Runner may send on a new connection.
func (h *Hub) handleRunner(rc *runners.Conn, welcomed <-chan struct{}) {
	newRunnersAPI(h).handleSessions(rc, welcomed)
	newViewAPI(h).handleLive(rc, welcomed)
	h.handleAttachments(rc, welcomed)
	h.handleEnvironments(rc, welcomed)
	handlePool(rc, welcomed)
}

// runnerLeft drops what the Hub held for a Runner's connection once it
// ended, and, if it was the Runner's current one, tells the Owner.
func (h *Hub) runnerLeft(rc *runners.Conn, current bool) {
	newViewAPI(h).runnerGone(rc)
	if current {
		h.sessions.RunnerGone(h.life.Context(), rc.Runner.ID)
	}
}

func (h runnersAPI) listRunners(w http.ResponseWriter, r *http.Request, p Principal) {
	out, err := h.place.runnerStatuses(r.Context(), p)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// runnerStatuses lists the live Runners as p sees them: whose each is,
// whether p may use it, and a connected one's backend, load and capacity.
func (h placer) runnerStatuses(ctx context.Context, p Principal) ([]api.RunnerStatus, error) {
	rs, err := h.store.Runners.List(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := h.store.Members.List(ctx)
	if err != nil {
		return nil, err
	}
	logins := map[string]string{}
	for _, m := range ms {
		logins[m.ID] = cmp.Or(m.GitHubLogin, m.Name)
	}
	loads, err := h.loads(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.RunnerStatus, len(rs))
	conns := h.runners.All()
	for i, rn := range rs {
		out[i] = api.RunnerStatus{Runner: apiRunner(rn), Owner: logins[rn.CreatedBy], Usable: rn.UsableBy(p.User.ID)}
		if rc := conns[rn.ID]; rc != nil {
			out[i].Connected = true
			host := rc.Hello.Host
			out[i].Host = &host
			l := loads.of(rc).Load
			out[i].Load = &l
			b := rc.Hello.Build
			out[i].Build, out[i].Protocol, out[i].Warning = &b, rc.Version, rc.Warning
		} else if no, ok := h.runners.Refused(rn.ID); ok {
			out[i].Build, out[i].Warning = &no.Build, "Its last hello, at "+when(no.At)+", was refused: "+no.Why
		}
	}
	return out, nil
}

func (h runnersAPI) createRunner(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.RunnerRequest
	if err := readJSON(r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	rn, token, err := h.store.Runners.CreateRunner(r.Context(), req.Name, p.User.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.log.Info("runner paired", "runner", rn.Name, "by", p.User.Name)
	h.audit(r, p, auditRunnerPaired, rn.Name, "Runner "+rn.ID)
	writeJSON(w, http.StatusCreated, api.CreatedRunner{Runner: apiRunner(rn), Token: token})
}

// mayRemoveRunner reports whether p may remove a Runner paired by
// createdBy: their own, or any for the Owner. A Runner paired on the Hub's
// machine is no Member's, so only the Owner removes it.
func mayRemoveRunner(p Principal, createdBy string) bool {
	return isOwner(p) || (createdBy != "" && createdBy == p.User.ID)
}

// runnerToRemove returns the live Runner with that id if p may remove it
// (mayRemoveRunner).
func (h runnersAPI) runnerToRemove(ctx context.Context, p Principal, id string) (store.Runner, error) {
	rn, err := h.store.Runners.RunnerByID(ctx, id)
	if err == nil && !rn.RevokedAt.IsZero() {
		err = fmt.Errorf("runner %s: %w", id, errdefs.ErrNotFound)
	}
	if err == nil && !mayRemoveRunner(p, rn.CreatedBy) {
		err = fmt.Errorf("the Runner %s is not yours: only the Member who paired it, or the Hub's Owner, removes it: %w", rn.Name, errdefs.ErrForbidden)
	}
	return rn, err
}

func (h runnersAPI) revokeRunner(w http.ResponseWriter, r *http.Request, p Principal) {
	rn, err := h.runnerToRemove(r.Context(), p, r.PathValue("id"))
	if err == nil {
		err = h.store.Runners.RevokeRunner(r.Context(), rn.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.runners.Disconnect(rn.ID, "runner token revoked")
	h.sessions.RunnerRemoved(r.Context(), rn.ID, session.RunnerRevoked)
	h.log.Info("runner revoked", "runner", rn.Name, "by", p.User.Name)
	h.audit(r, p, auditRunnerRevoked, rn.Name, "Runner "+rn.ID)
	w.WriteHeader(http.StatusNoContent)
}

// shareRunner shares a Runner with every Member, or takes it back to the
// Member who paired it: the Owner's alone. Taken back, the awake Sessions
// there of anyone else go to sleep, and can't wake there while it stays
// so (session.Owner.RunnerNarrowed).
func (h runnersAPI) shareRunner(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.RunnerShare
	err := ownerOnly(p, "shares Runners")
	if err == nil {
		err = readJSON(r, &req)
	}
	if err == nil && req.Shared == nil {
		err = fmt.Errorf(`say {"shared": true} or {"shared": false}: %w`, errdefs.ErrInvalid)
	}
	var rn store.Runner
	if err == nil {
		rn, err = h.store.Runners.RunnerByID(r.Context(), r.PathValue("id"))
	}
	if err == nil {
		err = h.store.Runners.SetRunnerShared(r.Context(), rn.ID, *req.Shared)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !*req.Shared {
		h.sessions.RunnerNarrowed(r.Context(), rn.ID, fmt.Sprintf("the Owner unshared its Runner %s, which is not its Creator's: it can wake there once the Runner is shared again", rn.Name))
	}
	h.log.Info("runner shared", "runner", rn.Name, "shared", *req.Shared, "by", p.User.Name)
	h.audit(r, p, map[bool]string{true: auditRunnerShared, false: auditRunnerUnshared}[*req.Shared], rn.Name, "Runner "+rn.ID)
	w.WriteHeader(http.StatusNoContent)
}
