package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"kndl.dev/kndl/internal/api"
)

// NewAttempts starts an attempt set: one prompt as several Sessions.
func (c *Client) NewAttempts(ctx context.Context, req api.NewAttempts) (api.AttemptSet, error) {
	return call[api.AttemptSet](ctx, c, http.MethodPost, "/api/attempts", req)
}

// Attempts is an attempt set, its attempts ranked best first.
func (c *Client) Attempts(ctx context.Context, id string) (api.AttemptSet, error) {
	return call[api.AttemptSet](ctx, c, http.MethodGet, "/api/attempts/"+url.PathEscape(id), nil)
}

// KeepAttempt keeps one attempt of a set; the others sleep or are archived.
func (c *Client) KeepAttempt(ctx context.Context, id string, req api.KeepAttempt) (api.AttemptSet, error) {
	return call[api.AttemptSet](ctx, c, http.MethodPost, "/api/attempts/"+url.PathEscape(id)+"/keep", req)
}
