package protocol

import "time"

// GitHub tokens, Runner -> Hub requests, each with a SessionRef body and a
// GitHubToken reply. The Hub answers only for a starting or awake Session
// of the asking Runner, minting a fresh token each time.
const (
	// TypeSessionGitHubToken asks for the Session's forge token: the
	// Session's Repo alone, contents and pull requests write if its
	// Creator may push to it, read if not. The Runner asks as the Sandbox
	// starts or wakes and again before it expires, and holds it in its git
	// relay's memory (since version 7; before, it went into the Sandbox).
	TypeSessionGitHubToken = "session.github_token"
	// TypeSessionCloneToken asks for the host clone's token: the Session's
	// Repo alone, contents read.
	TypeSessionCloneToken = "session.clone_token"
)

// GitHubToken is an installation token of the Hub's GitHub App.
type GitHubToken struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	// ExpiresIn is the seconds the token had left as the Hub sent it. The
	// Runner reads the token's life from it on its own clock (Expiry), so
	// a clock off from the Hub's neither keeps an expired token nor drops
	// a good one.
	ExpiresIn int64 `json:"expires_in,omitempty"`
	// URL is GitHub's web address (GITHUB_URL), such as https://github.com:
	// where the token is good.
	URL string `json:"url"`
}

// Expiry is when the token expires on the clock of whoever received it at
// received: ExpiresIn from then, or ExpiresAt from a Hub that sent none.
func (t GitHubToken) Expiry(received time.Time) time.Time {
	if t.ExpiresIn > 0 {
		return received.Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	return t.ExpiresAt
}

// TypeSessionPushed (Runner -> Hub, ordered, since version 7) tells the
// Hub of the refs of one push the Session's git relay sent on and GitHub
// took: the Hub records the Session's branches from these alone.
const TypeSessionPushed = "session.pushed"

// SessionPushed is one push the git relay saw GitHub take.
type SessionPushed struct {
	SessionID string      `json:"session_id"`
	Refs      []PushedRef `json:"refs"`
}

// PushedRef is one ref of a push: its full name (refs/heads/…) and its
// old and new object ids, all zeros for none.
type PushedRef struct {
	Ref string `json:"ref"`
	Old string `json:"old"`
	New string `json:"new"`
}

// MaxPushedRefs bounds the refs of one session.pushed: the git relay
// takes no more in one push.
const MaxPushedRefs = 256
