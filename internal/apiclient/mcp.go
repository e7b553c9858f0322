package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"kndl.dev/kndl/internal/api"
)

// AddMCPServer adds a remote MCP server behind the Hub's Gateway.
func (c *Client) AddMCPServer(ctx context.Context, m api.MCPServer) (api.MCPServer, error) {
	return call[api.MCPServer](ctx, c, http.MethodPost, "/api/mcp/servers", m)
}

// EditMCPServer changes an MCP server; with dryRun it only says whose
// values the edit would clear.
func (c *Client) EditMCPServer(ctx context.Context, m api.MCPServer, dryRun bool) (api.MCPServerEdit, error) {
	path := "/api/mcp/servers/" + url.PathEscape(m.ID)
	if dryRun {
		path += "?dry_run=1"
	}
	return call[api.MCPServerEdit](ctx, c, http.MethodPut, path, m)
}

// MCPServers lists the MCP servers.
func (c *Client) MCPServers(ctx context.Context) ([]api.MCPServer, error) {
	return call[[]api.MCPServer](ctx, c, http.MethodGet, "/api/mcp/servers", nil)
}

// Install makes an Installation of an MCP server.
func (c *Client) Install(ctx context.Context, req api.InstallationRequest) (api.Installation, error) {
	return call[api.Installation](ctx, c, http.MethodPost, "/api/mcp/installations", req)
}

// Installations lists the Installations; with a Repo's id, each says
// whether it is on there.
func (c *Client) Installations(ctx context.Context, repo string) ([]api.Installation, error) {
	path := "/api/mcp/installations"
	if repo != "" {
		path += "?repo=" + url.QueryEscape(repo)
	}
	return call[[]api.Installation](ctx, c, http.MethodGet, path, nil)
}

// installationPath is the path of the Installation id.
func installationPath(id string) string { return "/api/mcp/installations/" + url.PathEscape(id) }

// SetInstallationRepos sets the Repos (their ids) an Installation is on in.
func (c *Client) SetInstallationRepos(ctx context.Context, id string, repos []string) (api.Installation, error) {
	return call[api.Installation](ctx, c, http.MethodPut, installationPath(id)+"/repos", api.InstallationRepos{Repos: repos})
}

// SetInstallationSecret sets an Installation's value of a header secret.
func (c *Client) SetInstallationSecret(ctx context.Context, id, key, value string) (api.Installation, error) {
	return call[api.Installation](ctx, c, http.MethodPut, installationPath(id)+"/secrets/"+url.PathEscape(key), api.SecretValue{Value: value})
}

// ConnectInstallation begins connecting an OAuth Installation to an
// account: the answer's URL is opened in the browser signed in to the Hub.
func (c *Client) ConnectInstallation(ctx context.Context, id string) (api.OAuthConnect, error) {
	return call[api.OAuthConnect](ctx, c, http.MethodPost, installationPath(id)+"/connect", nil)
}

// DisconnectInstallation drops an OAuth Installation's tokens.
func (c *Client) DisconnectInstallation(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, installationPath(id)+"/connect", nil, nil)
}

// SetInstallationClient enters the OAuth client an authorization server
// without Dynamic Client Registration gave.
func (c *Client) SetInstallationClient(ctx context.Context, id string, req api.OAuthClient) (api.OAuthClientBound, error) {
	return call[api.OAuthClientBound](ctx, c, http.MethodPut, installationPath(id)+"/client", req)
}

// TurnInstallation turns an Installation off for a Repo, or back on.
func (c *Client) TurnInstallation(ctx context.Context, repo, id string, off bool) (api.Installation, error) {
	method := http.MethodDelete
	if off {
		method = http.MethodPut
	}
	return call[api.Installation](ctx, c, method, repoPath(repo)+"/mcp/"+url.PathEscape(id)+"/off", nil)
}

// InstallationLog lists a Repo's Installation changes.
func (c *Client) InstallationLog(ctx context.Context, repo string) ([]api.InstallationChange, error) {
	return call[[]api.InstallationChange](ctx, c, http.MethodGet, repoPath(repo)+"/mcp/log", nil)
}
