package api

import (
	"fmt"
	"time"
)

// NewAttempts is the body of POST /api/attempts: one prompt started as
// Attempts ordinary Sessions (2 to 8), each placed, limited and run as any
// Session is.
type NewAttempts struct {
	NewSession
	Attempts int `json:"attempts"`
}

// AttemptSet is an attempt set (POST and GET /api/attempts/{id}): its
// attempts ranked best first (internal/hub/attempts.Rank): the last
// check passed, then the smaller diff, then the lower cost.
type AttemptSet struct {
	ID        string    `json:"id"`
	RepoID    string    `json:"repo_id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
	// Check is the check command of the Repo's current Environment
	// version, "" when it names none: then nothing ranks by a check.
	Check    string    `json:"check"`
	Attempts []Attempt `json:"attempts"`
	// Spent is what all its attempts spent; each attempt's is its
	// Session's Spent (left out while nothing).
	Spent Spent `json:"spent"`
}

// KeepAttempt is the body of POST /api/attempts/{id}/keep: the attempt
// its Creator keeps, and what becomes of the others, "sleep" or
// "archive". The kept one's pull request opens from its view.
type KeepAttempt struct {
	SessionID string `json:"session_id"`
	Others    string `json:"others"`
}

// Attempt is one attempt of a set: its Session (with what it spent and
// its newest pull request), its place in the set from 1, its last check,
// and its diff's size.
type Attempt struct {
	Place   int        `json:"place"`
	Session Session    `json:"session"`
	Check   *TurnCheck `json:"check,omitempty"`
	// DiffLines is the lines its Changes add and delete, -1 when they
	// could not be read (DiffNote says why); DiffFiles the files.
	DiffLines int    `json:"diff_lines"`
	DiffFiles int    `json:"diff_files"`
	DiffNote  string `json:"diff_note,omitempty"`
}

// TurnCheck is the Environment's check as it ran after a Turn (Turn: the
// seq of its turn_start, as TurnSpent's): the exit code and duration the Runner measured,
// the last 4 KiB of its output, masked. Error says why it could not run.
type TurnCheck struct {
	Turn       int64     `json:"turn"`
	Passed     bool      `json:"passed"`
	ExitCode   int       `json:"exit_code"`
	DurationMS int64     `json:"duration_ms"`
	TimedOut   bool      `json:"timed_out,omitempty"`
	Output     string    `json:"output"`
	Error      string    `json:"error,omitempty"`
	At         time.Time `json:"at"`
}

// Line says how a check went, in a few words; nil is one not run yet.
func (c *TurnCheck) Line() string {
	switch {
	case c == nil:
		return "not run yet"
	case c.Error != "":
		return "could not run: " + c.Error
	case c.TimedOut:
		return fmt.Sprintf("timed out after %.1f s", float64(c.DurationMS)/1000)
	case c.Passed:
		return fmt.Sprintf("passed in %.1f s", float64(c.DurationMS)/1000)
	}
	return fmt.Sprintf("failed (exit %d) in %.1f s", c.ExitCode, float64(c.DurationMS)/1000)
}
