package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// TestAnAutoFixPromptIsShownAsFromItsSource: a prompt auto-fix queues on
// the Creator's behalf (through triggerSessions, as the webhook does) is
// stored with its source, and the API's queue and the history's prompt
// Event say it is the reviewer's, not the Creator's; the Creator's own
// prompt has no source.
func TestAnAutoFixPromptIsShownAsFromItsSource(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := attachSession(t, f)
	dev, _ := f.store.Members.DevUser(ctx)
	bob := store.PromptSource{Kind: store.SourceReview, Name: "bob"}
	const text = "From GitHub, not from this Session's Creator, but a review by @bob: @bob requested changes on pull request acme/app#2.\n\nTheir review:\nRename Load."
	if err := (triggerSessions{f.hub}).Prompt(ctx, dev, s.ID, text, bob); err != nil {
		t.Fatal(err)
	}
	if code, body := f.call(t, http.MethodPost, "/api/sessions/"+s.ID+"/prompts", `{"text":"and the docs"}`); code != http.StatusCreated {
		t.Fatalf("the Creator's prompt: %d %s", code, body)
	}

	ps, err := f.store.Prompts.List(ctx, s.ID)
	if err != nil || len(ps) != 2 || ps[0].Source != bob || ps[1].Source != (store.PromptSource{}) || ps[0].AuthorID != dev.ID {
		t.Fatalf("the stored prompts: %+v, %v; want the review's from bob on the Creator's behalf, then the Creator's own", ps, err)
	}
	_, view := f.call(t, http.MethodGet, "/api/sessions/"+s.ID, "")
	var sv api.SessionView
	json.Unmarshal([]byte(view), &sv)
	if len(sv.Queue) != 2 || sv.Queue[0].Source == nil || *sv.Queue[0].Source != (api.PromptSource{Kind: "review", Name: "bob"}) || sv.Queue[1].Source != nil {
		t.Fatalf("the API's queue: %s, want the first from bob's review and the second with no source", view)
	}

	// The transcript's prompt, as Claude Code writes it: the history
	// shows whose it is.
	if err := f.hub.sessions.Record(ctx, s.ID, protocol.Event{Kind: protocol.EventPrompt, Text: text}, protocol.Event{Kind: protocol.EventPrompt, Text: "and the docs"}); err != nil {
		t.Fatal(err)
	}
	evs, _ := f.store.Sessions.Events(ctx, s.ID, 0, 100)
	st := &sessionStream{rows: newSessionRows(f.hub), id: s.ID}
	m, ok := st.event(ctx, evs[len(evs)-2])
	if !ok || m.Source == nil || *m.Source != (api.PromptSource{Kind: "review", Name: "bob"}) {
		t.Errorf("the review's prompt Event's message: %+v, want it from bob's review", m)
	}
	if m, ok := st.event(ctx, evs[len(evs)-1]); !ok || m.Source != nil {
		t.Errorf("the Creator's prompt Event's message: %+v, want no source", m)
	}
}
