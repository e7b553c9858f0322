package hub

import (
	"context"
	"encoding/json"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/hub/triggers"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// sessionStream is what a socket has sent of one Session's live stream, so
// both Session sockets (/watch and /live) send it in one shape: each Event
// once, in order, after a sequence number, and the Session with its queue
// only when it changed.
type sessionStream struct {
	rows  sessionRows
	md    *renderCache // renders Claude's Markdown, for the Session view; nil for none
	id    string
	after int64              // the last Event's sequence number sent
	last  string             // the Session as last sent, as JSON
	state store.SessionState // its state as last sent
}

// event returns the message for a stored Event, or false for one already
// sent.
func (st *sessionStream) event(ctx context.Context, e store.Event) (api.LiveMessage, bool) {
	if e.Seq <= st.after {
		return api.LiveMessage{}, false
	}
	st.after = e.Seq
	ev, ok := decodeEvent(e)
	if !ok {
		return api.LiveMessage{}, false
	}
	m := api.LiveMessage{Type: "event", Event: &ev}
	if ev.Kind == protocol.EventPrompt {
		m.Attachments = st.attachments(ctx, ev.Text)
		if src, ok := triggers.SourceOf(ev.Text); ok {
			m.Source = &api.PromptSource{Kind: src.Kind, Name: src.Name}
		}
	}
	if len(ev.TurnUsage) > 0 {
		spent := api.SpentOf(ev.TurnUsage)
		m.Spent = &spent
	}
	if st.md != nil {
		m.HTML = st.md.rendered(st.id, ev)
	}
	return m, true
}

// attachments are the files a prompt's text says it carried
// (protocol.AttachedLine).
func (st *sessionStream) attachments(ctx context.Context, text string) []api.Attachment {
	id, ok := protocol.AttachedPrompt(text)
	if !ok {
		return nil
	}
	as, err := st.rows.store.Prompts.PromptAttachments(ctx, st.id, id)
	if err != nil || len(as) == 0 {
		return nil
	}
	return apiAll(as, apiAttachment)
}

// decodeEvent is a stored Event as the API shows it: decoded, numbered.
func decodeEvent(e store.Event) (api.Event, bool) {
	var ev api.Event
	if json.Unmarshal(e.Data, &ev) != nil {
		return ev, false
	}
	ev.Seq = e.Seq
	return ev, true
}

// replay sends the stored Events after the last sent, page by page; it
// reports false when send did.
func (st *sessionStream) replay(ctx context.Context, send func(store.Event) bool) bool {
	for {
		evs, err := st.rows.store.Sessions.Events(ctx, st.id, st.after, eventPage)
		if err != nil {
			return false
		}
		for _, e := range evs {
			if !send(e) {
				return false
			}
		}
		if len(evs) < eventPage {
			return true
		}
	}
}

// session reads the Session and returns its message if it changed since
// last sent, the Session read, and whether its state moved.
func (st *sessionStream) session(ctx context.Context) (m api.LiveMessage, cur store.Session, moved, ok bool) {
	cur, err := st.rows.store.Sessions.SessionByID(ctx, st.id)
	if err != nil {
		return m, cur, false, false
	}
	m, moved, ok = st.sessionAs(ctx, cur)
	return m, cur, moved, ok
}

// sessionAs is session with the Session as the caller read it: a socket's
// first message is the Session its access check read, subscribed to
// before that read so that no change falls between.
func (st *sessionStream) sessionAs(ctx context.Context, cur store.Session) (m api.LiveMessage, moved, ok bool) {
	q, err := st.rows.sessions.Queue(ctx, st.id)
	if err != nil {
		return m, false, false
	}
	if q == nil {
		q = []store.Prompt{}
	}
	sv, err := st.rows.view(ctx, cur, q)
	if err != nil {
		return m, false, false
	}
	b, _ := json.Marshal(sv)
	if string(b) == st.last {
		return m, false, false
	}
	st.last = string(b)
	moved, st.state = cur.State != st.state, cur.State
	return api.LiveMessage{Type: "session", Session: &sv}, moved, true
}
