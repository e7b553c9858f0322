package github

import (
	"net/http"
	"net/url"
	"strings"

	"kndl.dev/kndl/internal/forge"
)

// Git is GitHub as the Runner's git relay speaks to it. It holds nothing:
// the relay passes each Session's installation token.
type Git struct{}

// Name is GitHub.
func (Git) Name() string { return "GitHub" }

// Authorize sets token as Basic auth's password under the user
// x-access-token, as GitHub's git over HTTP takes an installation token.
func (Git) Authorize(req *http.Request, token string) {
	req.SetBasicAuth("x-access-token", token)
}

// API is api.github.com for github.com, and the Repo's own origin for any
// other host (the fake GitHub serves both on one).
func (Git) API(repo *url.URL) *url.URL {
	if strings.EqualFold(repo.Host, "github.com") {
		return &url.URL{Scheme: "https", Host: "api.github.com"}
	}
	return &url.URL{Scheme: repo.Scheme, Host: repo.Host}
}

// AuthorizeAPI sets token as a Bearer token.
func (Git) AuthorizeAPI(req *http.Request, token string) {
	req.Header.Set("Authorization", "Bearer "+token)
}

var (
	_ forge.Forge = (*Client)(nil)
	_ forge.API   = Git{}
)
