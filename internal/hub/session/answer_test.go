package session

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

const colours = `{"questions":[{"question":"Which colour?","header":"Colour","options":[{"label":"Red"},{"label":"Blue"}],"multiSelect":false}]}`

// TestTheCreatorsAnswerReachesTheWaitingHook: the question waiting is
// answered by option or in the Creator's words, the Runner gets each
// question's answer, the history shows it, and what does not fit the
// question is refused before anything is sent.
func TestTheCreatorsAnswerReachesTheWaitingHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		ctx := context.Background()
		s, _ := f.active("ask me")
		f.o.Accepted(s.ID)
		if err := f.o.Answer(ctx, s.ID, "", []Choice{{Option: 1}}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("no question yet: %v, want not found", err)
		}
		f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventQuestion, Tool: "AskUserQuestion", ToolID: "q1", Input: json.RawMessage(colours)}}})
		if got := f.o.Activity(s.ID); got != "question" {
			t.Fatalf("activity = %q, want question", got)
		}
		for _, bad := range [][]Choice{{}, {{Option: 3}}, {{Option: 1}, {Option: 2}}, {{Text: "  "}}, {{Option: 1, Text: "both"}}} {
			if err := f.o.Answer(ctx, s.ID, "", bad); !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("answer %+v: %v, want invalid", bad, err)
			}
		}
		f.runner.quiet(50 * time.Millisecond)
		if err := f.o.Answer(ctx, s.ID, "", []Choice{{Option: 2}}); err != nil {
			t.Fatal(err)
		}
		a := f.runner.next(protocol.TypeSessionAnswer).answer
		if a.QuestionID != "q1" || len(a.Answers) != 1 || a.Answers["Which colour?"] != "Blue" {
			t.Fatalf("the Runner got %+v, want Blue for q1", a)
		}
		if got := f.events(s.ID, protocol.EventAnswer); len(got) != 1 || got[0] != "Blue" {
			t.Fatalf("history answers = %q, want Blue", got)
		}
		if got := f.o.Activity(s.ID); got != "turn" {
			t.Fatalf("activity after the answer = %q, want turn", got)
		}
	})
}

// TestAQuestionLeftWhenTheSessionSleepsIsMarked: the history says it was
// never answered.
func TestAQuestionLeftWhenTheSessionSleepsIsMarked(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := f.active("ask me")
	f.o.Accepted(s.ID)
	f.o.Events(ctx, f.session(s.ID), protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventPrompt, Text: "ask me"}, {Kind: protocol.EventQuestion, ToolID: "q1", Input: json.RawMessage(colours)}}})
	if err := f.o.Sleep(ctx, s.ID, "its Creator put it to sleep"); err != nil {
		t.Fatal(err)
	}
	f.runner.next(protocol.TypeSessionStop)
	notes := strings.Join(f.events(s.ID, protocol.EventNote), "\n")
	if !strings.Contains(notes, "Claude's question was left unanswered.") {
		t.Fatalf("history:\n%s\nwant the question marked unanswered", notes)
	}
}
