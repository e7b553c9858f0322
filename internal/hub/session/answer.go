package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// Choice is one answer to one of a question's questions: an option by its
// number (from 1), or the person's own words.
type Choice struct {
	Option int
	Text   string
}

// asked is the input Claude gives AskUserQuestion, as far as answering
// reads it.
type asked struct {
	Questions []struct {
		Question string `json:"question"`
		Options  []struct {
			Label string `json:"label"`
		} `json:"options"`
	} `json:"questions"`
}

// Answer answers the question Claude asks in an Active Session (the one
// waiting when questionID is ""), one Choice per question it holds. The
// answer goes to the mod's hook that waits for it, through the Runner, and
// into the history.
func (o *Owner) Answer(ctx context.Context, id, questionID string, choices []Choice) error {
	s, err := o.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		return err
	}
	if s.State != Active {
		return fmt.Errorf("the Session is %s, not active: no question waits: %w", s.State, errdefs.ErrConflict)
	}
	if questionID == "" {
		o.runs.on(id, func(r *run) { questionID = r.asked })
	}
	if questionID == "" {
		return fmt.Errorf("no question of Claude's waits for an answer: %w", errdefs.ErrNotFound)
	}
	ev, err := o.store.Sessions.EventByToolID(ctx, id, protocol.EventQuestion, questionID)
	if err != nil {
		return fmt.Errorf("question %s: %w", questionID, err)
	}
	var q protocol.Event
	var in asked
	if err := json.Unmarshal(ev.Data, &q); err != nil || json.Unmarshal(q.Input, &in) != nil || len(in.Questions) == 0 {
		return fmt.Errorf("question %s is not one Claude asked with AskUserQuestion: %w", questionID, errdefs.ErrInvalid)
	}
	if len(choices) != len(in.Questions) {
		return fmt.Errorf("Claude asks %d question(s): give one answer to each, in order: %w", len(in.Questions), errdefs.ErrInvalid)
	}
	answers := map[string]string{}
	var said []string
	for i, c := range choices {
		qq := in.Questions[i]
		a := strings.TrimSpace(c.Text)
		switch {
		case c.Option != 0 && a != "":
			return fmt.Errorf("answer %d: an option or your own words, not both: %w", i+1, errdefs.ErrInvalid)
		case c.Option != 0 && (c.Option < 1 || c.Option > len(qq.Options)):
			return fmt.Errorf("answer %d: %q has options 1 to %d: %w", i+1, qq.Question, len(qq.Options), errdefs.ErrInvalid)
		case c.Option != 0:
			a = qq.Options[c.Option-1].Label
		case a == "":
			return fmt.Errorf("answer %d is empty: %w", i+1, errdefs.ErrInvalid)
		}
		answers[qq.Question] = a
		said = append(said, a)
	}
	rc := o.opts.Runners.Runner(s.RunnerID)
	if rc == nil {
		return fmt.Errorf("the Session's Runner is not connected: %w", errdefs.ErrUnavailable)
	}
	if err := rc.Request(ctx, protocol.TypeSessionAnswer, protocol.SessionAnswer{SessionID: id, QuestionID: questionID, Answers: answers}, nil); err != nil {
		return err
	}
	input, _ := json.Marshal(answers)
	return o.stream.Record(ctx, id, protocol.Event{Kind: protocol.EventAnswer, ToolID: questionID, Text: strings.Join(said, "; "), Input: input})
}
