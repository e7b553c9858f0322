package apiclient

import (
	"context"
	"net/http"

	"kndl.dev/kndl/internal/api"
)

// Fork forks a Session: a new one from a copy of it as it was at the end
// of a Turn (kndl fork).
func (c *Client) Fork(ctx context.Context, id string, req api.NewFork) (api.Fork, error) {
	return call[api.Fork](ctx, c, http.MethodPost, sessionPath(id)+"/fork", req)
}

// Forks says what a Session was forked from and lists its forks.
func (c *Client) Forks(ctx context.Context, id string) (api.Forks, error) {
	return call[api.Forks](ctx, c, http.MethodGet, sessionPath(id)+"/forks", nil)
}
