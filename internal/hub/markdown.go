package hub

import (
	"bytes"
	"sync"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"kndl.dev/kndl/internal/protocol"
)

// markdown renders Claude's text for the Session view. Raw HTML is never
// passed through (goldmark leaves it out unless told it is safe, which it
// never is here), every text is escaped, and a link or image to a
// javascript:, vbscript:, file: or data: URL keeps its text but loses its
// address. The page's Content-Security-Policy runs no inline script either
// way.
var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

// renderEvent is an Event's text as HTML, for the kinds that are Markdown.
func renderEvent(ev protocol.Event) string {
	switch ev.Kind {
	case protocol.EventText, protocol.EventThinking:
	default:
		return ""
	}
	var b bytes.Buffer
	if err := markdown.Convert([]byte(ev.Text), &b); err != nil {
		return ""
	}
	return b.String()
}

// renderCache keeps rendered Events by Session and sequence number, so an
// Event is rendered once however many views show it (a view that connects
// renders the history it is sent). Oldest out first.
type renderCache struct {
	mu    sync.Mutex
	m     map[renderKey]string
	order []renderKey
}

type renderKey struct {
	session string
	seq     int64
}

// renderCacheSize bounds the cache: about the last few thousand answers.
const renderCacheSize = 4096

// rendered returns renderEvent(ev) for a stored Event of session.
func (c *renderCache) rendered(session string, ev protocol.Event) string {
	if ev.Kind != protocol.EventText && ev.Kind != protocol.EventThinking {
		return ""
	}
	k := renderKey{session, ev.Seq}
	c.mu.Lock()
	html, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return html
	}
	html = renderEvent(ev)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[renderKey]string{}
	}
	if _, ok := c.m[k]; !ok {
		c.m[k] = html
		c.order = append(c.order, k)
		if len(c.order) > renderCacheSize {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
	}
	return html
}
