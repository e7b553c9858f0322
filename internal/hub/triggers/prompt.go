package triggers

import (
	"fmt"
	"strings"

	"kndl.dev/kndl/internal/api"
)

// firstPrompt is a triggered Session's first prompt: the issue's title and
// body and what triggered it, marked as from GitHub with its author and
// link, cut to fit a prompt (the issue's body first, then the comment).
func firstPrompt(th thread, who ghUser, said, link string) string {
	head := fmt.Sprintf("From GitHub: @%s on %s#%d (%s).\n\nThe issue's title: %s\n\nThe issue's body:\n", who.Login, th.repo(), th.issue.Number, link, th.issue.Title)
	tail := "\n\n@" + who.Login + "'s comment:\n"
	room := api.MaxPromptBytes - len(head) - len(tail)
	said = cut(said, room/2)
	body := cut(th.issue.Body, room-len(said))
	return head + body + tail + said
}

// laterPrompt is a later comment by the Creator, as a prompt to their
// Session, marked as firstPrompt's is.
func laterPrompt(th thread, c ghComment) string {
	head := fmt.Sprintf("From GitHub: @%s on %s#%d (%s):\n\n", c.User.Login, th.repo(), th.issue.Number, c.HTMLURL)
	return head + cut(c.Body, api.MaxPromptBytes-len(head))
}

// cut shortens s to at most n bytes on a character boundary, saying so
// within the n.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const note = "\n[… cut here: the rest is on GitHub]"
	if n < len(note) {
		return ""
	}
	// A character split by the cut is dropped.
	return strings.ToValidUTF8(s[:n-len(note)], "") + note
}
