package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
)

// Watch is one WebSocket following a Session's Events.
type Watch struct {
	ws *websocket.Conn
}

// Watch follows a Session's Events after the sequence number after. A
// socket the Hub refuses is the Hub's sentence for why, as an *Error.
func (c *Client) Watch(ctx context.Context, id string, after int64) (*Watch, error) {
	return c.follow(ctx, id, "watch", after)
}

// Live follows a Session as its view in a browser does (/live: Events
// with their Markdown rendered, the Session as it changes), after the
// sequence number after.
func (c *Client) Live(ctx context.Context, id string, after int64) (*Watch, error) {
	return c.follow(ctx, id, "live", after)
}

func (c *Client) follow(ctx context.Context, id, socket string, after int64) (*Watch, error) {
	u := strings.Replace(c.BaseURL, "http", "ws", 1) + sessionPath(id) + fmt.Sprintf("/%s?after=%d", socket, after)
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + c.Token}}})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			// The socket's refusal carries no sentence: ask the API once
			// more for the one that says why.
			if _, aerr := c.Session(ctx, id); aerr != nil {
				return nil, aerr
			}
		}
		return nil, err
	}
	ws.SetReadLimit(protocol.MaxFrameBytes)
	return &Watch{ws: ws}, nil
}

// Next reads the next message: an Event, or the Session as it changes.
func (w *Watch) Next(ctx context.Context) (api.LiveMessage, error) {
	var m api.LiveMessage
	_, b, err := w.ws.Read(ctx)
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

// Close drops the socket.
func (w *Watch) Close() error { return w.ws.CloseNow() }
