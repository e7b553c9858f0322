package apiclient

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/claude"
)

// call sends one JSON request and decodes the answer as a T.
func call[T any](ctx context.Context, c *Client, method, path string, in any) (T, error) {
	var out T
	err := c.Do(ctx, method, path, in, &out)
	return out, err
}

// sessionPath is the path of the Session id, under which its calls are.
func sessionPath(id string) string { return "/api/sessions/" + url.PathEscape(id) }

// NewSession starts a Session with its first prompt.
func (c *Client) NewSession(ctx context.Context, req api.NewSession) (api.SessionView, error) {
	return call[api.SessionView](ctx, c, http.MethodPost, "/api/sessions", req)
}

// Models is the models the caller's Sessions may run: what every
// connected Runner they may use takes.
func (c *Client) Models(ctx context.Context) (claude.Table, error) {
	return call[claude.Table](ctx, c, http.MethodGet, "/api/models", nil)
}

// Sessions lists the Sessions the caller sees that f keeps.
func (c *Client) Sessions(ctx context.Context, f api.SessionFilter) ([]api.Session, error) {
	path := "/api/sessions"
	if q := f.Query(); len(q) > 0 {
		path += "?" + q.Encode()
	}
	return call[[]api.Session](ctx, c, http.MethodGet, path, nil)
}

// Session shows one Session, with its queue.
func (c *Client) Session(ctx context.Context, id string) (api.SessionView, error) {
	return call[api.SessionView](ctx, c, http.MethodGet, sessionPath(id), nil)
}

// Events lists a Session's Events, its transcript.
func (c *Client) Events(ctx context.Context, id string) ([]api.Event, error) {
	return call[[]api.Event](ctx, c, http.MethodGet, sessionPath(id)+"/events", nil)
}

// UpdateSession renames a Session or changes its model and effort.
func (c *Client) UpdateSession(ctx context.Context, id string, req api.SessionUpdate) (api.SessionView, error) {
	return call[api.SessionView](ctx, c, http.MethodPatch, sessionPath(id), req)
}

// SessionAction is one of the changes of a Session's life the Hub takes
// as a POST to its path under the Session.
type SessionAction string

// The Session's actions.
const (
	StopTurn SessionAction = "stop-turn"
	Sleep    SessionAction = "sleep"
	Wake     SessionAction = "wake"
	Restart  SessionAction = "restart"
	Archive  SessionAction = "archive"
	Restore  SessionAction = "restore"
)

// Act asks the Hub to do action to a Session.
func (c *Client) Act(ctx context.Context, id string, action SessionAction) error {
	return c.Do(ctx, http.MethodPost, sessionPath(id)+"/"+string(action), nil, nil)
}

// KeepAwake sets a Session's Keep awake switch.
func (c *Client) KeepAwake(ctx context.Context, id string, on bool) error {
	return c.Do(ctx, http.MethodPut, sessionPath(id)+"/keep-awake", api.Switch{On: &on}, nil)
}

// ThreadContext sets whether others' comments on a Session's issue or pull
// request show in its history as context.
func (c *Client) ThreadContext(ctx context.Context, id string, on bool) error {
	return c.Do(ctx, http.MethodPut, sessionPath(id)+"/thread-context", api.Switch{On: &on}, nil)
}

// QueuePrompt queues a prompt on a Session.
func (c *Client) QueuePrompt(ctx context.Context, id string, req api.PromptRequest) (api.Prompt, error) {
	return call[api.Prompt](ctx, c, http.MethodPost, sessionPath(id)+"/prompts", req)
}

// promptPath is the path of a Session's queued prompt.
func promptPath(id, prompt string) string {
	return sessionPath(id) + "/prompts/" + url.PathEscape(prompt)
}

// EditPrompt changes a queued prompt's text.
func (c *Client) EditPrompt(ctx context.Context, id, prompt string, req api.PromptRequest) error {
	return c.Do(ctx, http.MethodPatch, promptPath(id, prompt), req, nil)
}

// MovePrompt moves a queued prompt to another place in its queue.
func (c *Client) MovePrompt(ctx context.Context, id, prompt string, req api.PromptMove) error {
	return c.Do(ctx, http.MethodPost, promptPath(id, prompt)+"/move", req, nil)
}

// CancelPrompt cancels a queued prompt.
func (c *Client) CancelPrompt(ctx context.Context, id, prompt string) error {
	return c.Do(ctx, http.MethodDelete, promptPath(id, prompt), nil, nil)
}

// Answer answers the question Claude asks in a Session.
func (c *Client) Answer(ctx context.Context, id string, req api.Answer) error {
	return c.Do(ctx, http.MethodPost, sessionPath(id)+"/answer", req, nil)
}

// StopSubagent asks one of a Session's subagents to stop.
func (c *Client) StopSubagent(ctx context.Context, id, agent string) error {
	return c.Do(ctx, http.MethodPost, sessionPath(id)+"/subagents/"+url.PathEscape(agent)+"/stop", nil, nil)
}

// Attach uploads size bytes of body to a Session as the file name, for a
// prompt to carry.
func (c *Client) Attach(ctx context.Context, id, name string, body io.Reader, size int64) (api.Attachment, error) {
	var a api.Attachment
	err := c.Upload(ctx, sessionPath(id)+"/attachments?name="+url.QueryEscape(name), body, size, &a)
	return a, err
}

// Attachments lists the files attached to a Session's prompts.
func (c *Client) Attachments(ctx context.Context, id string) ([]api.Attachment, error) {
	return call[[]api.Attachment](ctx, c, http.MethodGet, sessionPath(id)+"/attachments", nil)
}

// DownloadAttachment copies one of a Session's attachments to w.
func (c *Client) DownloadAttachment(ctx context.Context, id, attachment string, w io.Writer) error {
	return c.Download(ctx, sessionPath(id)+"/attachments/"+url.PathEscape(attachment), w)
}

// Changes is a Session's Workspace's changes against the branch it
// started from, masked, as its Runner computes them.
func (c *Client) Changes(ctx context.Context, id string) (api.Changes, error) {
	return call[api.Changes](ctx, c, http.MethodGet, sessionPath(id)+"/changes", nil)
}
