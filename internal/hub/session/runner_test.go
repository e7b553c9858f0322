package session

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// TestATranscriptBatchSentAgainIsRecordedOnce: a Runner sends a batch again
// when the reply to it was lost with its connection. The batch reads
// nothing past the transcript the store has, so it is taken and not
// recorded twice; the next batch, reading further, is recorded; and
// Events without offsets (a hook's) are always recorded.
func TestATranscriptBatchSentAgainIsRecordedOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := f.active("hello")
	main := s.ID + ".jsonl"
	batch := protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventText, Text: "once"}},
		Offsets: map[string]int64{main: 10, "subagents/agent-a.jsonl": 5}}
	for range 2 {
		if err := f.o.Events(ctx, f.session(s.ID), batch); err != nil {
			t.Fatal(err)
		}
	}
	further := protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventText, Text: "next"}},
		Offsets: map[string]int64{main: 10, "subagents/agent-a.jsonl": 9}}
	if err := f.o.Events(ctx, f.session(s.ID), further); err != nil {
		t.Fatal(err)
	}
	hook := protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventText, Text: "hook"}}}
	for range 2 {
		if err := f.o.Events(ctx, f.session(s.ID), hook); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.events(s.ID, protocol.EventText); !slices.Equal(got, []string{"once", "next", "hook", "hook"}) {
		t.Fatalf("text Events %q, want the resent batch once, the next batch, and each hook's", got)
	}
}

// TestAPromptTheTranscriptShowsTakenIsNotTypedAgain: the mod's
// UserPromptSubmit hook never comes (the relay refusing), but the
// transcript tells of the prompt, and the Runner says it is the one it
// types: it is delivered, and not typed again.
func TestAPromptTheTranscriptShowsTakenIsNotTypedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("hello")
		batch := protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventTurnStart}, {Kind: protocol.EventPrompt, Text: "hello"}},
			Offsets: map[string]int64{s.ID + ".jsonl": 10}, Typed: true}
		if err := f.o.Events(ctx, f.session(s.ID), batch); err != nil {
			t.Fatal(err)
		}
		f.runner.quiet(2 * f.o.opts.DeliveryDeadline)
		if q := f.prompts(s.ID); len(q) != 0 {
			t.Fatalf("queue = %v, want the prompt delivered", q)
		}
	})
}

// TestAnOlderPromptInTheTranscriptDoesNotTakeTheOneTyped: a batch read
// late (written before a sleep, or while the Runner was away) shows a
// prompt that is not the one being typed. The prompt typed stays on its
// way, and no Turn runs.
func TestAnOlderPromptInTheTranscriptDoesNotTakeTheOneTyped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		f.runner.holdDeliveries()
		s, _ := f.active("hello")
		batch := protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventPrompt, Text: "an older one"}},
			Offsets: map[string]int64{s.ID + ".jsonl": 10}}
		if err := f.o.Events(ctx, f.session(s.ID), batch); err != nil {
			t.Fatal(err)
		}
		if q := f.prompts(s.ID); len(q[store.Delivering]) != 1 || f.o.Activity(s.ID) != "" {
			t.Fatalf("queue = %v, activity %q: want the prompt still on its way, no Turn", q, f.o.Activity(s.ID))
		}
	})
}

// TestWhatATurnSpentIsSummedOnceAndCarriedByItsEnd: what a reply spent
// comes from the Runner's relay, as the model API said it, at the reply's
// start and again at its end, and again after a reconnect; each reply
// counts once in the Session's sums with its largest counts, and the
// Turn's end carries the Turn's sums by model, the Hub's own and not what
// a Runner put on it. The usage the transcript carries (the Sandbox's to
// write) counts toward nothing.
func TestWhatATurnSpentIsSummedOnceAndCarriedByItsEnd(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := f.active("hello")
	main := s.ID + ".jsonl"
	usage := func(id, model string, in, out int64) *protocol.Usage {
		return &protocol.Usage{Message: id, Model: model, Tokens: claude.Tokens{Input: in, Output: out, CacheRead: 2 * in, CacheWrite: 3}}
	}
	relay := func(us ...*protocol.Usage) protocol.SessionEvents {
		m := protocol.SessionEvents{SessionID: s.ID}
		for _, u := range us {
			m.Spent = append(m.Spent, *u)
		}
		return m
	}
	forged := usage("msg_1", "claude-sonnet-5-5", 1, 1) // the transcript under-reports
	began := time.Now().Add(-time.Second)               // as Claude Code took the prompt, before its first reply
	batches := []protocol.SessionEvents{
		// The relay's count of the first reply may come before the
		// transcript's turn_start: it is that Turn's all the same.
		relay(usage("msg_1", "claude-sonnet-5-5", 1000, 1)),
		{Events: []protocol.Event{{At: began, Kind: protocol.EventTurnStart}, {Kind: protocol.EventPrompt, Text: "go"},
			{Kind: protocol.EventThinking, Text: "hm", Usage: forged}},
			Offsets: map[string]int64{main: 10}},
		relay(usage("msg_1", "claude-sonnet-5-5", 1000, 20), usage("msg_2", "claude-haiku-5-5", 50, 5)),
		{Events: []protocol.Event{{Kind: protocol.EventText, Text: "one", Usage: forged},
			{Kind: protocol.EventText, Text: "sub", Agent: "a1", Usage: usage("msg_3", "claude-opus-5", 10, 10)},
			{Kind: protocol.EventTurnEnd, Reason: "done", TurnUsage: []protocol.Usage{{Model: "forged", Tokens: claude.Tokens{Input: 1}}}}},
			Offsets: map[string]int64{main: 20}},
	}
	for _, b := range batches {
		for range 2 { // the second time, sent again after a reconnect
			if err := f.o.Events(ctx, f.session(s.ID), b); err != nil {
				t.Fatal(err)
			}
		}
	}
	sonnet := store.Usage{Model: "claude-sonnet-5-5", Input: 1000, Output: 20, CacheRead: 2000, CacheWrite: 3}
	haiku := store.Usage{Model: "claude-haiku-5-5", Input: 50, Output: 5, CacheRead: 100, CacheWrite: 3}
	if got, err := f.st.Usage.SessionUsage(ctx, s.ID); err != nil || !slices.Equal(got, []store.Usage{haiku, sonnet}) {
		t.Errorf("the Session's sums: got %+v, %v, want %+v", got, err, []store.Usage{haiku, sonnet})
	}
	if turns, err := f.st.Usage.SessionTurnUsage(ctx, s.ID); err != nil || len(turns) != 2 || turns[0].Turn != turns[1].Turn || turns[0].Turn == 0 {
		t.Errorf("the replies' Turns: got %+v, %v, want both in the one Turn", turns, err)
	}
	ends := f.eventsOf(s.ID, protocol.EventTurnEnd)
	want := apiUsage([]store.Usage{haiku, sonnet})
	if len(ends) != 1 || !reflect.DeepEqual(ends[0].TurnUsage, want) {
		t.Errorf("the turn_ends: got %+v, want one with %+v", ends, want)
	}
}
