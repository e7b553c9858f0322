package runner

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/tmux"
)

// mirror relays a Session's pane to the Hub while the Hub has it open: a
// snapshot for each tab that opens it, then the pane's output in order.
// Output is numbered as tmux's control client counts it, so a snapshot
// lands in the stream exactly where its picture ends (tmux.RunMarked).
type mirror struct {
	mu      sync.Mutex
	on      bool
	gen     uint64
	outputs uint64 // %output notifications seen, as tmux.Control counts them
	// cols and rows are the pane's size, which only the Runner sets.
	cols, rows int
	queue      []queued
	size       int // bytes of output queued
	// snapping holds output back while a snapshot is taken, so none of
	// what follows its mark goes before it.
	snapping bool
	wake     chan struct{}
	stop     chan struct{}
}

type queued struct {
	n     uint64 // the output's number; a snapshot's mark
	frame protocol.TerminalFrame
}

// mirrorQueueMax bounds output waiting for the Hub; past it the output is
// dropped and every tab starts again from a fresh snapshot.
const mirrorQueueMax = 4 << 20

// output is the tmux control client's %output callback, on its reading
// goroutine: it must not block.
func (m *mirror) output(_ string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outputs++
	if !m.on {
		return
	}
	m.queue = append(m.queue, queued{n: m.outputs, frame: protocol.TerminalFrame{Gen: m.gen, Data: data}})
	m.size += len(data)
	if m.size > mirrorQueueMax {
		m.queue, m.size = nil, 0
		m.gen++ // what follows is not continuous with what was sent
	}
	m.poke()
}

func (m *mirror) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// terminalOpen starts relaying the Session's pane, if it isn't, and sends
// a fresh snapshot in the stream for the tab that asked.
func (s *session) terminalOpen(ctx context.Context) error {
	m := &s.mirror
	m.mu.Lock()
	if !m.on {
		m.on, m.queue, m.size = true, nil, 0
		m.gen++
		m.wake, m.stop = make(chan struct{}, 1), make(chan struct{})
		wake, stop := m.wake, m.stop
		s.spawn(func() { s.sendFrames(wake, stop) })
	}
	m.snapping = true
	m.mu.Unlock()
	snap, mark, err := s.snapshot(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snapping = false
	m.poke()
	if err != nil {
		return err
	}
	m.place(snap, mark)
	return nil
}

// place puts a snapshot taken at mark in the queue after every output the
// picture holds and before any it doesn't; call with m.mu held and output
// held back since the snapshot was taken (m.snapping).
func (m *mirror) place(snap protocol.TerminalFrame, mark uint64) {
	snap.Gen = m.gen
	i := 0
	for i < len(m.queue) && (m.queue[i].frame.Snapshot || m.queue[i].n <= mark) {
		i++
	}
	m.queue = append(m.queue[:i], append([]queued{{n: mark, frame: snap}}, m.queue[i:]...)...)
}

// close stops relaying: nobody has the pane open, or it is gone.
func (m *mirror) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.on {
		m.on, m.queue, m.size = false, nil, 0
		close(m.stop)
	}
}

// sendFrames sends the mirror's queue to the Hub in order. Frames go on the
// connection directly, not through the outbox: a dropped connection drops
// them, and a tab that reconnects starts from a fresh snapshot.
func (s *session) sendFrames(wake, stop chan struct{}) {
	m := &s.mirror
	for {
		select {
		case <-stop:
			return
		case <-s.ctl.Done():
			m.close()
			return
		case <-wake:
		}
		for {
			m.mu.Lock()
			if m.snapping || len(m.queue) == 0 || !m.on {
				m.mu.Unlock()
				break
			}
			batch := m.queue
			m.queue, m.size = nil, 0
			m.mu.Unlock()
			c := s.link.current()
			if c == nil {
				m.close()
				return
			}
			for _, q := range coalesce(batch) {
				q.SessionID = s.id
				if err := c.Notify(s.life, protocol.TypeTerminalFrame, q); err != nil {
					m.close()
					return
				}
			}
		}
	}
}

// frameMax bounds the output carried in one frame, well under
// protocol.MaxFrameBytes once base64-encoded.
const frameMax = 256 << 10

// coalesce joins consecutive output of one Gen into fewer frames.
func coalesce(q []queued) []protocol.TerminalFrame {
	var out []protocol.TerminalFrame
	for _, x := range q {
		f := x.frame
		if n := len(out); n > 0 && !f.Snapshot && f.Cols == 0 {
			last := &out[n-1]
			if !last.Snapshot && last.Cols == 0 && last.Gen == f.Gen && len(last.Data)+len(f.Data) <= frameMax {
				last.Data = append(last.Data, f.Data...)
				continue
			}
		}
		f.Data = append([]byte(nil), f.Data...)
		out = append(out, f)
	}
	return out
}

// snapshotTries bounds how often a snapshot is taken again because the
// pane changed between reading its cursor and its picture.
const snapshotTries = 5

// snapshot draws the pane as it is: its modes, its visible rows with their
// colours, then its cursor, and returns the output mark it holds up to.
func (s *session) snapshot(ctx context.Context) (protocol.TerminalFrame, uint64, error) {
	const format = "#{pane_width} #{pane_height} #{cursor_x} #{cursor_y} #{cursor_flag} #{alternate_on} " +
		"#{keypad_cursor_flag} #{keypad_flag} #{mouse_standard_flag} #{mouse_button_flag} #{mouse_any_flag} #{mouse_sgr_flag}"
	for try := 1; ; try++ {
		info, m1, err := s.ctl.RunMarked(ctx, tmux.Command("display", "-p", "-t", paneTarget, format))
		if err != nil {
			return protocol.TerminalFrame{}, 0, fmt.Errorf("read the pane: %w", err)
		}
		rows, m2, err := s.ctl.RunMarked(ctx, tmux.Command("capture-pane", "-p", "-e", "-t", paneTarget))
		if err != nil {
			return protocol.TerminalFrame{}, 0, fmt.Errorf("capture the pane: %w", err)
		}
		if m1 != m2 && try < snapshotTries {
			continue // it drew between the two: the cursor may not match
		}
		f, err := drawSnapshot(info, rows)
		return f, m2, err
	}
}

// drawSnapshot turns the pane's state (display's format line) and rows
// (capture-pane -p -e) into what redraws it on a fresh terminal.
func drawSnapshot(info []string, rows []string) (protocol.TerminalFrame, error) {
	var v [12]int
	fs := strings.Fields(strings.Join(info, " "))
	if len(fs) != len(v) {
		return protocol.TerminalFrame{}, fmt.Errorf("pane state %q: %w", info, errdefs.ErrInvalid)
	}
	for i, f := range fs {
		n, err := strconv.Atoi(f)
		if err != nil {
			return protocol.TerminalFrame{}, fmt.Errorf("pane state %q: %w", info, errdefs.ErrInvalid)
		}
		v[i] = n
	}
	cols, height, cx, cy, cursor, alt := v[0], v[1], v[2], v[3], v[4], v[5]
	var b strings.Builder
	set := func(on int, mode string) {
		if on == 1 {
			b.WriteString("\x1b[?" + mode + "h")
		}
	}
	set(alt, "1049")
	// Claude Code turns bracketed paste on as it starts and tmux has no
	// format for it: a pane on the alternate screen is taken to have it.
	set(alt, "2004")
	set(v[6], "1")
	if v[7] == 1 {
		b.WriteString("\x1b=")
	}
	set(v[8], "1000")
	set(v[9], "1002")
	set(v[10], "1003")
	set(v[11], "1006")
	b.WriteString("\x1b[H\x1b[2J")
	for i, row := range rows {
		if i >= height {
			break
		}
		if i > 0 {
			b.WriteString("\x1b[0m\r\n")
		}
		b.WriteString(row)
	}
	fmt.Fprintf(&b, "\x1b[0m\x1b[%d;%dH", cy+1, cx+1)
	if cursor == 0 {
		b.WriteString("\x1b[?25l")
	} else {
		b.WriteString("\x1b[?25h")
	}
	return protocol.TerminalFrame{Snapshot: true, Cols: cols, Rows: height, Data: []byte(b.String())}, nil
}

// terminalInput types the Creator's keystrokes into the pane byte for byte,
// first taking the size of the tab that typed.
func (s *session) terminalInput(ctx context.Context, req protocol.TerminalInput) error {
	if req.Cols != 0 || req.Rows != 0 {
		if err := s.terminalResize(ctx, protocol.TerminalResize{SessionID: req.SessionID, Cols: req.Cols, Rows: req.Rows}); err != nil {
			return err
		}
	}
	s.typing.Lock()
	defer s.typing.Unlock()
	for _, cmd := range tmux.RawKeys(paneTarget, req.Data) {
		if _, err := s.ctl.Run(ctx, cmd); err != nil {
			return fmt.Errorf("type into the pane: %w", err)
		}
	}
	return nil
}

// terminalResize sets the pane's one size, and tells the tabs in order.
func (s *session) terminalResize(ctx context.Context, req protocol.TerminalResize) error {
	if req.Cols < protocol.MinTerminalCols || req.Cols > protocol.MaxTerminalCols || req.Rows < protocol.MinTerminalRows || req.Rows > protocol.MaxTerminalRows {
		return fmt.Errorf("terminal size %dx%d: want %d to %d columns and %d to %d rows: %w", req.Cols, req.Rows,
			protocol.MinTerminalCols, protocol.MaxTerminalCols, protocol.MinTerminalRows, protocol.MaxTerminalRows, errdefs.ErrInvalid)
	}
	m := &s.mirror
	m.mu.Lock()
	if m.cols == req.Cols && m.rows == req.Rows {
		m.mu.Unlock()
		return nil
	}
	m.cols, m.rows = req.Cols, req.Rows
	if m.on {
		// Before the output the program draws at the new size.
		m.queue = append(m.queue, queued{n: m.outputs, frame: protocol.TerminalFrame{Gen: m.gen, Cols: req.Cols, Rows: req.Rows}})
		m.poke()
	}
	m.mu.Unlock()
	_, err := s.ctl.Run(ctx, tmux.Command("refresh-client", "-C", fmt.Sprintf("%dx%d", req.Cols, req.Rows)))
	return err
}
