package protocol

import "time"

// GitHub tokens, Runner -> Hub requests, each with a SessionRef body and a
// GitHubToken reply. The Hub answers only for a starting or awake Session
// of the asking Runner, minting a fresh token each time.
const (
	// TypeSessionGitHubToken asks for the Sandbox token: the Session's Repo
	// alone, contents and pull requests write if its Creator may push to
	// it, read if not. The Runner asks as the
	// Sandbox starts or wakes and again before it expires.
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
