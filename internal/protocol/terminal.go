package protocol

// The terminal mirror: Hub -> Runner requests terminal.open, terminal.close,
// terminal.input and terminal.resize; Runner -> Hub terminal.frame, an
// ordered notification.
const (
	TypeTerminalOpen   = "terminal.open"
	TypeTerminalClose  = "terminal.close"
	TypeTerminalInput  = "terminal.input"
	TypeTerminalResize = "terminal.resize"
	TypeTerminalFrame  = "terminal.frame"
)

// TerminalInput is keystrokes for a Session's pane, byte for byte, from the
// Creator's tab that typed them; Cols and Rows, when set, are the size that
// tab fits, which the pane takes first.
type TerminalInput struct {
	SessionID string `json:"session_id"`
	Data      []byte `json:"data"`
	Cols      int    `json:"cols,omitempty"`
	Rows      int    `json:"rows,omitempty"`
}

// TerminalResize sets the pane's one size.
type TerminalResize struct {
	SessionID string `json:"session_id"`
	Cols      int    `json:"cols"`
	Rows      int    `json:"rows"`
}

// Terminal sizes a pane may take.
const (
	MinTerminalCols, MaxTerminalCols = 20, 500
	MinTerminalRows, MaxTerminalRows = 5, 200
)

// TerminalFrame is a piece of a Session's pane, in order. A Snapshot frame
// redraws the whole pane at Cols x Rows (reset, then Data: the visible rows
// with their colours, then the cursor); a frame with Cols and Rows and no
// Snapshot says the pane was resized; any other carries the pane's output
// as the program wrote it. Gen counts snapshots: output after snapshot N
// continues exactly where snapshot N's picture ends.
type TerminalFrame struct {
	SessionID string `json:"session_id"`
	Gen       uint64 `json:"gen"`
	Snapshot  bool   `json:"snapshot,omitempty"`
	Cols      int    `json:"cols,omitempty"`
	Rows      int    `json:"rows,omitempty"`
	Data      []byte `json:"data,omitempty"`
}
