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
	// stream takes each question, for the Hub.
	stream *stream

	mu      sync.Mutex
	waiting map[string]chan map[string]string
}

// ask records Claude's question and waits for its answer, or for the hook
// (ctx) or the Session (running) to give up: Claude Code then asks in its
// terminal.
func (q *questions) ask(ctx, running context.Context, ev hookEvent) ([]byte, error) {
	var input map[string]json.RawMessage
	if err := json.Unmarshal(ev.ToolInput, &input); err != nil {
		return nil, fmt.Errorf("a question whose input is not an object: %w", errdefs.ErrInvalid)
	}
	id := uuid.NewString()
	ch := make(chan map[string]string, 1)
	q.mu.Lock()
	if q.waiting == nil {
		q.waiting = map[string]chan map[string]string{}
	}
	q.waiting[id] = ch
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		delete(q.waiting, id)
		q.mu.Unlock()
	}()
	q.stream.hold(protocol.Event{Kind: protocol.EventQuestion, Tool: ev.ToolName, ToolID: id, Input: ev.ToolInput})
	var answers map[string]string
	select {
	case answers = <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-running.Done():
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
func (q *questions) answer(req protocol.SessionAnswer) error {
	q.mu.Lock()
	ch := q.waiting[req.QuestionID]
	delete(q.waiting, req.QuestionID)
	q.mu.Unlock()
	if ch == nil {
		return fmt.Errorf("question %s no longer waits (answered, or Claude Code moved on): %w", req.QuestionID, errdefs.ErrNotFound)
	}
	ch <- req.Answers
	return nil
}
