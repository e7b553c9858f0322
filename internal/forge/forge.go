// Package forge is the seam between kndl and the git host its Repos live
// on: Forge, what the Hub asks of it (a Session's token, the pull requests
// of the branches Sessions pushed), and Git, how the Runner's git relay
// sends a Session's git to it. GitHub's implementation is internal/github;
// a second forge is a package beside it, with its fake in internal/testkit.
// Anything may import it; it imports nothing of kndl's.
package forge

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Forge is a git host as the Hub speaks to it.
type Forge interface {
	// ParseRepo reads owner and name from a Repo's clone URL; ok is false
	// for a Repo not on this forge.
	ParseRepo(repoURL string) (owner, name string, ok bool)
	// MintToken mints a fresh token for owner/name alone with access,
	// never cached or shared. It returns ErrNotFound (internal/errdefs)
	// when the forge gives the Hub no token for the Repo, and
	// ErrUnavailable when the forge could not answer.
	MintToken(ctx context.Context, owner, name string, access Access) (Token, error)
	// RevokeToken ends a token MintToken minted; one ended already is no
	// error.
	RevokeToken(ctx context.Context, token string) error
	// Pulls lists the pull requests opened from branch, newest first;
	// none when the Hub may not read the Repo's.
	Pulls(ctx context.Context, owner, name, branch string) ([]Pull, error)
	// ChecksOf is the combined state of the checks on commit ref: one of
	// the Checks constants, "" for none or not readable.
	ChecksOf(ctx context.Context, owner, name, ref string) (string, error)
	// ReviewOf is pull request n's review decision: one of the Review
	// constants, "" for none yet.
	ReviewOf(ctx context.Context, owner, name string, n int) (string, error)
}

// Files is a Forge that reads a Repo's files, such as its
// devcontainer.json. It is optional.
type Files interface {
	// FileAt returns the file at path on the Repo's default branch, at
	// most max bytes, and the commit it was read at. It returns
	// ErrNotFound (internal/errdefs) for no such file or no token for the
	// Repo, ErrTooLarge over max, and ErrUnavailable when the forge could
	// not answer.
	FileAt(ctx context.Context, owner, name, path string, max int64) (content []byte, commit string, err error)
}

// Access is what a minted token may do in its Repo.
type Access int

const (
	// Clone reads the code alone: a host clone's.
	Clone Access = iota
	// Read fetches and reads pull requests: the Session of a Creator who
	// may not push.
	Read
	// Push also pushes branches and writes pull requests: the Session of
	// a Creator who may push.
	Push
)

// Token is a token the forge minted, with when it expires.
type Token struct {
	Value   string
	Expires time.Time
}

// Pull is a pull request as the Hub keeps and shows it; its JSON is what
// the store keeps of it.
type Pull struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	URL    string `json:"html_url"`
	// State is open or closed; Merged is set for a closed one merged.
	State  string `json:"state"`
	Merged bool   `json:"merged,omitempty"`
	Draft  bool   `json:"draft,omitempty"`
	// Head is the commit its branch is at, whose checks are its own.
	Head PullHead `json:"head"`
	// Checks and Review are what the Hub read of its checks (ChecksOf)
	// and its reviews (ReviewOf); the forge's pull request carries neither.
	Checks string `json:"checks,omitempty"`
	Review string `json:"review,omitempty"`
}

// PullHead is a pull request's head commit.
type PullHead struct {
	SHA string `json:"sha"`
}

// A pull request's checks, combined: one failing makes them failing, else
// one not done makes them pending; "" is no checks, or not known.
const (
	ChecksPassing = "passing"
	ChecksFailing = "failing"
	ChecksPending = "pending"
)

// A pull request's review decision: "" is none yet.
const (
	ReviewApproved         = "approved"
	ReviewChangesRequested = "changes_requested"
)

// Git is a git host as the Runner's git relay (internal/gitrelay) speaks
// to it: the relay holds a Session's token and sends git's smart HTTP on
// with it.
type Git interface {
	// Name is the forge's name as people know it, for the relay's
	// messages: GitHub.
	Name() string
	// Authorize sets token on req, a request to the forge's git.
	Authorize(req *http.Request, token string)
}

// API is a Git whose REST and GraphQL APIs take GitHub's calls, which
// the relay forwards from gh by its allowlist. It is optional: a forge
// without it has git alone through the relay.
type API interface {
	Git
	// API is the API's base URL for a Repo at repo, such as
	// https://api.github.com for https://github.com/acme/app.git.
	API(repo *url.URL) *url.URL
	// AuthorizeAPI sets token on req, a request to the API.
	AuthorizeAPI(req *http.Request, token string)
}
