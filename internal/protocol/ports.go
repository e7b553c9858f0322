package protocol

// Open ports and forwarding: Runner -> Hub session.ports (ordered
// notification); Hub -> Runner session.dial and session.file (requests),
// each answered by the Runner dialling back one stream, a WebSocket at
// GET /runner/stream/{stream} carrying raw bytes as binary messages.
const (
	TypeSessionPorts = "session.ports"
	TypeSessionDial  = "session.dial"
	TypeSessionFile  = "session.file"
)

// Port is one TCP port something listens on in a Sandbox: each port once,
// with every address it listens on and the process holding it.
type Port struct {
	Port      int      `json:"port"`
	Addresses []string `json:"addresses"`
	Process   string   `json:"process,omitempty"` // the holder's command name, such as python3 or docker-proxy
	PID       int      `json:"pid,omitempty"`     // in the Sandbox's PID namespace
}

// SessionPorts is a Session's whole list of listening ports, sent when it
// changes. An empty list means nothing listens.
type SessionPorts struct {
	SessionID string `json:"session_id"`
	Ports     []Port `json:"ports"`
}

// SessionDial asks the Runner to connect to a port in the Session's
// Sandbox and carry that one connection over the stream it dials back.
// The reply comes once the stream is up, or with why the port refused.
type SessionDial struct {
	SessionID string `json:"session_id"`
	Port      int    `json:"port"`
	Stream    string `json:"stream"`
}

// SessionFile asks the Runner for a file in the Session's Workspace
// (a path relative to it, or under /workspace), sent over the stream it
// dials back. The reply, with the file's size, comes before the bytes.
type SessionFile struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
	Stream    string `json:"stream"`
}

// SessionFileInfo is the Runner's reply to session.file.
type SessionFileInfo struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}
