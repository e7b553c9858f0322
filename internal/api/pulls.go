package api

import "strings"

// NewPull is POST /api/sessions/{id}/pulls's body: a pull request for the
// Hub to open, as the GitHub App on the Creator's behalf, from a branch
// the Session pushed.
type NewPull struct {
	Branch string `json:"branch"`
	// Base is the branch it merges into; "" is the Repo's default branch.
	Base  string `json:"base,omitempty"`
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
}

// Bounds of a NewPull, inside GitHub's own (a body of 65,536 characters),
// leaving room for the line the Hub adds naming who opened it.
const (
	MaxPullTitle = 256
	MaxPullBody  = 60000
)

// Status is the pull request's state as a person reads it: merged, draft,
// open or closed (the web UI's pullState says the same).
func (p Pull) Status() string {
	switch {
	case p.Merged:
		return "merged"
	case p.Draft && p.State == "open":
		return "draft"
	}
	return p.State
}

// Line is the pull request's state with its checks and review decision,
// as a person reads them: "open · checks failing · changes requested"
// (the web UI's pullLine says the same).
func (p Pull) Line() string {
	parts := []string{p.Status()}
	if p.Checks != "" {
		parts = append(parts, "checks "+p.Checks)
	}
	if p.Review != "" {
		parts = append(parts, strings.ReplaceAll(p.Review, "_", " "))
	}
	return strings.Join(parts, " · ")
}
