package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// storeSize is the bytes the store's data takes, packed: the size of a
// backup of it.
func storeSize(t *testing.T, st *store.Store) int64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "size.db")
	if err := st.Backup(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// dropNotes are the Session's notes of Events dropped.
func (f *fixture) dropNotes(id string) []protocol.Event {
	var out []protocol.Event
	for _, ev := range f.eventsOf(id, protocol.EventNote) {
		if ev.Dropped > 0 {
			out = append(out, ev)
		}
	}
	return out
}

// TestManySmallEventsStoreNoMoreThanTheBudget: 20,000 one-byte Events
// against a 64 KiB budget, a minute passing every hundred so the total is
// what holds, grow the store by about the budget, in rows and in bytes:
// each Event costs its row, not its text alone. The rest are dropped, and
// one note says how many.
func TestManySmallEventsStoreNoMoreThanTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const budget, sent = 64 << 10, 20000
		clock := testenv.NewClock(time.Now())
		f := newFixture(t, func(o *Options) { o.EventsMax, o.Now = budget, clock.Now })
		ctx := context.Background()
		s, _ := f.active("print a lot")
		before, err := f.st.Sessions.EventUse(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		sizeBefore := storeSize(t, f.st)
		for i := 0; i < sent; i += 100 {
			batch := make([]protocol.Event, 100)
			for j := range batch {
				batch[j] = protocol.Event{Kind: protocol.EventText, Text: "x"}
			}
			if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: batch}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Minute)
		}
		after, err := f.st.Sessions.EventUse(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		rows, grown := after.Rows-before.Rows, storeSize(t, f.st)-sizeBefore
		t.Logf("%d one-byte Events against a %d-byte budget: %d rows (%d bytes of data), the store grew %d bytes", sent, budget, rows, after.Bytes-before.Bytes, grown)
		if maxRows := int64(budget / eventRowCost); rows > maxRows {
			t.Errorf("the store holds %d more rows, want at most %d (the budget over a row's cost)", rows, maxRows)
		}
		if grown > budget+budget/8 {
			t.Errorf("the store grew %d bytes, want at most about the budget of %d", grown, budget)
		}
		notes := f.dropNotes(s.ID)
		if len(notes) != 1 {
			t.Fatalf("%d notes of dropped Events, want 1", len(notes))
		}
		if want := sent - (rows - 1); notes[0].Dropped != want || !strings.HasPrefix(notes[0].Text, fmt.Sprint(want)+" of this Session's Events were dropped") {
			t.Errorf("the note says %d dropped (%q), want %d: all sent but the %d stored", notes[0].Dropped, notes[0].Text, want, rows-1)
		}
	})
}

// TestASessionPastItsEventBudgetDropsEventsWithOneNote: past a minute's
// share, what a Runner sends is dropped, not stored, not even summarized;
// one note says how many, kept up to date across batches and a Hub
// restart; and a dropped Event still moves the Session's Turn state.
func TestASessionPastItsEventBudgetDropsEventsWithOneNote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.EventsMax = 32 << 20 }) // 1 MiB a minute
		ctx := context.Background()
		s, _ := f.active("print a lot")
		big := strings.Repeat("x", 300<<10)
		send := func(evs ...protocol.Event) {
			t.Helper()
			if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: evs}); err != nil {
				t.Fatal(err)
			}
		}
		for range 6 {
			send(protocol.Event{Kind: protocol.EventToolResult, ToolID: "t1", Text: big})
		}
		// A reply past the budget is dropped, and what the relay counted of it
		// still counts.
		spent := protocol.Usage{Message: "msg_late", Model: "m", Tokens: claude.Tokens{Input: 9, Output: 4}}
		send(protocol.Event{Kind: protocol.EventText, Text: big, Usage: &spent})
		if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Spent: []protocol.Usage{spent}}); err != nil {
			t.Fatal(err)
		}
		if got, _ := f.st.Usage.SessionUsage(ctx, s.ID); len(got) != 1 || got[0] != (store.Usage{Model: "m", Input: 9, Output: 4}) {
			t.Errorf("the dropped reply's usage: got %+v, want what the relay counted", got)
		}
		results := f.events(s.ID, protocol.EventToolResult)
		if len(results) != 3 {
			t.Fatalf("%d tool results stored, want the 3 that fit the minute's share", len(results))
		}
		for i, r := range results {
			if r != big {
				t.Errorf("result %d stored as %.60q, want it whole", i, r)
			}
		}
		if texts := f.events(s.ID, protocol.EventText); len(texts) != 0 {
			t.Errorf("texts stored past the budget: %.60q, want none", texts)
		}
		notes := f.dropNotes(s.ID)
		if len(notes) != 1 || notes[0].Dropped != 4 {
			t.Fatalf("notes of dropped Events: %+v, want one saying 4", notes)
		}
		// A question dropped still holds the Session as waiting on a person.
		send(protocol.Event{Kind: protocol.EventQuestion, ToolID: "q1", Text: big})
		var asked bool
		f.o.runs.with(s.ID, func(r *run) { asked = r.phase == asking })
		if !asked {
			t.Error("a dropped question left the Session not waiting on its Creator, want the Turn state moved all the same")
		}
		f.restartHub()
		f.o.RunnerBack(ctx, f.runnerID, []string{s.ID})
		f.waitState(s.ID, Active)
		send(protocol.Event{Kind: protocol.EventToolResult, ToolID: "t2", Text: big}, protocol.Event{Kind: protocol.EventToolResult, ToolID: "t3", Text: big},
			protocol.Event{Kind: protocol.EventToolResult, ToolID: "t4", Text: big}, protocol.Event{Kind: protocol.EventToolResult, ToolID: "t5", Text: big})
		notes = f.dropNotes(s.ID)
		if len(notes) != 1 || notes[0].Dropped != 6 {
			t.Fatalf("after a Hub restart and more drops, notes of dropped Events: %+v, want the one, saying 6", notes)
		}
		if n := len(f.events(s.ID, protocol.EventToolResult)); n != 6 {
			t.Errorf("%d tool results stored, want 6: the new minute's three stored, the fourth dropped", n)
		}
	})
}

// TestASessionPastItsTotalEventBudgetDropsWhatComes: a Session whose stored
// Events already fill HUB_SESSION_EVENTS_MAX gets nothing more stored, and
// the note names the setting.
func TestASessionPastItsTotalEventBudgetDropsWhatComes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.EventsMax = 1 << 20 })
		ctx := context.Background()
		s, _ := f.active("print a lot")
		if _, err := f.st.Sessions.AppendEvents(ctx, s.ID, []store.Event{{Kind: protocol.EventText, Data: []byte(`{"kind":"text","text":"` + strings.Repeat("y", 1<<20) + `"}`)}}); err != nil {
			t.Fatal(err)
		}
		f.o.Close()
		f.o = New(f.o.opts) // the budget is read from the store afresh
		t.Cleanup(f.o.Close)
		if err := f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventText, Text: "one more line"}}}); err != nil {
			t.Fatal(err)
		}
		if texts := f.events(s.ID, protocol.EventText); len(texts) != 1 {
			t.Fatalf("%d texts stored, want only the one that filled the budget", len(texts))
		}
		notes := f.dropNotes(s.ID)
		if len(notes) != 1 || notes[0].Dropped != 1 || !strings.Contains(notes[0].Text, "1 MiB in all") || !strings.Contains(notes[0].Text, "HUB_SESSION_EVENTS_MAX") {
			t.Fatalf("notes of dropped Events: %+v, want one saying 1 dropped and naming the budget of 1 MiB and HUB_SESSION_EVENTS_MAX", notes)
		}
	})
}
