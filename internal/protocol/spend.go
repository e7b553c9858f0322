package protocol

// TypeSessionCapped (Hub -> Runner, request, since version 7) tells the
// Runner that a Session is past one of its spend caps: its relay answers
// each model request of the Session's run with an error in the model API's
// shape naming the cap (SessionCapped.Why), until the run ends. The Hub
// puts the Session to sleep after it, and wakes it no more until the cap
// is raised or its day is over.
const TypeSessionCapped = "session.capped"

// SessionCapped names a Session past a spend cap, and which.
type SessionCapped struct {
	SessionID string `json:"session_id"`
	Why       string `json:"why"`
}
