package api

// The small bodies of single changes, named so a client sends them by
// type rather than as maps of its own.

// Switch is the body of PUT /api/sessions/{id}/keep-awake and
// /thread-context, the Creator's switches. On is a pointer so a body that
// leaves it out is refused, not read as off.
type Switch struct {
	On *bool `json:"on"`
}

// ClaudeToken is the body of PUT /api/account/claude-token: the person's
// setup token, which the Hub never sends back.
type ClaudeToken struct {
	Token string `json:"token"`
}

// RepoRequest is the body of POST /api/repos: a Repo by its URL or a path
// on a Runner's host.
type RepoRequest struct {
	URL string `json:"url"`
}

// RunnerShare is the body of PUT /api/runners/{id}/shared; like
// Switch's On, Shared must be said.
type RunnerShare struct {
	Shared *bool `json:"shared"`
}

// RunnerRequest is the body of POST /api/runners: pairing a Runner by the
// name it will go by.
type RunnerRequest struct {
	Name string `json:"name"`
}

// Claim is the body of POST /signin/claim: the secret of a Setup link or an
// Invite, from the fragment of the link the browser opened.
type Claim struct {
	Secret string `json:"secret"`
}

// InviteRequest is the body of POST /api/invites; ExpiresInHours 0 is the
// Hub's default.
type InviteRequest struct {
	GitHubLogin    string `json:"github_login"`
	ExpiresInHours int    `json:"expires_in_hours,omitempty"`
}

// InstallationRepos is the body of PUT /api/mcp/installations/{id}/repos:
// the ids of the Repos it is on in.
type InstallationRepos struct {
	Repos []string `json:"repos"`
}

// SecretValue is the body of PUT
// /api/mcp/installations/{id}/secrets/{key}: a header secret's value,
// write-only.
type SecretValue struct {
	Value string `json:"value"`
}

// OAuthClient is the body of PUT /api/mcp/installations/{id}/client: an
// OAuth client an authorization server without Dynamic Client
// Registration gave; the secret is write-only.
type OAuthClient struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// OAuthClientBound is the answer to entering an OAuth client: the client
// and the authorization server it is bound to.
type OAuthClientBound struct {
	ClientID string `json:"client_id"`
	Issuer   string `json:"issuer"`
}

// OAuthConnect is the answer to POST /api/mcp/installations/{id}/connect:
// the URL to open in the browser signed in to the Hub.
type OAuthConnect struct {
	URL string `json:"url"`
}

// CLILoginStart is the body of POST /api/cli/login: a CLI signing in the
// device-code way.
type CLILoginStart struct {
	// Machine names the machine signing in, as the person will see it.
	Machine string `json:"machine"`
	// TokenSHA256 is the hex SHA-256 of the CLI token the CLI made.
	TokenSHA256 string `json:"token_sha256"`
}

// CLILoginCode is the answer: the code to show and where to approve it.
type CLILoginCode struct {
	DeviceCode      string `json:"device_code"`
	UserCode        string `json:"user_code"`
	VerificationURL string `json:"verification_url"`
	ExpiresIn       int    `json:"expires_in"`
	Interval        int    `json:"interval"`
}

// CLILoginPoll is the body of POST /api/cli/login/poll.
type CLILoginPoll struct {
	DeviceCode string `json:"device_code"`
}

// CLILoginStatus is the answer to a poll: pending, approved, denied or
// expired. Once approved, the token the CLI made works.
type CLILoginStatus struct {
	Status string `json:"status"`
}

// AutoFix is a Repo's auto-fix settings (GET /api/repos/{repo}/auto-fix):
// whether a failing check (CI) or a review requesting changes (Reviews)
// on a pull request a Session opened is sent back to the Session as a
// prompt, at most Max times per pull request.
type AutoFix struct {
	CI      bool `json:"ci"`
	Reviews bool `json:"reviews"`
	Max     int  `json:"max"`
}

// AutoFixChange is the body of PATCH /api/repos/{repo}/auto-fix: each
// setting said changes, the others stay.
type AutoFixChange struct {
	CI      *bool `json:"ci,omitempty"`
	Reviews *bool `json:"reviews,omitempty"`
	Max     *int  `json:"max,omitempty"`
}

// MaxAutoFixes bounds a Repo's auto-fix Max: each is a Turn of a Session
// no person asked for.
const MaxAutoFixes = 20

// NotifyWebhookRequest is the body of POST /api/account/webhooks and PUT
// /api/account/webhooks/{id}: where to post, and in which format (json or
// slack).
type NotifyWebhookRequest struct {
	URL    string `json:"url"`
	Format string `json:"format"`
}
