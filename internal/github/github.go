// Package github is the Hub's client for the GitHub it signs people in with:
// the GitHub App's OAuth user flow (who someone is), and, as the App's
// installation, whether someone is a collaborator on a Repo; and kndl's
// forge (internal/forge) on GitHub: the Hub's Client mints Sessions' tokens
// and reads pull requests, the Runner's git relay sends git through Git
// (git.go). GitHub's host is configurable, so tests point it at
// internal/testkit's fake. Only the Hub and the Runner import it.
package github

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/forge"
)

// Config is how to reach GitHub and act as the App.
type Config struct {
	// URL is GitHub's web address, for the OAuth flow: https://github.com,
	// or a GitHub Enterprise Server's.
	URL string
	// APIURL is GitHub's REST API: https://api.github.com, or
	// https://HOST/api/v3 on GitHub Enterprise Server.
	APIURL string
	// ClientID and ClientSecret are the App's OAuth client credentials.
	ClientID, ClientSecret string
	// AppID and PrivateKey let the Hub act as the App's installations; without
	// them nobody signed in with GitHub has access to any Repo.
	AppID      int64
	PrivateKey *rsa.PrivateKey
	// HTTP is the client to use; nil means one with a 10-second timeout that
	// follows no redirect.
	HTTP *http.Client
}

// Client talks to one GitHub.
type Client struct {
	cfg  Config
	http *http.Client

	mu     sync.Mutex
	tokens map[string]installToken // by installation id and permissions
	slug   string                  // the App's, once asked: AppSlug
}

type installToken struct {
	token   string
	expires time.Time
}

// New makes a client.
func New(cfg Config) (*Client, error) {
	for name, u := range map[string]string{"GITHUB_URL": cfg.URL, "GITHUB_API_URL": cfg.APIURL} {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return nil, fmt.Errorf("%s %q: want an http or https URL: %w", name, u, errdefs.ErrInvalid)
		}
	}
	cfg.URL, cfg.APIURL = strings.TrimSuffix(cfg.URL, "/"), strings.TrimSuffix(cfg.APIURL, "/")
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Client{cfg: cfg, http: hc, tokens: map[string]installToken{}}, nil
}

// ParsePrivateKey reads the App's private key as GitHub hands it out: a PEM
// file holding a PKCS#1 (or PKCS#8) RSA key.
func ParsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, errors.New("the GitHub App's private key is not PEM: use the .pem file GitHub generated")
	}
	if k, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if rk, ok := k.(*rsa.PrivateKey); err == nil && ok {
		return rk, nil
	}
	return nil, errors.New("the GitHub App's private key is not an RSA key")
}

// HasApp reports whether the App's id and key are set, so Repo access can
// be asked at all.
func (c *Client) HasApp() bool { return c.cfg.AppID != 0 && c.cfg.PrivateKey != nil }

// AuthorizeURL is where a browser goes to sign in: GitHub sends it back to
// redirectURI with a code and state. challenge is PKCE's S256 challenge.
func (c *Client) AuthorizeURL(redirectURI, state, challenge string) string {
	q := url.Values{"client_id": {c.cfg.ClientID}, "redirect_uri": {redirectURI}, "state": {state},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "allow_signup": {"false"}}
	return c.cfg.URL + "/login/oauth/authorize?" + q.Encode()
}

// Challenge is PKCE's S256 challenge for a verifier.
func Challenge(verifier string) string {
	h := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// User is who GitHub says a person is.
type User struct {
	ID    int64  `json:"id"`
	Login string `json:"login"`
	Name  string `json:"name"`
}

// SignIn exchanges the code GitHub sent the browser back with for a user
// token, asks who it belongs to, and forgets it: the Hub keeps no GitHub
// token of anyone's.
func (c *Client) SignIn(ctx context.Context, code, redirectURI, verifier string) (User, error) {
	form := url.Values{"client_id": {c.cfg.ClientID}, "client_secret": {c.cfg.ClientSecret}, "code": {code},
		"redirect_uri": {redirectURI}, "code_verifier": {verifier}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL+"/login/oauth/access_token", strings.NewReader(form.Encode()))
	if err != nil {
		return User{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	var tok struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
	}
	if _, err := c.do(req, &tok); err != nil {
		return User{}, fmt.Errorf("exchange the sign-in code: %w", err)
	}
	if tok.AccessToken == "" {
		// GitHub answers 200 with an error for a bad or used code.
		return User{}, fmt.Errorf("GitHub refused the sign-in code (%s): %w", tok.Error, errdefs.ErrUnauthorized)
	}
	req, err = c.apiRequest(ctx, http.MethodGet, "/user", "Bearer "+tok.AccessToken, nil)
	if err != nil {
		return User{}, err
	}
	var u User
	if _, err := c.do(req, &u); err != nil {
		return User{}, fmt.Errorf("ask GitHub who signed in: %w", err)
	}
	if u.ID == 0 || u.Login == "" {
		return User{}, fmt.Errorf("GitHub's /user answer has no id or login: %w", errdefs.ErrUnavailable)
	}
	return u, nil
}

// CanPush reports whether GitHub gives login write (push) permission on
// owner/repo, or more (admin), asking as the App's installation
// (GET /repos/{owner}/{repo}/collaborators/{user}/permission).
func (c *Client) CanPush(ctx context.Context, owner, repo, login string) (bool, error) {
	var answer struct {
		Permission string `json:"permission"`
	}
	status, err := c.asInstallation(ctx, owner, repo, "/collaborators/"+url.PathEscape(login)+"/permission", &answer)
	switch {
	case status == 0 && err == nil, status == http.StatusNotFound:
		return false, nil
	case status == http.StatusOK:
		return answer.Permission == "admin" || answer.Permission == "write", nil
	case err == nil:
		err = fmt.Errorf("GitHub answered %d: %w", status, errdefs.ErrUnavailable)
	}
	return false, fmt.Errorf("ask GitHub for %s's permission on %s/%s: %w", login, owner, repo, err)
}

// IsCollaborator reports whether GitHub says login is a collaborator on
// owner/repo, asking as the App's installation on it: false if the App is
// not installed there. An error (ErrUnavailable) means GitHub could not
// answer, which is not a no.
func (c *Client) IsCollaborator(ctx context.Context, owner, repo, login string) (bool, error) {
	status, err := c.asInstallation(ctx, owner, repo, "/collaborators/"+url.PathEscape(login), nil)
	switch {
	case status == 0 && err == nil, status == http.StatusNotFound:
		return false, nil
	case status == http.StatusNoContent:
		return true, nil
	case err == nil:
		err = fmt.Errorf("GitHub answered %d: %w", status, errdefs.ErrUnavailable)
	}
	return false, fmt.Errorf("ask GitHub whether %s is a collaborator on %s/%s: %w", login, owner, repo, err)
}

// asInstallation GETs path under /repos/owner/repo as the App's
// installation on it, decoding the answer into out. Status 0 and no error
// mean there is no App, or it is not installed on the Repo.
func (c *Client) asInstallation(ctx context.Context, owner, repo, path string, out any) (int, error) {
	return c.asInstallationWith(ctx, hubReadPermissions, owner, repo, path, out)
}

// asInstallationWith is asInstallation on a token with perms.
func (c *Client) asInstallationWith(ctx context.Context, perms map[string]string, owner, repo, path string, out any) (int, error) {
	if !c.HasApp() {
		return 0, nil
	}
	inst, err := c.installation(ctx, owner, repo)
	if errors.Is(err, errdefs.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	tok, err := c.installationToken(ctx, inst, perms)
	if err != nil {
		return 0, err
	}
	req, err := c.apiRequest(ctx, http.MethodGet, "/repos/"+owner+"/"+repo+path, "token "+tok, nil)
	if err != nil {
		return 0, err
	}
	return c.do(req, out)
}

// installation returns the id of the App's installation on owner/repo, or
// ErrNotFound when the App isn't installed there.
func (c *Client) installation(ctx context.Context, owner, repo string) (int64, error) {
	jwt, err := c.appJWT()
	if err != nil {
		return 0, err
	}
	req, err := c.apiRequest(ctx, http.MethodGet, "/repos/"+owner+"/"+repo+"/installation", "Bearer "+jwt, nil)
	if err != nil {
		return 0, err
	}
	var inst struct {
		ID int64 `json:"id"`
	}
	status, err := c.do(req, &inst)
	if status == http.StatusNotFound {
		return 0, fmt.Errorf("the GitHub App is not installed on %s/%s: %w", owner, repo, errdefs.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("find the GitHub App's installation on %s/%s: %w", owner, repo, err)
	}
	return inst.ID, nil
}

// The permissions of the Hub's own installation tokens: what it reads of
// every Repo (who may access it, the pull requests opened on it and their
// reviews), and, on a token apart, check runs: an App set up without the
// Checks permission still gets the first, since GitHub refuses a token
// that asks for a permission the App was not granted.
var (
	hubReadPermissions = map[string]string{"metadata": "read", "pull_requests": "read"}
	checksPermissions  = map[string]string{"checks": "read"}
)

// errNotGranted is GitHub's refusal of a token asking for a permission
// the App's installation was not granted.
var errNotGranted = errors.New("the GitHub App was not granted a permission the Hub asked for")

// installationToken returns the Hub's own token for the installation with
// perms, minted once and used until five minutes before it expires. It
// never leaves the Hub.
func (c *Client) installationToken(ctx context.Context, id int64, perms map[string]string) (string, error) {
	key := fmt.Sprint(id, perms) // fmt prints a map's keys sorted
	c.mu.Lock()
	t, ok := c.tokens[key]
	c.mu.Unlock()
	if ok && time.Until(t.expires) > 5*time.Minute {
		return t.token, nil
	}
	jwt, err := c.appJWT()
	if err != nil {
		return "", err
	}
	body, _ := json.Marshal(map[string]any{"permissions": perms})
	req, err := c.apiRequest(ctx, http.MethodPost, "/app/installations/"+strconv.FormatInt(id, 10)+"/access_tokens", "Bearer "+jwt,
		strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	var got struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	status, err := c.do(req, &got)
	if status == http.StatusUnprocessableEntity {
		return "", fmt.Errorf("mint a token for the GitHub App's installation %d with %v: %w: %w", id, perms, errNotGranted, err)
	}
	if err != nil {
		return "", fmt.Errorf("mint a token for the GitHub App's installation %d: %w", id, err)
	}
	c.mu.Lock()
	c.tokens[key] = installToken{got.Token, got.ExpiresAt}
	c.mu.Unlock()
	return got.Token, nil
}

// ChecksOf is the combined state of the check runs on ref (a commit) of
// owner/repo, read as the App (GET
// /repos/{owner}/{repo}/commits/{ref}/check-runs, the latest run of each
// name, up to 100): "" when there are none, and when the App may not read
// them (its installation lacks the Checks permission), which is not an
// error the Hub can mend.
func (c *Client) ChecksOf(ctx context.Context, owner, repo, ref string) (string, error) {
	var got struct {
		CheckRuns []CheckRun `json:"check_runs"`
	}
	_, err := c.asInstallationWith(ctx, checksPermissions, owner, repo, "/commits/"+url.PathEscape(ref)+"/check-runs?per_page=100", &got)
	if errors.Is(err, errNotGranted) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the checks of %s/%s at %s: %w", owner, repo, ref, err)
	}
	return CombinedChecks(got.CheckRuns), nil
}

// CheckRun is a check run as GitHub lists it.
type CheckRun struct {
	// Status is queued, in_progress, completed (or waiting, requested,
	// pending); Conclusion is set once completed.
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
}

// CombinedChecks is the check runs' state in a word, as GitHub's pull
// request page sums them: any completed without success (success, neutral
// or skipped) failing, else any not completed pending, else passing.
func CombinedChecks(runs []CheckRun) string {
	if len(runs) == 0 {
		return ""
	}
	state := forge.ChecksPassing
	for _, r := range runs {
		switch {
		case r.Status != "completed":
			state = forge.ChecksPending
		case r.Conclusion != "success" && r.Conclusion != "neutral" && r.Conclusion != "skipped":
			return forge.ChecksFailing
		}
	}
	return state
}

// ReviewOf is pull request n's review decision, read as the App (GET
// /repos/{owner}/{repo}/pulls/{n}/reviews, the first 100): changes
// requested while any reviewer's latest review requests them, else
// approved while any reviewer's approves, else "". It leaves out what
// GitHub's own decision adds from the Repo's rules (required reviewers,
// code owners), which the App does not read.
func (c *Client) ReviewOf(ctx context.Context, owner, repo string, n int) (string, error) {
	var got []Review
	if _, err := c.asInstallation(ctx, owner, repo, "/pulls/"+strconv.Itoa(n)+"/reviews?per_page=100", &got); err != nil {
		return "", fmt.Errorf("read the reviews of %s/%s#%d: %w", owner, repo, n, err)
	}
	return ReviewDecision(got), nil
}

// Review is a review as GitHub's REST API lists it.
type Review struct {
	User struct {
		Login string `json:"login"`
	} `json:"user"`
	// State is APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED or
	// PENDING.
	State string `json:"state"`
}

// ReviewDecision sums reviews, oldest first, as ReviewOf says.
func ReviewDecision(reviews []Review) string {
	latest := map[string]string{} // each reviewer's last approval, request or dismissal
	for _, r := range reviews {
		switch r.State {
		case "APPROVED", "CHANGES_REQUESTED", "DISMISSED":
			latest[strings.ToLower(r.User.Login)] = r.State
		}
	}
	decision := ""
	for _, st := range latest {
		switch {
		case st == "CHANGES_REQUESTED":
			return forge.ReviewChangesRequested
		case st == "APPROVED":
			decision = forge.ReviewApproved
		}
	}
	return decision
}

// Pulls lists the pull requests opened from branch of owner/repo, open and
// closed, newest first (GET /repos/{owner}/{repo}/pulls?head=OWNER:BRANCH),
// asking as the App's installation. With no App, or the App not on the
// Repo, it returns none.
func (c *Client) Pulls(ctx context.Context, owner, repo, branch string) ([]forge.Pull, error) {
	var got []struct {
		forge.Pull
		MergedAt *time.Time `json:"merged_at"`
	}
	q := url.Values{"head": {owner + ":" + branch}, "state": {"all"}, "per_page": {"30"}}
	status, err := c.asInstallation(ctx, owner, repo, "/pulls?"+q.Encode(), &got)
	if err != nil {
		return nil, fmt.Errorf("list the pull requests of %s/%s from %s: %w", owner, repo, branch, err)
	}
	if status == 0 {
		return nil, nil
	}
	out := make([]forge.Pull, len(got))
	for i, p := range got {
		out[i] = p.Pull
		out[i].Merged = p.MergedAt != nil
	}
	return out, nil
}

// PullHead returns where pull request n of owner/repo comes from: its head
// branch and the id of the repository that branch is in (a fork's, for
// one from a fork), asking as the App's installation (GET
// /repos/{owner}/{repo}/pulls/{n}). It returns ErrNotFound when there is
// no App, the App is not on the Repo, or there is no such pull request.
func (c *Client) PullHead(ctx context.Context, owner, repo string, n int) (branch string, repoID int64, err error) {
	var got struct {
		Head struct {
			Ref  string `json:"ref"`
			Repo struct {
				ID int64 `json:"id"`
			} `json:"repo"`
		} `json:"head"`
	}
	status, err := c.asInstallation(ctx, owner, repo, "/pulls/"+strconv.Itoa(n), &got)
	if err != nil && status != http.StatusNotFound {
		return "", 0, fmt.Errorf("read pull request %s/%s#%d: %w", owner, repo, n, err)
	}
	if status == 0 || status == http.StatusNotFound {
		return "", 0, fmt.Errorf("pull request %s/%s#%d is not one the GitHub App can see: %w", owner, repo, n, errdefs.ErrNotFound)
	}
	return got.Head.Ref, got.Head.Repo.ID, nil
}

// The permission sets the Hub mints repo tokens with: a Sandbox's, to
// push branches and open pull requests, for a Creator with push permission
// on the Repo; a read-only Creator's Sandbox's, to fetch and read pull
// requests alone; and a host clone's, to read the code alone.
var (
	SandboxPermissions     = map[string]string{"contents": "write", "pull_requests": "write"}
	SandboxReadPermissions = map[string]string{"contents": "read", "pull_requests": "read"}
	ClonePermissions       = map[string]string{"contents": "read"}
)

// accessPermissions are the permission sets of forge's Access.
var accessPermissions = map[forge.Access]map[string]string{
	forge.Clone: ClonePermissions, forge.Read: SandboxReadPermissions, forge.Push: SandboxPermissions}

// SandboxGhPermissions are what a Session's token asks for beyond its
// Access's, for what the git relay forwards from gh: an issue and its
// comments, a pull request's checks, Actions runs (gh issue view, pr
// checks, run view), and commenting on issues for a Creator who may push.
// An App not granted them all still mints the token without them: git
// works, and those calls of gh's are refused by GitHub.
var SandboxGhPermissions = map[forge.Access]map[string]string{
	forge.Read: {"issues": "read", "checks": "read", "actions": "read"},
	forge.Push: {"issues": "write", "checks": "read", "actions": "read"}}

// MintToken is RepoToken with access's permissions, and a Session's gh
// permissions (SandboxGhPermissions) where the App was granted them.
func (c *Client) MintToken(ctx context.Context, owner, repo string, access forge.Access) (forge.Token, error) {
	perms, ok := accessPermissions[access]
	if !ok {
		return forge.Token{}, fmt.Errorf("mint a token with access %d: no such access: %w", access, errdefs.ErrInvalid)
	}
	if extra := SandboxGhPermissions[access]; extra != nil {
		all := maps.Clone(perms)
		maps.Copy(all, extra)
		tok, err := c.RepoToken(ctx, owner, repo, all)
		if !errors.Is(err, errNotGranted) {
			return tok, err
		}
	}
	return c.RepoToken(ctx, owner, repo, perms)
}

// RepoToken mints a fresh installation token restricted to owner/repo with
// exactly perms (GitHub adds metadata read to every token). It is never
// cached: each caller gets its own. It returns ErrNotFound when there is no
// App or it is not installed on the Repo, and ErrUnavailable when GitHub
// could not answer.
func (c *Client) RepoToken(ctx context.Context, owner, repo string, perms map[string]string) (forge.Token, error) {
	if !c.HasApp() {
		return forge.Token{}, fmt.Errorf("no GitHub App is set up (GITHUB_APP_ID): %w", errdefs.ErrNotFound)
	}
	inst, err := c.installation(ctx, owner, repo)
	if err != nil {
		return forge.Token{}, err
	}
	jwt, err := c.appJWT()
	if err != nil {
		return forge.Token{}, err
	}
	body, _ := json.Marshal(map[string]any{"repositories": []string{repo}, "permissions": perms})
	req, err := c.apiRequest(ctx, http.MethodPost, "/app/installations/"+strconv.FormatInt(inst, 10)+"/access_tokens", "Bearer "+jwt,
		strings.NewReader(string(body)))
	if err != nil {
		return forge.Token{}, err
	}
	var got struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	// GitHub refuses (422) permissions the installation was not granted.
	if status, err := c.do(req, &got); status == http.StatusUnprocessableEntity {
		return forge.Token{}, fmt.Errorf("mint a token for %s/%s with %v: %w: %w", owner, repo, perms, errNotGranted, err)
	} else if err != nil {
		return forge.Token{}, fmt.Errorf("mint a token for %s/%s: %w", owner, repo, err)
	}
	if got.Token == "" || got.ExpiresAt.IsZero() {
		return forge.Token{}, fmt.Errorf("mint a token for %s/%s: GitHub's answer has no token or expiry: %w", owner, repo, errdefs.ErrUnavailable)
	}
	return forge.Token{Value: got.Token, Expires: got.ExpiresAt}, nil
}

// RevokeToken ends an installation token at GitHub before its hour is up
// (DELETE /installation/token, which the token itself authenticates). A
// token GitHub no longer takes (401: expired or revoked) is ended already.
func (c *Client) RevokeToken(ctx context.Context, token string) error {
	req, err := c.apiRequest(ctx, http.MethodDelete, "/installation/token", "Bearer "+token, nil)
	if err != nil {
		return err
	}
	status, err := c.do(req, nil)
	if status == http.StatusUnauthorized {
		return nil
	}
	if err != nil {
		return fmt.Errorf("revoke an installation token: %w", err)
	}
	return nil
}

// appJWT is the App's own credential: a JWT signed with its private key,
// good for ten minutes (GitHub's limit), backdated a minute for clock skew.
func (c *Client) appJWT() (string, error) {
	now := time.Now()
	enc := base64.RawURLEncoding
	claims, _ := json.Marshal(map[string]any{"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(9 * time.Minute).Unix(),
		"iss": strconv.FormatInt(c.cfg.AppID, 10)})
	signed := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	h := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(nil, c.cfg.PrivateKey, crypto.SHA256, h[:])
	if err != nil {
		return "", fmt.Errorf("sign the GitHub App's JWT: %w", err)
	}
	return signed + "." + enc.EncodeToString(sig), nil
}

func (c *Client) apiRequest(ctx context.Context, method, path, authz string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.APIURL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", authz)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// maxAnswer bounds what the Hub reads of any GitHub answer.
const maxAnswer = 1 << 20

// do sends req and decodes a 2xx JSON answer into out. It returns the
// status with an error for anything but 2xx: ErrUnavailable when GitHub
// could not answer (network, 5xx, rate limit, a credential it refused), so
// callers never mistake an outage for a no.
func (c *Client) do(req *http.Request, out any) (int, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reach GitHub: %v: %w", err, errdefs.ErrUnavailable)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read GitHub's answer: %v: %w", err, errdefs.ErrUnavailable)
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("GitHub answered %s: %w: %w", resp.Status, refusalOf(body), errdefs.ErrUnavailable)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(body, out); err != nil {
			return resp.StatusCode, fmt.Errorf("GitHub's answer is not the JSON expected: %v: %w", err, errdefs.ErrUnavailable)
		}
	}
	return resp.StatusCode, nil
}

var (
	ownerRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`) })
	repoRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`) })
)

// ParseRepo reads owner and name from a clone URL of a Repo on this GitHub
// (https://HOST/OWNER/NAME(.git), ssh://git@HOST/OWNER/NAME.git or
// git@HOST:OWNER/NAME.git). ok is false for anything else: a Repo elsewhere
// is one nobody has access to through GitHub.
func (c *Client) ParseRepo(repoURL string) (owner, name string, ok bool) {
	web, _ := url.Parse(c.cfg.URL)
	var path string
	if u, err := url.Parse(repoURL); err == nil && u.Scheme != "" && u.Host != "" {
		switch {
		case (u.Scheme == "https" || u.Scheme == "http") && u.Host == web.Host:
		case u.Scheme == "ssh" && u.Hostname() == web.Hostname():
		default:
			return "", "", false
		}
		path = u.Path
	} else {
		// scp-like: git@HOST:OWNER/NAME.git
		userHost, p, found := strings.Cut(repoURL, ":")
		_, host, hasUser := strings.Cut(userHost, "@")
		if !found || !hasUser || strings.Contains(userHost, "/") || host != web.Hostname() {
			return "", "", false
		}
		path = p
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) != 2 {
		return "", "", false
	}
	owner, name = parts[0], strings.TrimSuffix(parts[1], ".git")
	if !ownerRE().MatchString(owner) || !repoRE().MatchString(name) || name == "." || name == ".." {
		return "", "", false
	}
	return strings.ToLower(owner), strings.ToLower(name), true
}

// IssuePermissions are what a token for the Hub's replies in a thread
// may do: write issue and pull request comments, nothing else.
var IssuePermissions = map[string]string{"issues": "write"}

// Comment adds a comment to issue (or pull request) number n of owner/repo
// as the App (POST /repos/{owner}/{repo}/issues/{n}/comments), and returns
// its id. The token it mints for this is revoked once done.
func (c *Client) Comment(ctx context.Context, owner, repo string, n int, body string) (int64, error) {
	var got struct {
		ID int64 `json:"id"`
	}
	err := c.withIssueToken(ctx, owner, repo, http.MethodPost, "/issues/"+strconv.Itoa(n)+"/comments", body, &got)
	if err != nil {
		return 0, fmt.Errorf("comment on %s/%s#%d: %w", owner, repo, n, err)
	}
	return got.ID, nil
}

// EditComment replaces the body of the App's comment id on owner/repo
// (PATCH /repos/{owner}/{repo}/issues/comments/{id}).
func (c *Client) EditComment(ctx context.Context, owner, repo string, id int64, body string) error {
	err := c.withIssueToken(ctx, owner, repo, http.MethodPatch, "/issues/comments/"+strconv.FormatInt(id, 10), body, nil)
	if err != nil {
		return fmt.Errorf("edit comment %d on %s/%s: %w", id, owner, repo, err)
	}
	return nil
}

// withIssueToken sends a comment's body to path under /repos/owner/repo
// with a token minted for it alone, revoked after.
func (c *Client) withIssueToken(ctx context.Context, owner, repo, method, path, body string, out any) error {
	tok, err := c.RepoToken(ctx, owner, repo, IssuePermissions)
	if err != nil {
		return err
	}
	defer c.RevokeToken(context.WithoutCancel(ctx), tok.Value)
	b, _ := json.Marshal(map[string]string{"body": body})
	req, err := c.apiRequest(ctx, method, "/repos/"+owner+"/"+repo+path, "token "+tok.Value, strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	_, err = c.do(req, out)
	return err
}

// AppSlug returns the App's slug, the name people mention it by
// (@SLUG), asked once of GitHub (GET /app) and kept.
func (c *Client) AppSlug(ctx context.Context) (string, error) {
	c.mu.Lock()
	slug := c.slug
	c.mu.Unlock()
	if slug != "" {
		return slug, nil
	}
	if !c.HasApp() {
		return "", fmt.Errorf("no GitHub App is set up (GITHUB_APP_ID): %w", errdefs.ErrNotFound)
	}
	jwt, err := c.appJWT()
	if err != nil {
		return "", err
	}
	req, err := c.apiRequest(ctx, http.MethodGet, "/app", "Bearer "+jwt, nil)
	if err != nil {
		return "", err
	}
	var app struct {
		Slug string `json:"slug"`
	}
	if _, err := c.do(req, &app); err != nil {
		return "", fmt.Errorf("ask GitHub for the App's name: %w", err)
	}
	if app.Slug == "" {
		return "", fmt.Errorf("GitHub's /app answer has no slug: %w", errdefs.ErrUnavailable)
	}
	c.mu.Lock()
	c.slug = app.Slug
	c.mu.Unlock()
	return app.Slug, nil
}

// Refusal is what GitHub said when it refused a request: its message and,
// for a 422, each field's error ("Validation Failed: A pull request
// already exists for acme:fix."), so a person reads GitHub's own reason.
type Refusal struct{ Text string }

func (r *Refusal) Error() string { return strconv.Quote(r.Text) }

// refusalOf reads a refusal's body, in GitHub's error shape: message, and
// errors, each with a message or a field and code.
func refusalOf(body []byte) *Refusal {
	var e struct {
		Message string `json:"message"`
		Errors  []struct {
			Field   string `json:"field"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	json.Unmarshal(body, &e)
	text := e.Message
	for _, fe := range e.Errors {
		switch {
		case fe.Message != "":
			text += ": " + fe.Message
		case fe.Field != "":
			text += ": " + fe.Field + " " + fe.Code
		}
	}
	return &Refusal{text}
}

// PullPermissions are what a token for opening a pull request from the
// Hub may do: that, and nothing else.
var PullPermissions = map[string]string{"pull_requests": "write"}

// NewPull is a pull request to open: from branch Head into Base, a branch
// of the same Repo; Base "" is the Repo's default branch.
type NewPull struct {
	Title, Body, Head, Base string
}

// OpenPull opens a pull request on owner/repo as the App (POST
// /repos/{owner}/{repo}/pulls), on a token minted for it alone and revoked
// after; with no Base, into the Repo's default branch (GET
// /repos/{owner}/{repo}). GitHub's refusal (422: a branch that is not
// there, one open already, no commits between them) is ErrInvalid, in
// GitHub's words; no App on the Repo is ErrNotFound.
func (c *Client) OpenPull(ctx context.Context, owner, repo string, p NewPull) (forge.Pull, error) {
	tok, err := c.RepoToken(ctx, owner, repo, PullPermissions)
	if err != nil {
		return forge.Pull{}, err
	}
	defer c.RevokeToken(context.WithoutCancel(ctx), tok.Value)
	send := func(method, path string, in, out any) (int, error) {
		var body io.Reader
		if in != nil {
			b, _ := json.Marshal(in)
			body = strings.NewReader(string(b))
		}
		req, err := c.apiRequest(ctx, method, "/repos/"+owner+"/"+repo+path, "token "+tok.Value, body)
		if err != nil {
			return 0, err
		}
		return c.do(req, out)
	}
	if p.Base == "" {
		var r struct {
			DefaultBranch string `json:"default_branch"`
		}
		if _, err := send(http.MethodGet, "", nil, &r); err != nil {
			return forge.Pull{}, fmt.Errorf("read %s/%s's default branch: %w", owner, repo, err)
		}
		p.Base = r.DefaultBranch
	}
	var got struct {
		forge.Pull
		MergedAt *time.Time `json:"merged_at"`
	}
	in := map[string]string{"title": p.Title, "body": p.Body, "head": owner + ":" + p.Head, "base": p.Base}
	status, err := send(http.MethodPost, "/pulls", in, &got)
	var r *Refusal
	if status == http.StatusUnprocessableEntity && errors.As(err, &r) {
		return forge.Pull{}, fmt.Errorf("GitHub refused a pull request from %s into %s: %s: %w", p.Head, p.Base, r.Text, errdefs.ErrInvalid)
	}
	if err != nil {
		return forge.Pull{}, fmt.Errorf("open a pull request on %s/%s from %s: %w", owner, repo, p.Head, err)
	}
	got.Pull.Merged = got.MergedAt != nil
	return got.Pull, nil
}
