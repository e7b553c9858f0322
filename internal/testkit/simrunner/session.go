package simrunner

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// session is one awake simulated Session: its Turn runs on a goroutine of
// its own, whose messages, like the deliver's hook, go one at a time in
// the Session's lane.
type session struct {
	r      *Runner
	id     string
	ctx    context.Context
	cancel context.CancelFunc

	sendMu  sync.Mutex      // one message of the lane at a time
	turnMu  sync.Mutex      // one prompt taken at a time
	turn    chan struct{}   // closed when the running Turn ended; nil before the first
	took    map[string]bool // under turnMu: the ids of the prompts this run took
	mu      sync.Mutex
	asked   string // the question waiting, its tool id
	answers chan protocol.SessionAnswer
}

func newSession(r *Runner, id string) *session {
	ctx, cancel := context.WithCancel(r.life) // from the Hub's start to its stop, or Run's end
	return &session{r: r, id: id, ctx: ctx, cancel: cancel, took: map[string]bool{}, answers: make(chan protocol.SessionAnswer, 1)}
}

// stop ends the Session's Turn, as a Sandbox stopped does.
func (s *session) stop() { s.cancel() }

// send gives the Hub one message of the Session's lane and waits until it
// took it, sending it again under the same once on the next connection
// when this one is lost, as the Runner's outbox does. A transcript batch
// (Events) carries how far the transcript is written.
func (s *session) send(ctx context.Context, m protocol.SessionEvents) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	m.SessionID = s.id
	if len(m.Events) > 0 {
		s.r.mu.Lock()
		for i := range m.Events {
			m.Events[i].At = time.Now()
			s.r.offsets[s.id] += int64(64 + len(m.Events[i].Text))
		}
		m.Offsets = map[string]int64{s.id + ".jsonl": s.r.offsets[s.id]}
		s.r.mu.Unlock()
	}
	once := rand.Text()
	for {
		c := s.r.current()
		if c == nil || c.Err() != nil { // the next connection not up yet
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
				continue
			}
		}
		err := c.RequestOnce(ctx, s.id, once, protocol.TypeSessionEvents, m, nil)
		var refused *protocol.Error
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.As(err, &refused):
			// The connection went: again on the next. A write to a Hub
			// killed mid-frame fails before the read loop sees the end
			// (c.Err still nil), as the Runner's outbox knows.
			select {
			case <-c.Done():
			case <-ctx.Done():
				return ctx.Err()
			}
		default:
			err = fmt.Errorf("Session %s: the Hub refused its Events: %w", s.id, err)
			s.r.fail(err)
			return err
		}
	}
}

// deliver takes a prompt once the Turn before it ended, checking it is
// the Session's next, and starts its Turn. A prompt id this run took
// before (the Hub lost the reply: its connection went, or it stopped) is
// answered taken before, as internal/runner does, its Turn's Events sent
// by then.
func (s *session) deliver(ctx context.Context, req protocol.SessionDeliver) (protocol.SessionDelivered, error) {
	s.turnMu.Lock()
	defer s.turnMu.Unlock()
	if s.turn != nil {
		select {
		case <-s.turn:
		case <-time.After(req.Within()):
			return protocol.SessionDelivered{Tries: 1, Why: "the Turn before it still runs"}, nil
		case <-ctx.Done():
			return protocol.SessionDelivered{}, ctx.Err()
		}
	}
	if s.took[req.PromptID] {
		return protocol.SessionDelivered{Taken: true, Before: true}, nil
	}
	s.took[req.PromptID] = true
	s.r.mu.Lock()
	n := len(s.r.taken[s.id])
	err := checkPrompt(req.Text, n)
	s.r.taken[s.id] = append(s.r.taken[s.id], req.Text)
	s.r.mu.Unlock()
	if err != nil {
		s.r.fail(fmt.Errorf("Session %s: %w", s.id, err))
	}
	if err := s.send(ctx, protocol.SessionEvents{Hook: protocol.HookPromptSubmit}); err != nil {
		return protocol.SessionDelivered{}, err
	}
	done := make(chan struct{})
	s.turn = done
	go func() {
		defer close(done)
		s.run(n, req.Text) // an error is the Session stopped, or the Hub's refusal, which send recorded
	}()
	return protocol.SessionDelivered{Taken: true, Tries: 1}, nil
}

// run streams Turn n's Events: the prompt and turn_start, then text, tool
// calls and results Every apart, a question half way on every AskEvery-th
// Turn, then the Stop hook and turn_end.
func (s *session) run(n int, prompt string) error {
	sc := s.r.cfg.Script
	ctx := s.ctx
	if err := s.send(ctx, protocol.SessionEvents{Typed: true, Events: []protocol.Event{{Kind: protocol.EventPrompt, Text: prompt}, {Kind: protocol.EventTurnStart}}}); err != nil {
		return err
	}
	text := strings.Repeat("simulated output ", max(1, sc.EventBytes/17))
	for i := range sc.Events {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(sc.Every): // a model's pace, not a wait for a condition
		}
		if sc.AskEvery > 0 && (n+1)%sc.AskEvery == 0 && i == sc.Events/2 {
			if err := s.ask(ctx, n); err != nil {
				return err
			}
		}
		tool := fmt.Sprintf("toolu_%d_%d", n, i)
		ev := []protocol.Event{{Kind: protocol.EventText, Text: text}, {Kind: protocol.EventToolUse, Tool: "Bash", ToolID: tool, Input: json.RawMessage(`{"command":"true"}`)},
			{Kind: protocol.EventToolResult, ToolID: tool, Text: text}}[i%3]
		if err := s.send(ctx, protocol.SessionEvents{Events: []protocol.Event{ev}}); err != nil {
			return err
		}
	}
	if err := s.send(ctx, protocol.SessionEvents{Hook: protocol.HookStop}); err != nil {
		return err
	}
	// Counted as sent: the Hub may put the Session to sleep, which ends
	// ctx, before its reply to the turn_end comes.
	s.r.mu.Lock()
	s.r.turns++
	s.r.mu.Unlock()
	return s.send(ctx, protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventTurnEnd, Reason: "done"}}})
}

// question is what every simulated question asks, in AskUserQuestion's
// input.
const question = `{"questions":[{"question":"Go on?","header":"Go on","multiSelect":false,"options":[{"label":"Yes","description":"go on"},{"label":"No","description":"stop"}]}]}`

// ask asks a question and waits for its answer, then writes the tool's
// result as Claude Code does.
func (s *session) ask(ctx context.Context, n int) error {
	id := fmt.Sprintf("toolu_q%d", n)
	s.mu.Lock()
	s.asked = id
	s.mu.Unlock()
	if err := s.send(ctx, protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventQuestion, Tool: "AskUserQuestion", ToolID: id, Input: json.RawMessage(question)}}}); err != nil {
		return err
	}
	var a protocol.SessionAnswer
	select {
	case <-ctx.Done():
		return ctx.Err()
	case a = <-s.answers:
	}
	return s.send(ctx, protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventToolResult, ToolID: id, Text: "Go on? " + a.Answers["Go on?"]}}})
}

// answer hands the Hub's answer to the question waiting.
func (s *session) answer(req protocol.SessionAnswer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asked == "" || req.QuestionID != s.asked {
		return fmt.Errorf("no question %s waits: %w", req.QuestionID, errdefs.ErrNotFound)
	}
	s.asked = ""
	s.answers <- req
	return nil
}
