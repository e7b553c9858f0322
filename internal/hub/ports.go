package hub

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/forward"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// sessionPorts handles a Runner's list for one of its Sessions: kept in
// memory only, while the Session is Active and its Runner connected.
func (h viewAPI) sessionPorts(ctx context.Context, rc *runners.Conn, s store.Session, list []protocol.Port) {
	h.web.mu.Lock()
	if s.State == store.Active {
		h.web.ports[s.ID] = portsEntry{rc: rc, list: list}
	} else {
		delete(h.web.ports, s.ID)
	}
	h.web.mu.Unlock()
	h.portsChanged(s.ID)
}

// portsOf returns a Session's open ports, none for a Session, as s (read
// by the caller) has it, not Active (Asleep, Frozen, Archived) or whose
// Runner went away. It keeps the list: LeftActive and the Runner's leaving
// drop it, and s may be older than a list a Session woken since sent.
func (h viewAPI) portsOf(s store.Session) []protocol.Port {
	h.web.mu.Lock()
	defer h.web.mu.Unlock()
	e, ok := h.web.ports[s.ID]
	if !ok || s.State != store.Active || h.runners.Get(s.RunnerID) != e.rc {
		return nil
	}
	return e.list
}

// openPorts is portsOf the Session as read now; nothing is read for one
// without a list.
func (h viewAPI) openPorts(ctx context.Context, id string) []protocol.Port {
	h.web.mu.Lock()
	_, ok := h.web.ports[id]
	h.web.mu.Unlock()
	if !ok {
		return nil
	}
	s, err := h.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		return nil
	}
	return h.portsOf(s)
}

// sendPorts sends a view its Session's ports, s as the caller read it:
// those open, and those its Environment offers. Only an open one has a
// URL.
func (h viewAPI) sendPorts(ctx context.Context, v *view, s store.Session) {
	out := labelled(h.portsOf(s), h.offered(ctx, s))
	for i, p := range out {
		if p.Listening && h.cfg.ForwardURL != "" {
			out[i].URL = fmt.Sprintf("/sessions/%s/ports/%d", v.session, p.Port.Port)
		}
	}
	v.send(viewMsg{Type: "ports", Ports: &out})
}

// offered returns the ports the Environment version a Session last
// started on offers; none if it cannot be read, which the log says.
func (h viewAPI) offered(ctx context.Context, s store.Session) []protocol.OfferedPort {
	ps, err := h.envs.PortsOf(ctx, s.RepoID, s.EnvironmentVersion)
	if err != nil {
		h.log.Warn("read the ports a Session's Environment offers", "session", s.ID, "err", err)
	}
	return ps
}

// labelled is a view's list of ports, by number: the open ones, and the
// offered ones nothing listens on yet, each offered one with its label.
func labelled(open []protocol.Port, offered []protocol.OfferedPort) []api.Port {
	out := make([]api.Port, 0, len(open)+len(offered))
	for _, p := range open {
		out = append(out, api.Port{Port: p, Listening: true})
	}
	for _, o := range offered {
		i := slices.IndexFunc(out, func(p api.Port) bool { return p.Port.Port == o.Port })
		if i < 0 {
			out = append(out, api.Port{Port: protocol.Port{Port: o.Port, Addresses: []string{}}})
			i = len(out) - 1
		}
		out[i].Label = o.Label
	}
	slices.SortStableFunc(out, func(a, b api.Port) int { return cmp.Compare(a.Port.Port, b.Port.Port) })
	return out
}

// portsChanged sends every view of the Session its list again, the
// Session read once for them all.
func (h viewAPI) portsChanged(id string) {
	vs := h.viewsOf(id)
	if len(vs) == 0 {
		return
	}
	ctx := h.life.Context()
	s, err := h.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		// As a Session not Active: its open ports dropped, none shown.
		s = store.Session{ID: id}
	}
	for _, v := range vs {
		h.sendPorts(ctx, v, s)
	}
}

// openPort is GET /sessions/{id}/ports/{port} on the Hub's own origin: for
// someone with access to the Session, it hands out a code for the port's
// forward origin and sends the browser there.
func (h viewAPI) openPort(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	var port int
	if err == nil {
		port, err = strconv.Atoi(r.PathValue("port"))
		if err != nil || !slices.ContainsFunc(h.portsOf(s), func(x protocol.Port) bool { return x.Port == port }) {
			err = fmt.Errorf("nothing listens on port %s in the Session's Sandbox now: %w", r.PathValue("port"), errdefs.ErrNotFound)
		}
	}
	if err == nil && h.cfg.ForwardURL == "" {
		err = fmt.Errorf("this Hub forwards no ports: its operator sets HUB_FORWARD_URL to a wildcard address such as https://*.kndl-ports.example.com: %w", errdefs.ErrUnavailable)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, h.forward.Open(p.User, p.cred, s.ID, port, r.URL.Query().Get("next")), http.StatusSeeOther)
}

// newForward makes the port-forward proxy: a grant holds while its
// person's sign-in does and they keep access to the Session's Repo, and a
// connection goes through a stream the Session's Runner dials back.
func (h viewAPI) newForward() *forward.Proxy {
	return forward.New(forward.Options{URL: h.cfg.ForwardURL, PublicURL: h.cfg.PublicURL, GrantMax: h.cfg.SigninMaxAge, Log: h.log,
		Allowed: func(ctx context.Context, u store.User, cred []byte, sessionID string) bool {
			live, err := h.store.Signins.SigninLive(ctx, cred, h.guard.life)
			return err == nil && live && h.guard.canAccess(ctx, u, h.repoOf(ctx, sessionID), false)
		},
		Listed: func(ctx context.Context, sessionID string, port int) bool {
			return slices.ContainsFunc(h.openPorts(ctx, sessionID), func(x protocol.Port) bool { return x.Port == port })
		},
		Dial: func(ctx context.Context, sessionID string, port int) (net.Conn, error) {
			s, err := h.store.Sessions.SessionByID(ctx, sessionID)
			if err != nil {
				return nil, err
			}
			rc := h.runners.Get(s.RunnerID)
			if rc == nil {
				return nil, fmt.Errorf("the Session's Runner is not connected")
			}
			return h.runners.OpenStream(ctx, rc, protocol.TypeSessionDial, func(stream string) any {
				return protocol.SessionDial{SessionID: sessionID, Port: port, Stream: stream}
			}, nil)
		},
		Failed: func(r *http.Request) { h.guard.fails.Take(signin.ClientAddr(r)) },
	})
}

// repoOf is a Session's Repo URL, or "" if there is no such Session.
func (h viewAPI) repoOf(ctx context.Context, id string) string {
	s, err := h.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		return ""
	}
	return s.RepoURL
}
