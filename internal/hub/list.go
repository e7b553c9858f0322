package hub

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/store"
)

// listMsg is one message to the Sessions list's WebSocket,
// GET /api/sessions/live: first the whole list ("list"), then the rows
// that changed ("changed"), each a Session as GET /api/sessions shows it,
// with its Creator's name; gone names the Sessions the person may no
// longer see.
type listMsg struct {
	Type     string            `json:"type"`
	Sessions []api.Session     `json:"sessions"`
	Names    map[string]string `json:"names"` // Creators' names, by id
	Gone     []string          `json:"gone,omitempty"`
}

// liveSessions is the Sessions list's WebSocket. It sends a row whenever
// the Session's state, queue, Keep awake or activity changes, only for
// Sessions of Repos the person has access to, read again at each change;
// losing access to a Repo it sent a row of ends it (readsRepo), and the tab
// reconnects to a list without them. It takes the list's filter
// (api.SessionFilter) as query parameters, refused before the socket opens
// when wrong, and sends only the rows it keeps: a Session that stops
// matching (its state changed, say) goes as gone, one that starts matching
// comes as changed. It takes nothing from the tab.
func (h sessionsAPI) liveSessions(w http.ResponseWriter, r *http.Request, p Principal) {
	q, err := h.guard.sessionQueryOf(r.Context(), p, r.URL.Query())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered
	}
	defer ws.CloseNow()
	ctx := ws.CloseRead(r.Context())
	// Subscribe before reading the store, so nothing falls between the two.
	ch, cancel := h.sessions.Subscribe(session.All)
	defer cancel()
	ss, err := h.store.Sessions.List(ctx, store.SessionFilter{})
	if err != nil {
		ws.Close(websocket.StatusInternalError, "the Hub could not read its Sessions")
		return
	}
	names := h.names(ctx)
	sent := map[string]string{} // by id, the row last sent, as JSON
	send := func(typ string, rows []api.Session, gone []string) error {
		if rows == nil {
			rows = []api.Session{}
		}
		m := listMsg{Type: typ, Sessions: rows, Names: map[string]string{}, Gone: gone}
		reread := false
		for _, a := range rows {
			if _, ok := names[a.CreatorID]; !ok && !reread {
				names, reread = h.names(ctx), true // a Member who joined since
			}
			m.Names[a.CreatorID] = names[a.CreatorID]
		}
		b, _ := json.Marshal(m)
		return ws.Write(ctx, websocket.MessageText, b)
	}
	// differs keeps the row as sent, and reports whether it differs from
	// the last one.
	differs := func(a api.Session) bool {
		b, _ := json.Marshal(a)
		was, ok := sent[a.ID]
		sent[a.ID] = string(b)
		return !ok || was != string(b)
	}
	rows := []api.Session{}
	for _, s := range h.guard.visibleSessions(ctx, p, ss) {
		readsRepo(ctx, s.RepoURL)
		if a := h.rows.now(s); q.match(a) {
			rows = append(rows, a)
		}
	}
	for _, a := range h.rows.list(ctx, rows) {
		differs(a)
	}
	if send("list", rows, nil) != nil {
		return
	}
	for {
		var ids map[string]bool
		select {
		case u, ok := <-ch:
			if !ok {
				ws.Close(websocket.StatusTryAgainLater, "fell behind; reconnect for the whole list")
				return
			}
			// Each Session of a burst is read once.
			ids = map[string]bool{u.ID: true}
			for len(ch) > 0 {
				if u, ok := <-ch; ok {
					ids[u.ID] = true
				}
			}
		case <-ctx.Done():
			if cause := context.Cause(r.Context()); cause != nil && !errors.Is(cause, context.Canceled) {
				ws.Close(websocket.StatusPolicyViolation, cause.Error())
			}
			return
		}
		var kept, changed []api.Session
		var gone []string
		for id := range ids {
			s, err := h.guard.sessionFor(ctx, p, id) // access, asked again
			var a api.Session
			if err == nil {
				a = h.rows.now(s)
			}
			if err != nil || !q.match(a) {
				if _, was := sent[id]; was && (err == nil || errors.Is(err, errdefs.ErrNotFound)) {
					delete(sent, id)
					gone = append(gone, id)
				}
				continue
			}
			kept = append(kept, a)
		}
		for _, a := range h.rows.list(ctx, kept) {
			if differs(a) {
				changed = append(changed, a)
			}
		}
		if (len(changed) > 0 || len(gone) > 0) && send("changed", changed, gone) != nil {
			return
		}
	}
}
