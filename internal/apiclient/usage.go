package apiclient

import (
	"context"
	"fmt"
	"net/http"

	"kndl.dev/kndl/internal/api"
)

// SessionUsage is what a Session spent, in all and by Turn.
func (c *Client) SessionUsage(ctx context.Context, id string) (api.SessionUsage, error) {
	return call[api.SessionUsage](ctx, c, http.MethodGet, sessionPath(id)+"/usage", nil)
}

// Usage is what Sessions spent over the last days, by day, Member and
// Repo: the caller's own, or with all everyone's (the Owner's alone).
func (c *Client) Usage(ctx context.Context, days int, all bool) (api.UsageReport, error) {
	path := fmt.Sprintf("/api/usage?days=%d", days)
	if all {
		path += "&all=1"
	}
	return call[api.UsageReport](ctx, c, http.MethodGet, path, nil)
}
