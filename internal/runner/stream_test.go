package runner

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
)

// sent returns the session.events messages in the outbox, in order (the
// tests' Runners have one Session).
func (r *Runner) sent() []protocol.SessionEvents {
	r.out.mu.Lock()
	defer r.out.mu.Unlock()
	var out []protocol.SessionEvents
	for _, l := range r.out.lanes {
		for _, m := range l.queue {
			if m.typ == protocol.TypeSessionEvents {
				out = append(out, m.body.(protocol.SessionEvents))
			}
		}
	}
	return out
}

func kinds(m protocol.SessionEvents) []string {
	var out []string
	for _, e := range m.Events {
		out = append(out, e.Kind)
	}
	return out
}

// TestHooksAndTheTranscriptMergeIntoOneOrderedStream: a hook's Events go
// right after the transcript's next batch, in the same message, except a
// subagent's start, which waits for the batch with its Agent call; a hook's
// Turn signal goes at once; held Events go alone after holdMax.
func TestHooksAndTheTranscriptMergeIntoOneOrderedStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &Runner{sessions: map[string]*session{}, log: slog.New(slog.DiscardHandler)}
		s := r.newSession("s1")
		r.sessions["s1"] = s
		for _, ev := range []string{
			`{"hook_event_name":"UserPromptSubmit","prompt":"hi"}`,
			launched("toolu_a", "a1"), // its parent known: the start is held at once
			`{"hook_event_name":"SubagentStart","agent_id":"a1","agent_type":"Explore"}`,
			`{"hook_event_name":"Notification","message":"waiting"}`,
		} {
			if _, err := r.hook(context.Background(), "s1", []byte(ev)); err != nil {
				t.Fatal(err)
			}
		}
		// The subagent's transcript read before the main one has the call.
		s.transcript([]protocol.Event{{Kind: protocol.EventToolUse, Tool: "Bash", Agent: "a1"}}, map[string]int64{"agent-a1.jsonl": 5})
		s.transcript([]protocol.Event{{Kind: protocol.EventTurnStart}, {Kind: protocol.EventToolUse, Tool: "Agent", ToolID: "toolu_a"}}, map[string]int64{"s1.jsonl": 10})
		got := r.sent()
		if len(got) != 3 || got[0].Hook != protocol.HookPromptSubmit || len(got[0].Events) != 0 {
			t.Fatalf("sent %+v, want the prompt's signal at once, then two batches", got)
		}
		if k := kinds(got[1]); len(k) != 2 || k[1] != protocol.EventNotification || got[1].Offsets["agent-a1.jsonl"] != 5 {
			t.Fatalf("first batch = %v %v, want the notification after the subagent's call, the start still held", k, got[1].Offsets)
		}
		if k := kinds(got[2]); len(k) != 3 || k[1] != protocol.EventToolUse || k[2] != protocol.EventSubagentStart || got[2].Events[2].Parent != "toolu_a" {
			t.Fatalf("second batch = %v, want the start right after its Agent call", k)
		}

		// Nothing from the transcript: what is held goes alone after holdMax.
		r.hook(context.Background(), "s1", []byte(`{"hook_event_name":"StopFailure","last_assistant_message":"overloaded"}`))
		testenv.Eventually(t, 2*holdMax, "the held Events go alone", func() bool { return len(r.sent()) == 5 })
		got = r.sent()
		if got[3].Hook != protocol.HookStop || len(got[4].Events) != 2 || got[4].Events[0].Text != "The model API failed: overloaded" {
			t.Fatalf("sent %+v, want the Turn's end at once, then the error and turn_end", got[3:])
		}
		for _, e := range got[4].Events {
			if e.At.IsZero() {
				t.Fatalf("a held Event without its time: %+v", e)
			}
		}
	})
}

// TestABatchIsTypedOnlyWhenItShowsThePromptBeingTyped: a transcript batch
// tells the Hub Claude Code took the prompt being typed only when one of
// its prompts is that prompt, as Claude Code changes what it takes (a tab
// to spaces here), not when it shows an older one read late, nor a
// subagent's.
func TestABatchIsTypedOnlyWhenItShowsThePromptBeingTyped(t *testing.T) {
	r := &Runner{sessions: map[string]*session{}, log: slog.New(slog.DiscardHandler)}
	s := r.newSession("s1")
	r.sessions["s1"] = s
	s.sent.Store(newOnItsWay("now\tthis one"))
	off := int64(0)
	batch := func(evs ...protocol.Event) bool {
		off += 10
		s.transcript(evs, map[string]int64{"s1.jsonl": off})
		got := r.sent()
		return got[len(got)-1].Typed
	}
	if batch(protocol.Event{Kind: protocol.EventPrompt, Text: "an older one"}, protocol.Event{Kind: protocol.EventTurnEnd}) {
		t.Fatal("a batch with an older prompt is Typed")
	}
	if batch(protocol.Event{Kind: protocol.EventPrompt, Text: "now    this one", Agent: "a1"}) {
		t.Fatal("a batch with a subagent's prompt is Typed")
	}
	if !batch(protocol.Event{Kind: protocol.EventTurnStart}, protocol.Event{Kind: protocol.EventPrompt, Text: "now    this one"}) {
		t.Fatal("a batch with the prompt being typed, its tab made spaces, is not Typed")
	}
}

// TestAPromptAnEarlierClaudeCodeWroteIsNotTheOneTyped: after a wake the
// follower first reads what the Claude Code a sleep stopped wrote last: the
// prompt of the Turn the sleep cut, which the Hub put back and sends again.
// That line, stamped before this Claude Code started, is not the prompt
// being typed (taken so, the Runner stopped typing, the Hub waited for a
// Turn that never ran: a stall of TestASessionSleptMidTurnKeepsItsPrompt),
// nor its turn_start a Turn running; the same prompt written by the Claude
// Code now running is. One the Runner adopted (no start time) is as before.
func TestAPromptAnEarlierClaudeCodeWroteIsNotTheOneTyped(t *testing.T) {
	r := &Runner{sessions: map[string]*session{}, log: slog.New(slog.DiscardHandler)}
	s := r.newSession("s1")
	s.launched = time.Now()
	r.sessions["s1"] = s
	w := newOnItsWay("cut me short")
	s.sent.Store(w)
	before, after := s.launched.Add(-3*time.Second), s.launched.Add(2*time.Second)
	s.transcript([]protocol.Event{{Kind: protocol.EventTurnStart, At: before}, {Kind: protocol.EventPrompt, Text: "cut me short", At: before}}, map[string]int64{"s1.jsonl": 10})
	if got := r.sent(); got[len(got)-1].Typed || s.inTurn.Load() {
		t.Fatalf("the earlier Claude Code's prompt: typed %v, in a Turn %v; want neither", got[len(got)-1].Typed, s.inTurn.Load())
	}
	select {
	case <-w.took:
		t.Fatal("the prompt being typed is taken by the earlier Claude Code's line")
	default:
	}
	s.transcript([]protocol.Event{{Kind: protocol.EventTurnStart, At: after}, {Kind: protocol.EventPrompt, Text: "cut me short", At: after}}, map[string]int64{"s1.jsonl": 20})
	if got := r.sent(); !got[len(got)-1].Typed || !s.inTurn.Load() {
		t.Fatal("the prompt as this Claude Code wrote it is not taken")
	}

	adopted := r.newSession("s2")
	r.sessions["s2"] = adopted
	adopted.sent.Store(newOnItsWay("cut me short"))
	adopted.transcript([]protocol.Event{{Kind: protocol.EventPrompt, Text: "cut me short", At: before}}, map[string]int64{"s2.jsonl": 10})
	if got := r.sent(); !got[len(got)-1].Typed {
		t.Fatal("an adopted Claude Code's prompt is not taken")
	}
}

func TestAHookOfNoRunningSessionOrNoJSONIsRefused(t *testing.T) {
	r := &Runner{sessions: map[string]*session{"s1": {id: "s1"}}, log: slog.New(slog.DiscardHandler)}
	if _, err := r.hook(context.Background(), "s2", []byte(`{"hook_event_name":"Stop"}`)); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another Session: err = %v, want not found", err)
	}
	if _, err := r.hook(context.Background(), "s1", []byte(`not json`)); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("not JSON: err = %v, want invalid", err)
	}
	if n := len(r.sent()); n != 0 {
		t.Fatalf("refused hooks sent %d messages", n)
	}
}

// TestAQuestionWaitsForItsAnswerAndGoesBackAsTheHooksDecision: the
// question goes out with an id; the Hub's answer for that id is the
// hook's decision, Claude's input with the answers added; an answer for no
// waiting question is refused, and so is one after the hook gave up.
func TestAQuestionWaitsForItsAnswerAndGoesBackAsTheHooksDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &Runner{sessions: map[string]*session{}, log: slog.New(slog.DiscardHandler)}
		s := r.newSession("s1")
		s.ctx = sctx
		r.sessions["s1"] = s
		ev := `{"hook_event_name":"PermissionRequest","tool_name":"AskUserQuestion","tool_input":{"questions":[{"question":"Which colour?","options":[{"label":"Red"},{"label":"Blue"}]}]}}`
		type result struct {
			answer []byte
			err    error
		}
		done := make(chan result, 1)
		go func() {
			a, err := r.hook(context.Background(), "s1", []byte(ev))
			done <- result{a, err}
		}()
		var id string
		testenv.Eventually(t, testenv.WaitShort, "the question waits", func() bool {
			s.questions.mu.Lock()
			defer s.questions.mu.Unlock()
			for k := range s.questions.waiting {
				id = k
			}
			return id != ""
		})
		if err := s.questions.answer(protocol.SessionAnswer{SessionID: "s1", QuestionID: "nope", Answers: map[string]string{"Which colour?": "Blue"}}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("an answer to no question: %v, want not found", err)
		}
		if err := s.questions.answer(protocol.SessionAnswer{SessionID: "s1", QuestionID: id, Answers: map[string]string{"Which colour?": "Blue"}}); err != nil {
			t.Fatal(err)
		}
		res := <-done
		want := `{"hookSpecificOutput":{"decision":{"behavior":"allow","updatedInput":{"answers":{"Which colour?":"Blue"},"questions":[{"question":"Which colour?","options":[{"label":"Red"},{"label":"Blue"}]}]}},"hookEventName":"PermissionRequest"}}`
		if res.err != nil || string(res.answer) != want {
			t.Fatalf("the hook answered %s, %v; want %s", res.answer, res.err, want)
		}
		testenv.Eventually(t, 2*holdMax, "the question in the stream", func() bool { return len(r.sent()) == 1 })
		if q := r.sent()[0].Events[0]; q.Kind != protocol.EventQuestion || q.ToolID != id {
			t.Fatalf("sent %+v, want the question with its id", q)
		}
		if err := s.questions.answer(protocol.SessionAnswer{SessionID: "s1", QuestionID: id}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("a second answer: %v, want not found", err)
		}
	})
}

// TestASubagentStartWhoseCallNeverComesGoesAfterHoldMax: the wait for an
// Agent call is bounded; the start goes with the hold's end.
func TestASubagentStartWhoseCallNeverComesGoesAfterHoldMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &Runner{sessions: map[string]*session{}, log: slog.New(slog.DiscardHandler)}
		s := r.newSession("s1")
		r.sessions["s1"] = s
		for _, ev := range []string{launched("toolu_b", "b1"), `{"hook_event_name":"SubagentStart","agent_id":"b1","agent_type":"Explore"}`} {
			if _, err := r.hook(context.Background(), "s1", []byte(ev)); err != nil {
				t.Fatal(err)
			}
		}
		s.transcript([]protocol.Event{{Kind: protocol.EventText, Text: "other"}}, map[string]int64{"s1.jsonl": 3})
		testenv.Eventually(t, 2*holdMax, "the start goes alone", func() bool { return len(r.sent()) == 2 })
		if k := kinds(r.sent()[1]); len(k) != 1 || k[0] != protocol.EventSubagentStart {
			t.Fatalf("sent %v, want the start alone at the hold's end", k)
		}
	})
}

// TestTheTranscriptSaysWhenATurnIsOver: a prompt's turn_start to its
// turn_end (a subagent's don't count) is when delivery waits.
func TestTheTranscriptSaysWhenATurnIsOver(t *testing.T) {
	r := &Runner{sessions: map[string]*session{}, log: slog.New(slog.DiscardHandler)}
	s := r.newSession("s1")
	s.transcript([]protocol.Event{{Kind: protocol.EventTurnStart}}, nil)
	if !s.inTurn.Load() {
		t.Fatal("no Turn after turn_start")
	}
	s.transcript([]protocol.Event{{Kind: protocol.EventTurnEnd, Agent: "a1"}}, nil)
	if !s.inTurn.Load() {
		t.Fatal("a subagent's turn_end ended the Turn")
	}
	s.transcript([]protocol.Event{{Kind: protocol.EventTurnEnd, Reason: "done"}}, nil)
	if s.inTurn.Load() {
		t.Fatal("a Turn after its turn_end")
	}
}
