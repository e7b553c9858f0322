package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/forward"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/lifetime"
	"kndl.dev/kndl/internal/store"
)

// viewAPI serves the Session view's socket, its terminal and its open ports
// (view.go, terminal.go, ports.go), and takes what a Runner sends for them
// (handleLive).
type viewAPI struct {
	core
	web      *webState
	sessions *session.Owner
	envs     *environment.Service // the ports a Session's Environment offers
	rows     sessionRows
	runners  *runners.Conns
	masks    *masks.Sets
	forward  *forward.Proxy
	life     *lifetime.Group // the Hub's: a terminal's close and resync outlive the request
}

// view is one open Session view: a browser tab's WebSocket at
// GET /api/sessions/{id}/live. The Hub sends it the Session's Events (with
// Claude's Markdown rendered), the Session with its queue when either
// changes, its open ports and, to its Creator's tabs that opened it, the
// terminal. The tab sends terminal messages; everything else it does goes
// through the API.
type view struct {
	session string
	user    store.User
	creator bool
	// out holds pointers: a slot of the queue is 8 bytes, not a
	// LiveMessage's ~200, and every view's queue is made whole when the
	// view opens (kndl loadtest: 58 KiB of a Hub's memory per view).
	out  chan *viewMsg
	gone chan struct{} // closed when the view is dropped
	drop sync.Once
}

// viewMsg is one message to a view: the live stream's one shape.
type viewMsg = api.LiveMessage

// viewIn is a message from a view's tab.
type viewIn struct {
	Type string `json:"type"`
	Data string `json:"data,omitempty"`
	Cols int    `json:"cols,omitempty"`
	Rows int    `json:"rows,omitempty"`
}

// viewQueue bounds what waits for a slow tab; past it the tab is closed
// and reconnects from its last Event.
const viewQueue = 1024

// send queues m for the view without blocking. A view that can't keep up
// is dropped: its socket closes and the tab reconnects from its last Event,
// and draws its terminal from a fresh snapshot, so nothing is skipped.
func (v *view) send(m viewMsg) bool {
	select {
	case <-v.gone:
		return false
	default:
	}
	select {
	case v.out <- &m:
		return true
	default:
		v.close()
		return false
	}
}

func (v *view) close() { v.drop.Do(func() { close(v.gone) }) }

// maxViewIn bounds one message from a tab: keystrokes, a paste.
const maxViewIn = 64 << 10

// liveSession is the Session view's WebSocket.
func (h viewAPI) liveSession(w http.ResponseWriter, r *http.Request, p Principal) {
	caughtUp, ok := h.catchUp.turnOf(r.Context())
	if !ok {
		return
	}
	defer caughtUp()
	// Subscribed before the Session is read (and its access checked), so
	// that read is the first message and no change falls between.
	ch, unsubscribe := h.sessions.Subscribe(r.PathValue("id"))
	defer unsubscribe()
	s, after, ws, ok := h.acceptSessionSocket(w, r, p)
	if !ok {
		return
	}
	defer ws.CloseNow()
	ws.SetReadLimit(maxViewIn)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	v := &view{session: s.ID, user: p.User, creator: s.CreatorID == p.User.ID, out: make(chan *viewMsg, viewQueue), gone: make(chan struct{})}
	h.addView(v)
	defer h.dropView(v)

	// One writer: everything a view is sent goes out in order.
	writeErr := make(chan error, 1)
	go func() {
		for {
			select {
			case m := <-v.out:
				b, _ := json.Marshal(m)
				if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
					writeErr <- err
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		defer cancel()
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var in viewIn
			if err := json.Unmarshal(b, &in); err != nil {
				v.send(viewMsg{Type: "error", Message: "not a message this socket takes"})
				continue
			}
			if err := h.viewInput(ctx, v, in); err != nil {
				v.send(viewMsg{Type: "error", Message: err.Error()})
			}
		}
	}()

	st := &sessionStream{rows: h.rows, md: &h.web.md, id: s.ID, after: after, state: s.State}
	refresh := func() {
		if m, cur, moved, ok := st.session(ctx); ok {
			v.send(m)
			if moved {
				h.sendPorts(ctx, v, cur) // a Session no longer Active has none
			}
		}
	}
	sendEvent := func(e store.Event) bool {
		m, ok := st.event(ctx, e)
		return !ok || v.send(m)
	}
	if m, _, ok := st.sessionAs(ctx, s); ok {
		v.send(m)
	}
	h.sendPorts(ctx, v, s)
	if !st.replay(ctx, sendEvent) {
		ws.Close(websocket.StatusTryAgainLater, "fell behind; reconnect with after=last seq")
		return
	}
	caughtUp()
	for {
		select {
		case u, ok := <-ch:
			if !ok || (u.Event != nil && !sendEvent(*u.Event)) {
				ws.Close(websocket.StatusTryAgainLater, "fell behind; reconnect with after=last seq")
				return
			}
			if u.Changed {
				refresh()
			}
		case <-v.gone:
			ws.Close(websocket.StatusTryAgainLater, "fell behind; reconnect with after=last seq")
			return
		case <-writeErr:
			return
		case <-ctx.Done():
			if cause := context.Cause(r.Context()); cause != nil && !errors.Is(cause, context.Canceled) {
				ws.Close(websocket.StatusPolicyViolation, cause.Error())
			}
			return
		}
	}
}

func (h viewAPI) addView(v *view) {
	h.web.mu.Lock()
	defer h.web.mu.Unlock()
	vs := h.web.views[v.session]
	if vs == nil {
		vs = map[*view]bool{}
		h.web.views[v.session] = vs
	}
	vs[v] = true
}

// dropView forgets a view and closes what it had open.
func (h viewAPI) dropView(v *view) {
	h.web.mu.Lock()
	if vs := h.web.views[v.session]; vs != nil {
		delete(vs, v)
		if len(vs) == 0 {
			delete(h.web.views, v.session)
		}
	}
	h.web.mu.Unlock()
	v.close()
	h.closeTerminal(v)
}

// viewsOf returns the Session's open views.
func (h viewAPI) viewsOf(id string) []*view {
	h.web.mu.Lock()
	defer h.web.mu.Unlock()
	out := make([]*view, 0, len(h.web.views[id]))
	for v := range h.web.views[id] {
		out = append(out, v)
	}
	return out
}

// viewInput handles a message from a tab: the terminal's. Each is refused
// to anyone but the Session's Creator, whatever they send.
func (h viewAPI) viewInput(ctx context.Context, v *view, in viewIn) error {
	switch in.Type {
	case "terminal.open", "terminal.input", "terminal.fit", "terminal.close":
	default:
		return fmt.Errorf("unknown message type %q: %w", in.Type, errdefs.ErrInvalid)
	}
	if !v.creator {
		return fmt.Errorf("only the Session's Creator uses its terminal: %w", errdefs.ErrForbidden)
	}
	switch in.Type {
	case "terminal.open":
		return h.openTerminal(ctx, v)
	case "terminal.close":
		h.closeTerminal(v)
		return nil
	case "terminal.input":
		return h.terminalInput(ctx, v, in)
	default:
		return h.terminalFit(ctx, v, in)
	}
}
