package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"kndl.dev/kndl/internal/api"
)

// repoPath is the path of the Repo id, under which its Variables,
// Environment and Installations' switches are.
func repoPath(id string) string { return "/api/repos/" + url.PathEscape(id) }

// AddRepo returns the Hub's Repo for a URL or a path on a Runner's host,
// recording it if the Hub has not seen it yet.
func (c *Client) AddRepo(ctx context.Context, repo string) (api.Repo, error) {
	return call[api.Repo](ctx, c, http.MethodPost, "/api/repos", api.RepoRequest{URL: repo})
}

// SharedVariables lists the Shared variables.
func (c *Client) SharedVariables(ctx context.Context) ([]api.Variable, error) {
	return call[[]api.Variable](ctx, c, http.MethodGet, "/api/variables", nil)
}

// RepoVariables lists a Repo's own Variables and the Shared ones it links.
func (c *Client) RepoVariables(ctx context.Context, repo string) (api.RepoVariables, error) {
	return call[api.RepoVariables](ctx, c, http.MethodGet, repoPath(repo)+"/variables", nil)
}

// variablePath is the path of the Variable name of the Repo repo, or the
// Shared one when repo is "".
func variablePath(repo, name string) string {
	if repo == "" {
		return "/api/variables/" + url.PathEscape(name)
	}
	return repoPath(repo) + "/variables/" + url.PathEscape(name)
}

// SetVariable sets a Repo's Variable, or a Shared one when repo is "".
func (c *Client) SetVariable(ctx context.Context, repo, name string, req api.VariableRequest) (api.Variable, error) {
	return call[api.Variable](ctx, c, http.MethodPut, variablePath(repo, name), req)
}

// DeleteVariable removes a Repo's Variable, or a Shared one when repo is
// "".
func (c *Client) DeleteVariable(ctx context.Context, repo, name string) error {
	return c.Do(ctx, http.MethodDelete, variablePath(repo, name), nil, nil)
}

// LinkVariable makes a Repo use a Shared variable.
func (c *Client) LinkVariable(ctx context.Context, repo, name string) error {
	return c.Do(ctx, http.MethodPut, repoPath(repo)+"/links/"+url.PathEscape(name), nil, nil)
}

// UnlinkVariable stops a Repo using a Shared variable.
func (c *Client) UnlinkVariable(ctx context.Context, repo, name string) error {
	return c.Do(ctx, http.MethodDelete, repoPath(repo)+"/links/"+url.PathEscape(name), nil, nil)
}

// environmentPath is the path of a Repo's Environment.
func environmentPath(repo string) string { return repoPath(repo) + "/environment" }

// Environment shows a Repo's Environment: its current version and draft.
func (c *Client) Environment(ctx context.Context, repo string) (api.Environment, error) {
	return call[api.Environment](ctx, c, http.MethodGet, environmentPath(repo), nil)
}

// EditEnvironment makes settings the Repo's Environment draft.
func (c *Client) EditEnvironment(ctx context.Context, repo string, settings api.EnvironmentSettings) (api.Environment, error) {
	return call[api.Environment](ctx, c, http.MethodPut, environmentPath(repo)+"/draft", settings)
}

// EnvironmentFromDevcontainer makes the Repo's draft from its
// devcontainer.json, as req says.
func (c *Client) EnvironmentFromDevcontainer(ctx context.Context, repo string, req api.FromDevcontainer) (api.Environment, error) {
	return call[api.Environment](ctx, c, http.MethodPost, environmentPath(repo)+"/draft/devcontainer", req)
}

// TestEnvironment starts a Test build of the Repo's draft.
func (c *Client) TestEnvironment(ctx context.Context, repo string) (api.TestBuild, error) {
	return call[api.TestBuild](ctx, c, http.MethodPost, environmentPath(repo)+"/tests", nil)
}

// TestBuild shows a Test build of the Repo's Environment, its log so far.
func (c *Client) TestBuild(ctx context.Context, repo, test string) (api.TestBuild, error) {
	return call[api.TestBuild](ctx, c, http.MethodGet, environmentPath(repo)+"/tests/"+url.PathEscape(test), nil)
}

// ApplyEnvironment makes the Repo's draft its next version.
func (c *Client) ApplyEnvironment(ctx context.Context, repo string) (api.EnvironmentVersion, error) {
	return call[api.EnvironmentVersion](ctx, c, http.MethodPost, environmentPath(repo)+"/apply", nil)
}

// EnvironmentLog lists the Repo's Environment versions.
func (c *Client) EnvironmentLog(ctx context.Context, repo string) ([]api.EnvironmentVersion, error) {
	return call[[]api.EnvironmentVersion](ctx, c, http.MethodGet, environmentPath(repo)+"/log", nil)
}

// AutoFix shows a Repo's auto-fix settings.
func (c *Client) AutoFix(ctx context.Context, repo string) (api.AutoFix, error) {
	return call[api.AutoFix](ctx, c, http.MethodGet, repoPath(repo)+"/auto-fix", nil)
}

// TriggerLabel returns the Repo's trigger label; "" is none.
func (c *Client) TriggerLabel(ctx context.Context, repo string) (string, error) {
	l, err := call[api.TriggerLabel](ctx, c, http.MethodGet, repoPath(repo)+"/trigger-label", nil)
	return l.Label, err
}

// SetTriggerLabel sets the Repo's trigger label; "" turns it off.
func (c *Client) SetTriggerLabel(ctx context.Context, repo, label string) (string, error) {
	l, err := call[api.TriggerLabel](ctx, c, http.MethodPut, repoPath(repo)+"/trigger-label", api.TriggerLabel{Label: label})
	return l.Label, err
}

// EditAutoFix changes the auto-fix settings change says of a Repo.
func (c *Client) EditAutoFix(ctx context.Context, repo string, change api.AutoFixChange) (api.AutoFix, error) {
	return call[api.AutoFix](ctx, c, http.MethodPatch, repoPath(repo)+"/auto-fix", change)
}

// RepoLimits returns the limits the Repo's Sessions started from GitHub
// run under.
func (c *Client) RepoLimits(ctx context.Context, repo string) (api.RepoLimits, error) {
	return call[api.RepoLimits](ctx, c, http.MethodGet, repoPath(repo)+"/limits", nil)
}

// ChangeRepoLimits sets the limits change gives, keeping the others.
func (c *Client) ChangeRepoLimits(ctx context.Context, repo string, change api.RepoLimitsChange) (api.RepoLimits, error) {
	return call[api.RepoLimits](ctx, c, http.MethodPatch, repoPath(repo)+"/limits", change)
}
