package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// runnerConn is a connected Runner.
type runnerConn struct {
	conn    *protocol.Conn
	runner  store.Runner
	hello   protocol.Hello
	version int
	since   time.Time
}

// helloTimeout bounds how long a Runner may take to say hello.
const helloTimeout = 10 * time.Second

func (h *Hub) runnerConnect(w http.ResponseWriter, r *http.Request, p Principal) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered
	}
	log := h.log.With("runner", p.Runner.Name)
	conn := protocol.NewConn(ws, log)
	conn.Remember(h.takenBy(p.Runner.ID))
	rc := &runnerConn{conn: conn, runner: p.Runner, since: time.Now()}
	hello := make(chan struct{})
	conn.Handle(protocol.TypeHello, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		select {
		case <-hello:
			return nil, fmt.Errorf("hello sent twice: %w", errdefs.ErrInvalid)
		default:
		}
		var hm protocol.Hello
		if err := json.Unmarshal(body, &hm); err != nil {
			return nil, fmt.Errorf("hello: %v: %w", err, errdefs.ErrInvalid)
		}
		v, err := protocol.Negotiate(hm)
		if err != nil {
			return nil, err
		}
		if note := clockNote(hm.Clock, time.Now()); note != "" {
			log.Warn(note)
			hm.Host.Notes = append(hm.Host.Notes, note)
		}
		rc.hello, rc.version = hm, v
		close(hello)
		h.attach(rc)
		return protocol.Welcome{Version: v, RunnerID: p.Runner.ID, Sessions: h.sessions.RunnerBack(ctx, rc.runner.ID, hm.Sessions)}, nil
	})

	h.handleSessions(rc, hello)
	h.handleLive(rc, hello)
	h.handleAttachments(rc, hello)
	h.handleEnvironments(rc, hello)

	ctx := r.Context()
	go func() {
		select {
		case <-hello:
		case <-conn.Done():
		case <-time.After(helloTimeout):
			conn.Close(websocket.StatusPolicyViolation, "no hello within 10s")
		}
	}()
	err = conn.Serve(ctx)
	h.detach(rc)
	log.Info("runner disconnected", "err", err)
}

// maxClockSkew is how far apart a Runner's clock and the Hub's may be
// before the Hub says so. Nothing kndl does breaks further off: each side
// reads times on its own clock (a GitHub token's life comes as seconds
// left, protocol.GitHubToken.Expiry; an Event's time and a Session's
// order come from the Runner's and the Hub's own). But Event times from
// that Runner are off by as much.
const maxClockSkew = time.Minute

// clockNote says how far the Runner's clock at its hello is from the Hub's
// now, when it is further than maxClockSkew; "" otherwise, or when the
// Runner did not say.
func clockNote(runner, now time.Time) string {
	if runner.IsZero() {
		return ""
	}
	skew := runner.Sub(now)
	way := "ahead of"
	if skew < 0 {
		skew, way = -skew, "behind"
	}
	if skew <= maxClockSkew {
		return ""
	}
	return fmt.Sprintf("Its clock is %s %s the Hub's: Sessions run, but the times of its Events are off by as much; set up time sync (NTP) on its machine.",
		skew.Round(time.Second), way)
}

// takenBy returns what the Runner's lanes took, kept across its
// connections.
func (h *Hub) takenBy(runnerID string) *protocol.Taken {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.taken[runnerID]
	if t == nil {
		t = &protocol.Taken{}
		h.taken[runnerID] = t
	}
	return t
}

// attach records a connected Runner, closing an older connection of the
// same Runner: the newest wins.
func (h *Hub) attach(rc *runnerConn) {
	h.mu.Lock()
	old := h.runners[rc.runner.ID]
	h.runners[rc.runner.ID] = rc
	h.mu.Unlock()
	if old != nil {
		old.conn.Close(websocket.StatusPolicyViolation, "replaced by a newer connection of this runner")
	}
	if err := h.store.TouchRunner(h.life.Context(), rc.runner.ID); err != nil {
		h.log.Error("record a runner seen", "runner", rc.runner.Name, "err", err)
	}
	h.log.Info("runner connected", "runner", rc.runner.Name, "version", rc.version,
		"backend", rc.hello.Host.Backend, "limits", rc.hello.Host.Limits)
}

func (h *Hub) detach(rc *runnerConn) {
	h.mu.Lock()
	gone := h.runners[rc.runner.ID] == rc
	if gone {
		delete(h.runners, rc.runner.ID)
	}
	h.mu.Unlock()
	h.runnerGone(rc)
	// Its request ended with its connection: what the Hub records of
	// it runs for the Hub's life.
	ctx := h.life.Context()
	if gone {
		h.sessions.RunnerGone(ctx, rc.runner.ID)
	}
	if err := h.store.TouchRunner(ctx, rc.runner.ID); err != nil {
		h.log.Error("record a runner seen", "runner", rc.runner.Name, "err", err)
	}
}

// disconnectRunner closes a Runner's connection, if it has one.
func (h *Hub) disconnectRunner(id, why string) {
	h.mu.Lock()
	rc := h.runners[id]
	h.mu.Unlock()
	if rc != nil {
		rc.conn.Close(websocket.StatusPolicyViolation, why)
	}
}

func (h *Hub) closeRunners(why string) {
	h.mu.Lock()
	all := make([]*runnerConn, 0, len(h.runners))
	for _, rc := range h.runners {
		all = append(all, rc)
	}
	h.mu.Unlock()
	for _, rc := range all {
		rc.conn.Close(websocket.StatusGoingAway, why)
	}
}

// Connected reports whether the Runner with that id is connected.
func (h *Hub) Connected(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runners[id] != nil
}

func (h *Hub) listRunners(w http.ResponseWriter, r *http.Request, p Principal) {
	out, err := h.runnerStatuses(r.Context(), p)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// runnerStatuses lists the live Runners as p sees them: whose each is,
// whether p may use it, and a connected one's backend, load and capacity.
func (h *Hub) runnerStatuses(ctx context.Context, p Principal) ([]api.RunnerStatus, error) {
	rs, err := h.store.Runners(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := h.store.Members(ctx)
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
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, rn := range rs {
		out[i] = api.RunnerStatus{Runner: apiRunner(rn), Owner: logins[rn.CreatedBy], Usable: rn.UsableBy(p.User.ID)}
		if rc := h.runners[rn.ID]; rc != nil {
			out[i].Connected = true
			host := rc.hello.Host
			out[i].Host = &host
			l := loads.of(rc).Load
			out[i].Load = &l
		}
	}
	return out, nil
}

func (h *Hub) createRunner(w http.ResponseWriter, r *http.Request, p Principal) {
	var req struct {
		Name string `json:"name"`
	}
	if err := readJSON(r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	rn, token, err := h.store.CreateRunner(r.Context(), req.Name, p.User.ID)
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
func (h *Hub) runnerToRemove(ctx context.Context, p Principal, id string) (store.Runner, error) {
	rn, err := h.store.RunnerByID(ctx, id)
	if err == nil && !rn.RevokedAt.IsZero() {
		err = fmt.Errorf("runner %s: %w", id, errdefs.ErrNotFound)
	}
	if err == nil && !mayRemoveRunner(p, rn.CreatedBy) {
		err = fmt.Errorf("the Runner %s is not yours: only the Member who paired it, or the Hub's Owner, removes it: %w", rn.Name, errdefs.ErrForbidden)
	}
	return rn, err
}

func (h *Hub) revokeRunner(w http.ResponseWriter, r *http.Request, p Principal) {
	rn, err := h.runnerToRemove(r.Context(), p, r.PathValue("id"))
	if err == nil {
		err = h.store.RevokeRunner(r.Context(), rn.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.disconnectRunner(rn.ID, "runner token revoked")
	h.sessions.RunnerRemoved(r.Context(), rn.ID, session.RunnerRevoked)
	h.log.Info("runner revoked", "runner", rn.Name, "by", p.User.Name)
	h.audit(r, p, auditRunnerRevoked, rn.Name, "Runner "+rn.ID)
	w.WriteHeader(http.StatusNoContent)
}

// shareRunner shares a Runner with every Member, or takes it back to the
// Member who paired it: the Owner's alone. Taken back, the awake Sessions
// there of anyone else go to sleep, and can't wake there while it stays
// so (session.Owner.RunnerNarrowed).
func (h *Hub) shareRunner(w http.ResponseWriter, r *http.Request, p Principal) {
	var req struct {
		Shared *bool `json:"shared"`
	}
	err := ownerOnly(p, "shares Runners")
	if err == nil {
		err = readJSON(r, &req)
	}
	if err == nil && req.Shared == nil {
		err = fmt.Errorf(`say {"shared": true} or {"shared": false}: %w`, errdefs.ErrInvalid)
	}
	var rn store.Runner
	if err == nil {
		rn, err = h.store.RunnerByID(r.Context(), r.PathValue("id"))
	}
	if err == nil {
		err = h.store.SetRunnerShared(r.Context(), rn.ID, *req.Shared)
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
