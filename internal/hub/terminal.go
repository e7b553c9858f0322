package hub

import (
	"context"
	"fmt"
	"io"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/redact"
	"kndl.dev/kndl/internal/store"
)

// terminal is a Session's terminal mirror on the Hub: the tabs that opened
// it, each drawn from a snapshot and then fed the pane's output. Only the
// Creator's views get in (viewInput), and only these tabs are ever sent a
// terminal frame.
type terminal struct {
	rc   *runners.Conn
	tabs map[*view]*tab
}

// tab is one view's place in the terminal's stream.
type tab struct {
	live bool   // drawn from a snapshot; takes output of gen
	gen  uint64 // the Runner's output generation it is drawn in
	w    io.WriteCloser
}

// terminalWriter is the one way terminal output reaches a browser: every
// snapshot and every byte of output for a tab is written here, per tab,
// through the Session's redaction set and then the shapes Events pass
// (Marked, or all with HUB_REDACT_SHAPES=all), each masked in its own
// width; redact.Writer holds back at most 100 ms of a piece that could
// start a value or a token.
func (h viewAPI) terminalWriter(set *redact.Set, w io.Writer) io.WriteCloser {
	return redact.NewWriter(set, w).MaskShapes(h.cfg.RedactAllShapes)
}

// tabSink turns what terminalWriter passes on into a view's messages.
type tabSink struct{ v *view }

func (t tabSink) Write(p []byte) (int, error) {
	t.v.send(viewMsg{Type: "terminal", Data: append([]byte(nil), p...)})
	return len(p), nil
}

// activeOn returns the Session, its Runner's connection, and an error
// unless it is Active there.
func activeOn(ctx context.Context, st *store.Sessions, rs *runners.Conns, id string) (store.Session, *runners.Conn, error) {
	s, err := st.SessionByID(ctx, id)
	if err != nil {
		return s, nil, err
	}
	if s.State != store.Active {
		return s, nil, fmt.Errorf("the Session is %s: its terminal is there only while it is active: %w", s.State, errdefs.ErrConflict)
	}
	rc := rs.Get(s.RunnerID)
	if rc == nil {
		return s, nil, fmt.Errorf("the Session's Runner is not connected: %w", errdefs.ErrUnavailable)
	}
	return s, rc, nil
}

// openTerminal adds the view's tab and asks the Runner for a snapshot; the
// tab is drawn from it and then takes the pane's output.
func (h viewAPI) openTerminal(ctx context.Context, v *view) error {
	_, rc, err := activeOn(ctx, h.store.Sessions, h.runners, v.session)
	if err != nil {
		return err
	}
	h.web.termCtl.Lock()
	defer h.web.termCtl.Unlock()
	h.web.mu.Lock()
	t := h.web.terms[v.session]
	if t == nil || t.rc != rc {
		t = &terminal{rc: rc, tabs: map[*view]*tab{}}
		h.web.terms[v.session] = t
	}
	if _, ok := t.tabs[v]; !ok {
		t.tabs[v] = &tab{}
	} else {
		t.tabs[v].live = false // a reopen waits for a fresh snapshot
	}
	h.web.mu.Unlock()
	if err := rc.Conn.Request(ctx, protocol.TypeTerminalOpen, protocol.SessionRef{SessionID: v.session}, nil); err != nil {
		h.dropTab(v)
		return fmt.Errorf("open the terminal: %w", err)
	}
	return nil
}

// closeTerminal removes the view's tab; the last one out tells the Runner
// to stop relaying. Opens and closes reach the Runner in the order the Hub
// decided them (termCtl), so a close never lands after a later open.
func (h viewAPI) closeTerminal(v *view) {
	h.web.termCtl.Lock()
	defer h.web.termCtl.Unlock()
	if rc := h.dropTab(v); rc != nil {
		ctx, cancel := context.WithTimeout(h.life.Context(), closeWait)
		defer cancel()
		rc.Conn.Request(ctx, protocol.TypeTerminalClose, protocol.SessionRef{SessionID: v.session}, nil)
	}
}

// closeWait bounds telling a Runner the terminal closed.
const closeWait = 5 * time.Second

// dropTab removes the view's tab and returns the Runner's connection if it
// was the last.
func (h viewAPI) dropTab(v *view) *runners.Conn {
	h.web.mu.Lock()
	defer h.web.mu.Unlock()
	t := h.web.terms[v.session]
	if t == nil {
		return nil
	}
	tb := t.tabs[v]
	if tb == nil {
		return nil
	}
	delete(t.tabs, v)
	if tb.w != nil {
		tb.w.Close()
	}
	if len(t.tabs) > 0 {
		return nil
	}
	delete(h.web.terms, v.session)
	return t.rc
}

// tabOf returns the view's tab's terminal if the view opened it, and the
// Session's Runner if the Session is Active: keystrokes and sizes come only
// from such a tab.
func (h viewAPI) tabOf(ctx context.Context, v *view) (*runners.Conn, error) {
	h.web.mu.Lock()
	t := h.web.terms[v.session]
	opened := t != nil && t.tabs[v] != nil
	h.web.mu.Unlock()
	if !opened {
		return nil, fmt.Errorf("open the terminal in this tab before typing into it: %w", errdefs.ErrConflict)
	}
	_, rc, err := activeOn(ctx, h.store.Sessions, h.runners, v.session)
	return rc, err
}

// checkSize refuses a size the pane can't take.
func checkSize(cols, rows int) error {
	if cols < protocol.MinTerminalCols || cols > protocol.MaxTerminalCols || rows < protocol.MinTerminalRows || rows > protocol.MaxTerminalRows {
		return fmt.Errorf("terminal size %dx%d: want %d to %d columns and %d to %d rows: %w", cols, rows,
			protocol.MinTerminalCols, protocol.MaxTerminalCols, protocol.MinTerminalRows, protocol.MaxTerminalRows, errdefs.ErrInvalid)
	}
	return nil
}

// terminalInput relays keystrokes from the Creator's tab that opened the
// terminal, with that tab's size: the tab that types sets the size.
func (h viewAPI) terminalInput(ctx context.Context, v *view, in viewIn) error {
	if in.Data == "" {
		return nil
	}
	if in.Cols != 0 || in.Rows != 0 {
		if err := checkSize(in.Cols, in.Rows); err != nil {
			return err
		}
	}
	rc, err := h.tabOf(ctx, v)
	if err != nil {
		return err
	}
	h.sessions.Typed(v.session)
	return rc.Conn.Request(ctx, protocol.TypeTerminalInput, protocol.TerminalInput{SessionID: v.session, Data: []byte(in.Data), Cols: in.Cols, Rows: in.Rows}, nil)
}

// terminalFit sets the pane to the size of the tab that pressed Fit to my
// window.
func (h viewAPI) terminalFit(ctx context.Context, v *view, in viewIn) error {
	if err := checkSize(in.Cols, in.Rows); err != nil {
		return err
	}
	rc, err := h.tabOf(ctx, v)
	if err != nil {
		return err
	}
	return rc.Conn.Request(ctx, protocol.TypeTerminalResize, protocol.TerminalResize{SessionID: v.session, Cols: in.Cols, Rows: in.Rows}, nil)
}

// terminalFrame hands a frame from the Runner to the tabs that opened the
// terminal: a tab waiting for a snapshot is drawn from the next one of the
// generation it gets; a drawn tab takes output of its generation, and waits
// for a fresh snapshot when the Runner's output broke off.
func (h viewAPI) terminalFrame(rc *runners.Conn, f protocol.TerminalFrame) {
	var set *redact.Set
	if f.Snapshot {
		var err error
		if set, err = h.masks.Of(h.life.Context(), f.SessionID); err != nil {
			// Never a frame that could not be masked.
			h.log.Warn("terminal snapshot dropped: no redaction set", "session", f.SessionID, "err", err)
			return
		}
	}
	resync := false
	// Held throughout, so a tab's state changes in the order frames come;
	// sending to a view never blocks.
	h.web.mu.Lock()
	defer h.web.mu.Unlock()
	t := h.web.terms[f.SessionID]
	if t == nil || t.rc != rc {
		return
	}
	for v, tb := range t.tabs {
		if !v.creator { // never: viewInput lets only the Creator open it
			continue
		}
		switch {
		case f.Snapshot && (!tb.live || tb.gen != f.Gen):
			if tb.w != nil {
				tb.w.Close()
			}
			tb.w = h.terminalWriter(set, tabSink{v})
			tb.live, tb.gen = true, f.Gen
			v.send(viewMsg{Type: "terminal", Snap: true, Cols: f.Cols, Rows: f.Rows})
			tb.w.Write(f.Data)
		case f.Snapshot || !tb.live:
		case tb.gen != f.Gen:
			tb.live = false
			v.send(viewMsg{Type: "terminal.wait"})
			resync = true
		case f.Cols != 0:
			v.send(viewMsg{Type: "terminal", Cols: f.Cols, Rows: f.Rows})
		default:
			tb.w.Write(f.Data)
		}
	}
	if resync {
		h.life.Go(func(ctx context.Context) {
			rc.Conn.Request(ctx, protocol.TypeTerminalOpen, protocol.SessionRef{SessionID: f.SessionID}, nil)
		})
	}
}

// runnerGone drops what the Hub held for a Runner's Sessions: their open
// ports, and their terminals, whose tabs are told to open them again.
func (h viewAPI) runnerGone(rc *runners.Conn) {
	h.web.mu.Lock()
	var closed []*view
	for id, t := range h.web.terms {
		if t.rc == rc {
			for v, tb := range t.tabs {
				if tb.w != nil {
					tb.w.Close()
				}
				closed = append(closed, v)
			}
			delete(h.web.terms, id)
		}
	}
	var dropped []string
	for id, e := range h.web.ports {
		if e.rc == rc {
			delete(h.web.ports, id)
			dropped = append(dropped, id)
		}
	}
	h.web.mu.Unlock()
	for _, v := range closed {
		v.send(viewMsg{Type: "terminal.closed", Message: "The Session's Runner went away; the terminal opens again when it is back."})
	}
	for _, id := range dropped {
		h.portsChanged(id)
	}
}
