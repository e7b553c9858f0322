package session

import (
	"context"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// TestASessionPastItsEventBudgetIsSummarized: past a minute's share, and
// past the total, what a Runner sends is stored as a line saying how much
// was dropped, the history says so once, and the store stays bounded.
func TestASessionPastItsEventBudgetIsSummarized(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.EventsMax = 32 << 20 }) // 1 MiB a minute
	ctx := context.Background()
	s, _ := f.active("print a lot")
	big := strings.Repeat("x", 300<<10)
	for range 6 {
		if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventToolResult, ToolID: "t1", Text: big}}}); err != nil {
			t.Fatal(err)
		}
	}
	// A reply past the budget is summarized, and what the relay counted
	// of it still counts.
	spent := protocol.Usage{Message: "msg_late", Model: "m", Tokens: claude.Tokens{Input: 9, Output: 4}}
	if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventText, Text: big, Usage: &spent}}}); err != nil {
		t.Fatal(err)
	}
	if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Spent: []protocol.Usage{spent}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.st.SessionUsage(ctx, s.ID); len(got) != 1 || got[0] != (store.Usage{Model: "m", Input: 9, Output: 4}) {
		t.Errorf("the summarized reply's usage: got %+v, want it counted", got)
	}
	results := f.events(s.ID, protocol.EventToolResult)
	if len(results) != 6 {
		t.Fatalf("%d tool results, want 6", len(results))
	}
	for i, r := range results {
		if kept := r == big; kept != (i < 3) {
			t.Errorf("result %d kept %v, want the first three whole and the rest summarized", i, kept)
		}
	}
	if want := "[307202 bytes of tool output dropped: the Session is over its Event budget]"; results[5] != want { // text and tool id
		t.Fatalf("a dropped result reads %q, want %q", results[5], want)
	}
	notes := strings.Join(f.events(s.ID, protocol.EventNote), "\n")
	if strings.Count(notes, "within a minute") != 1 {
		t.Fatalf("history:\n%s\nwant the overrun said once", notes)
	}
	if n, _ := f.st.EventBytes(ctx, s.ID); n > 2<<20 {
		t.Fatalf("the store holds %d bytes of Events, want at most about a minute's budget", n)
	}
}

// TestASessionPastItsTotalEventBudgetIsSummarized: a Session whose stored
// Events already fill HUB_SESSION_EVENTS_MAX gets no more text stored.
func TestASessionPastItsTotalEventBudgetIsSummarized(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.EventsMax = 1 << 20 })
	ctx := context.Background()
	s, _ := f.active("print a lot")
	if _, err := f.st.AppendEvents(ctx, s.ID, []store.Event{{Kind: protocol.EventText, Data: []byte(`{"text":"` + strings.Repeat("y", 1<<20) + `"}`)}}); err != nil {
		t.Fatal(err)
	}
	f.o.Close()
	f.o = New(f.o.opts) // the budget is read from the store afresh
	t.Cleanup(f.o.Close)
	if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventText, Text: "one more line"}}}); err != nil {
		t.Fatal(err)
	}
	texts := f.events(s.ID, protocol.EventText)
	if last := texts[len(texts)-1]; !strings.Contains(last, "dropped") {
		t.Fatalf("past the total, the text stored is %q", last)
	}
	if notes := strings.Join(f.events(s.ID, protocol.EventNote), "\n"); !strings.Contains(notes, "HUB_SESSION_EVENTS_MAX") {
		t.Fatalf("history:\n%s\nwant the total budget named", notes)
	}
}
