package protocol

import "time"

// GitHub tokens, Runner -> Hub requests, each with a SessionRef body and a
// GitHubToken reply. The Hub answers only for a starting or awake Session
// of the asking Runner, minting a fresh token each time.
const (
	// TypeSessionGitHubToken asks for the Sandbox token: the Session's Repo
	// alone, contents and pull requests write. The Runner asks as the
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
	// URL is GitHub's web address (GITHUB_URL), such as https://github.com:
	// where the token is good.
	URL string `json:"url"`
}
