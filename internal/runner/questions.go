package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// A question Claude asks with AskUserQuestion fires the mod's
// PermissionRequest hook (even in bypass mode, measured on 2.1.328). The
// hook waits here until the Creator answers through the Hub
// (session.answer), and the answer goes back as the hook's decision, never
// as keys; Claude Code reads it as the person's choice.

// askTool is the tool Claude asks with.
const askTool = "AskUserQuestion"

// questions are a Session's questions waiting for an answer, by id.
type questions struct {
	mu      sync.Mutex
	waiting map[string]chan map[string]string
}

// ask records Claude's question and waits for its answer, or for the hook
// or the Session to give up (Claude Code then asks in its terminal).
func (r *Runner) ask(ctx context.Context, s *session, ev hookEvent) ([]byte, error) {
	var input map[string]json.RawMessage
	if err := json.Unmarshal(ev.ToolInput, &input); err != nil {
		return nil, fmt.Errorf("a question whose input is not an object: %w", errdefs.ErrInvalid)
	}
	id := uuid.NewString()
	ch := make(chan map[string]string, 1)
	s.questions.mu.Lock()
	if s.questions.waiting == nil {
		s.questions.waiting = map[string]chan map[string]string{}
	}
	s.questions.waiting[id] = ch
	s.questions.mu.Unlock()
	defer func() {
		s.questions.mu.Lock()
		delete(s.questions.waiting, id)
		s.questions.mu.Unlock()
	}()
	r.hold(s, protocol.Event{Kind: protocol.EventQuestion, Tool: ev.ToolName, ToolID: id, Input: ev.ToolInput})
	var answers map[string]string
	select {
	case answers = <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.ctx.Done():
		return nil, fmt.Errorf("the Session stopped before the question was answered: %w", errdefs.ErrUnavailable)
	}
	b, _ := json.Marshal(answers)
	input["answers"] = b
	return json.Marshal(map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName": "PermissionRequest",
		"decision":      map[string]any{"behavior": "allow", "updatedInput": input},
	}})
}

// answer hands the Hub's answer to the hook that waits for it. Returns
// ErrNotFound for a question that no longer waits.
func (r *Runner) answer(req protocol.SessionAnswer) error {
	s, err := r.session(req.SessionID)
	if err != nil {
		return err
	}
	return r.answerWaiting(s, req)
}

func (r *Runner) answerWaiting(s *session, req protocol.SessionAnswer) error {
	s.questions.mu.Lock()
	ch := s.questions.waiting[req.QuestionID]
	delete(s.questions.waiting, req.QuestionID)
	s.questions.mu.Unlock()
	if ch == nil {
		return fmt.Errorf("question %s no longer waits (answered, or Claude Code moved on): %w", req.QuestionID, errdefs.ErrNotFound)
	}
	ch <- req.Answers
	return nil
}
