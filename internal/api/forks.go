package api

import "time"

// NewFork asks for a fork of a Session: POST /api/sessions/{id}/fork.
type NewFork struct {
	// At is the Turn whose end the fork starts from; nil is the last.
	At *int `json:"at,omitempty"`
	// Prompt, if set, is the fork's first Turn; without one it waits
	// asleep for a prompt.
	Prompt string `json:"prompt,omitempty"`
}

// Fork links a fork to its parent: the Session it was copied from, and
// the Turn at whose end. How, in the answer to NewFork alone, says how
// the Runner copied it.
type Fork struct {
	SessionID string    `json:"session_id"`
	ParentID  string    `json:"parent_id"`
	Turn      int       `json:"turn"`
	CreatedAt time.Time `json:"created_at"`
	How       string    `json:"how,omitempty"`
}

// Forks is GET /api/sessions/{id}/forks: what the Session was forked
// from (null: it is no fork), and its own forks, oldest first.
type Forks struct {
	From  *Fork  `json:"from"`
	Forks []Fork `json:"forks"`
}
