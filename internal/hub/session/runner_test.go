package session

import (
	"context"
	"slices"
	"testing"

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
}

// TestAnOlderPromptInTheTranscriptDoesNotTakeTheOneTyped: a batch read
// late (written before a sleep, or while the Runner was away) shows a
// prompt that is not the one being typed. The prompt typed stays on its
// way, and no Turn runs.
func TestAnOlderPromptInTheTranscriptDoesNotTakeTheOneTyped(t *testing.T) {
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
}
