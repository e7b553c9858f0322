package runner

import (
	"context"
	"errors"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
)

// sent returns the session.events messages in the outbox, in order.
func (r *Runner) sent() []protocol.SessionEvents {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	var out []protocol.SessionEvents
	for _, m := range r.outbox {
		if m.typ == protocol.TypeSessionEvents {
			out = append(out, m.body.(protocol.SessionEvents))
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
// right after the transcript's next batch, in the same message; a hook's
// Turn signal goes at once; held Events go alone after holdMax.
func TestHooksAndTheTranscriptMergeIntoOneOrderedStream(t *testing.T) {
	r := &Runner{sessions: map[string]*session{}, outReady: make(chan struct{}, 1), welcomed: make(chan struct{})}
	s := &session{id: "s1"}
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
	r.transcript(s, []protocol.Event{{Kind: protocol.EventTurnStart}, {Kind: protocol.EventPrompt, Text: "hi"}}, map[string]int64{"s1.jsonl": 10})
	got := r.sent()
	if len(got) != 2 || got[0].Hook != protocol.HookPromptSubmit || len(got[0].Events) != 0 {
		t.Fatalf("sent %+v, want the prompt's signal at once, then one batch", got)
	}
	want := []string{protocol.EventTurnStart, protocol.EventPrompt, protocol.EventSubagentStart, protocol.EventNotification}
	if k := kinds(got[1]); len(k) != len(want) || k[2] != want[2] || k[3] != want[3] || got[1].Offsets["s1.jsonl"] != 10 {
		t.Fatalf("batch = %v %v, want %v after the transcript's", k, got[1].Offsets, want)
	}

	// Nothing from the transcript: what is held goes alone after holdMax.
	r.hook(context.Background(), "s1", []byte(`{"hook_event_name":"StopFailure","last_assistant_message":"overloaded"}`))
	testenv.Eventually(t, 2*holdMax, "the held Events go alone", func() bool { return len(r.sent()) == 4 })
	got = r.sent()
	if got[2].Hook != protocol.HookStop || len(got[3].Events) != 2 || got[3].Events[0].Text != "The model API failed: overloaded" {
		t.Fatalf("sent %+v, want the Turn's end at once, then the error and turn_end", got[2:])
	}
	for _, e := range got[3].Events {
		if e.At.IsZero() {
			t.Fatalf("a held Event without its time: %+v", e)
		}
	}
}

func TestAHookOfNoRunningSessionOrNoJSONIsRefused(t *testing.T) {
	r := &Runner{sessions: map[string]*session{"s1": {id: "s1"}}, outReady: make(chan struct{}, 1)}
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
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &Runner{sessions: map[string]*session{}, outReady: make(chan struct{}, 1)}
	s := &session{id: "s1", ctx: sctx}
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
	if err := r.answerWaiting(s, protocol.SessionAnswer{SessionID: "s1", QuestionID: "nope", Answers: map[string]string{"Which colour?": "Blue"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("an answer to no question: %v, want not found", err)
	}
	if err := r.answerWaiting(s, protocol.SessionAnswer{SessionID: "s1", QuestionID: id, Answers: map[string]string{"Which colour?": "Blue"}}); err != nil {
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
	if err := r.answerWaiting(s, protocol.SessionAnswer{SessionID: "s1", QuestionID: id}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a second answer: %v, want not found", err)
	}
}
