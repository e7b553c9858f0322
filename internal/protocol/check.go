package protocol

// TypeSessionCheck (Hub -> Runner, request, since version 8) runs the
// Environment's check command in a Session's Sandbox after a Turn of an
// attempt ended: as the Sandbox's own user, in /workspace, with sh -c in
// the Sandbox's login environment and the Session's Variables. The Runner measures the exit code and the time itself and keeps
// the end of the output; nothing the Sandbox writes elsewhere counts.
const TypeSessionCheck = "session.check"

// CheckVersion is the first version whose Runner answers session.check.
const CheckVersion = 8

// SessionCheck names the Session and the command to run, within TimeoutMS.
type SessionCheck struct {
	SessionID string `json:"session_id"`
	Command   string `json:"command"`
	TimeoutMS int64  `json:"timeout_ms"`
}

// CheckTailMax bounds the output a Runner sends back: the last bytes of
// stdout and stderr together. The Hub masks them, then keeps the last
// CheckKeep bytes, so a Sensitive value cut by the Runner's window lies in
// the part the Hub drops.
const CheckTailMax = 16 << 10

// CheckKeep is how much of a check's masked output the Hub keeps.
const CheckKeep = 4 << 10

// SessionCheckResult is the Runner's reply to session.check. ExitCode is
// -1 when the command did not exit by itself (TimedOut, or killed).
type SessionCheckResult struct {
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	Output     string `json:"output"`
}
