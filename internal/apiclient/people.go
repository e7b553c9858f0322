package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"kndl.dev/kndl/internal/api"
)

// SetClaudeToken stores the caller's Claude setup token on the Hub.
func (c *Client) SetClaudeToken(ctx context.Context, token string) error {
	return c.Do(ctx, http.MethodPut, "/api/account/claude-token", api.ClaudeToken{Token: token}, nil)
}

// Members lists the Hub's Members.
func (c *Client) Members(ctx context.Context) ([]api.User, error) {
	return call[[]api.User](ctx, c, http.MethodGet, "/api/members", nil)
}

// RemoveMember removes a Member by id, signing them out everywhere.
func (c *Client) RemoveMember(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/api/members/"+url.PathEscape(id), nil, nil)
}

// Invite invites someone; the answer's link is shown only this once.
func (c *Client) Invite(ctx context.Context, req api.InviteRequest) (api.InviteCreated, error) {
	return call[api.InviteCreated](ctx, c, http.MethodPost, "/api/invites", req)
}

// Invites lists the Invites.
func (c *Client) Invites(ctx context.Context) ([]api.Invite, error) {
	return call[[]api.Invite](ctx, c, http.MethodGet, "/api/invites", nil)
}

// RevokeInvite revokes an unused Invite.
func (c *Client) RevokeInvite(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/api/invites/"+url.PathEscape(id), nil, nil)
}

// Runners lists the paired Runners.
func (c *Client) Runners(ctx context.Context) ([]api.RunnerStatus, error) {
	return call[[]api.RunnerStatus](ctx, c, http.MethodGet, "/api/runners", nil)
}

// Account is who the CLI token signs in as.
func (c *Client) Account(ctx context.Context) (api.Account, error) {
	return call[api.Account](ctx, c, http.MethodGet, "/api/account", nil)
}

// PairRunner pairs a new Runner: its token is in the answer, once.
func (c *Client) PairRunner(ctx context.Context, name string) (api.CreatedRunner, error) {
	return call[api.CreatedRunner](ctx, c, http.MethodPost, "/api/runners", api.RunnerRequest{Name: name})
}

// RevokeRunner revokes a Runner's token and disconnects it.
func (c *Client) RevokeRunner(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/api/runners/"+url.PathEscape(id), nil, nil)
}

// ShareRunner shares a Runner with every Member, or keeps it to the Member
// who paired it.
func (c *Client) ShareRunner(ctx context.Context, id string, shared bool) error {
	return c.Do(ctx, http.MethodPut, "/api/runners/"+url.PathEscape(id)+"/shared", api.RunnerShare{Shared: &shared}, nil)
}

// Audit lists at most limit entries of the Hub's audit log, newest first,
// those numbered below before when it is above 0.
func (c *Client) Audit(ctx context.Context, before int64, limit int) ([]api.AuditEntry, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	return call[[]api.AuditEntry](ctx, c, http.MethodGet, "/api/audit?"+q.Encode(), nil)
}

// VerifyAudit walks the audit log's hash chain and says where it first
// breaks.
func (c *Client) VerifyAudit(ctx context.Context) (api.AuditChain, error) {
	return call[api.AuditChain](ctx, c, http.MethodGet, "/api/audit/verify", nil)
}

// Notification webhooks.

// Webhooks lists the caller's notification webhooks.
func (c *Client) Webhooks(ctx context.Context) ([]api.NotifyWebhook, error) {
	return call[[]api.NotifyWebhook](ctx, c, http.MethodGet, "/api/account/webhooks", nil)
}

// AddWebhook adds a notification webhook; the answer's secret is shown
// only this once.
func (c *Client) AddWebhook(ctx context.Context, req api.NotifyWebhookRequest) (api.NotifyWebhookCreated, error) {
	return call[api.NotifyWebhookCreated](ctx, c, http.MethodPost, "/api/account/webhooks", req)
}

// EditWebhook points a notification webhook elsewhere or changes its
// format; a webhook the Hub stopped posts again.
func (c *Client) EditWebhook(ctx context.Context, id string, req api.NotifyWebhookRequest) (api.NotifyWebhook, error) {
	return call[api.NotifyWebhook](ctx, c, http.MethodPut, "/api/account/webhooks/"+url.PathEscape(id), req)
}

// RemoveWebhook removes a notification webhook.
func (c *Client) RemoveWebhook(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/api/account/webhooks/"+url.PathEscape(id), nil, nil)
}
