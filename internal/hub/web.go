package hub

import (
	"sync"

	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/protocol"
)

// webState is what the Hub holds in memory for the web UI: each Active
// Session's open ports, its terminal's tabs and the Session view's
// connections.
type webState struct {
	mu    sync.Mutex
	ports map[string]portsEntry     // by Session id
	views map[string]map[*view]bool // the Session views open, by Session id
	terms map[string]*terminal      // by Session id, while a tab has it open
	// termCtl orders terminal opens and closes toward Runners.
	termCtl sync.Mutex
	md      renderCache // Claude's Markdown, rendered once per Event
}

// portsEntry is a Session's latest list and the Runner connection it came
// over: it holds only while that connection does and the Session is Active.
type portsEntry struct {
	rc   *runners.Conn
	list []protocol.Port
}

func newWebState() *webState {
	return &webState{ports: map[string]portsEntry{}, views: map[string]map[*view]bool{}, terms: map[string]*terminal{}}
}
