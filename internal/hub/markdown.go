package hub

import (
	"bytes"

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
