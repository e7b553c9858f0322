package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// A Session's Events reach the Hub as one ordered stream: the transcript's
// batches as the follower reads them, and the mod's hook events, which the
// relay hands the Runner. Both go out through the outbox in the order they
// are merged here, so the Hub stores them in that order and holds nothing
// back. Hooks fire before Claude Code writes what led to them into the
// transcript (a Stop's transcript still lacks the Turn's last words,
// measured on 2.1.328), so a hook's Events wait for the transcript's next
// batch and go right after it, or after holdMax if none comes. Some wait
// for a given Event instead and go right after it: a note about a prompt
// after the prompt's record, and a subagent's start after its Agent call
// (the subagent's own transcript can be read before the main one has the
// call, seen once in a run of the e2e suite).

// holdMax bounds how long a hook's Events wait for the transcript (Claude
// Code wrote it within a few hundred ms of the hook, measured).
const holdMax = 1500 * time.Millisecond

// stream is one Session's merge of hooks and transcript: it owns what
// waits to go, and sends the merged stream through out, in the
// Session's lane.
type stream struct {
	id  string
	out *outbox

	mu    sync.Mutex
	held  []held
	timer *time.Timer
	// calls holds the Agent calls sent whose subagent has not started.
	calls map[string]bool
}

// held is a hook's Event waiting for the transcript.
type held struct {
	protocol.Event
	// after, if set, is the Event this one follows: it waits for the
	// batch that has it, or for the hold's end.
	after func(protocol.Event) bool
}

// hookEvent is the part of a Claude Code hook payload the Runner reads.
type hookEvent struct {
	Name   string `json:"hook_event_name"`
	Source string `json:"source"`
	// Prompt is UserPromptSubmit's: the prompt as Claude Code took it.
	Prompt  string          `json:"prompt"`
	Message string          `json:"message"`
	Error   json.RawMessage `json:"error"`
	// LastAssistantMessage carries a StopFailure's message ("error" is
	// just "unknown", measured on 2.1.328).
	LastAssistantMessage string          `json:"last_assistant_message"`
	AgentID              string          `json:"agent_id"`
	AgentType            string          `json:"agent_type"`
	ToolName             string          `json:"tool_name"`
	ToolInput            json.RawMessage `json:"tool_input"`
	ToolUseID            string          `json:"tool_use_id"`
	ToolResponse         json.RawMessage `json:"tool_response"`
}

// counted sends the Hub what a model reply of a Session spent, as its
// relay read it from the model API's answer, in the Session's lane: apart
// from the stream of Events, which holds some back.
func (r *Runner) counted(sessionID string, u protocol.Usage) {
	r.notify(sessionID, protocol.TypeSessionEvents, protocol.SessionEvents{SessionID: sessionID, Spent: []protocol.Usage{u}})
}

// hook takes one hook event of a running Session from the relay: its
// Events join the stream, and UserPromptSubmit and Stop tell the Hub where
// the Turn is. A subagent its Creator stops is answered at its next tool
// call's hook (subagents.go).
func (r *Runner) hook(ctx context.Context, sessionID string, body []byte) ([]byte, error) {
	var ev hookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("a hook event that is not JSON: %w", errdefs.ErrInvalid)
	}
	r.mu.Lock()
	s := r.sessions[sessionID]
	r.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("session %s is not running here: %w", sessionID, errdefs.ErrNotFound)
	}
	return s.hook(ctx, ev)
}

// hook takes one of the Session's hook events.
func (s *session) hook(ctx context.Context, ev hookEvent) ([]byte, error) {
	// Which hooks fire is the mod's contract with the pinned Claude Code,
	// which its smoke test checks (tests/e2e TestThePinnedClaudeCodePassesTheSmokeTest).
	s.log.Debug("a hook of the mod fired", "session", s.id, "hook", ev.Name)
	// Tool calls and Claude's text come from the transcript; their hooks
	// carry nothing more.
	switch ev.Name {
	case "SessionStart":
		s.stream.emit(protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventReady, Text: ev.Source}}})
	case "UserPromptSubmit":
		// A prompt Claude Code changed is never changed silently: the note
		// goes after the prompt's record.
		if note := s.tookPrompt(ev.Prompt); note != "" {
			s.stream.holdNote(protocol.Event{Kind: protocol.EventNote, Text: note})
		}
		s.stream.emit(protocol.SessionEvents{Hook: protocol.HookPromptSubmit})
	case "Stop":
		s.noteDiskFull()
		s.stream.emit(protocol.SessionEvents{Hook: protocol.HookStop})
	case "StopFailure":
		s.inTurn.Store(false) // its turn_end is the hook's, below, not the transcript's
		msg := ev.LastAssistantMessage
		if msg == "" {
			msg = string(ev.Error)
		}
		s.stream.hold(protocol.Event{Kind: protocol.EventError, Text: "The model API failed: " + msg},
			protocol.Event{Kind: protocol.EventTurnEnd, Reason: "error", IsError: true})
		s.stream.emit(protocol.SessionEvents{Hook: protocol.HookStop})
	case "SubagentStart":
		s.subagents.started(ev)
	case "SubagentStop":
		s.subagents.stopped(ev)
	case "PreToolUse":
		return s.subagents.stopAnswer(ev), nil
	case "PostToolUse":
		s.noteDiskFull()
		if ev.ToolName == agentTool {
			s.subagents.launched(ev)
		}
		return s.subagents.stopAnswer(ev), nil
	case "PostToolUseFailure":
		s.noteDiskFull() // a write that failed for want of space fails its call
	case "Notification":
		s.stream.hold(protocol.Event{Kind: protocol.EventNotification, Text: ev.Message})
	case "PermissionRequest":
		if ev.ToolName == askTool {
			return s.questions.ask(ctx, s.ctx, ev)
		}
		s.stream.hold(protocol.Event{Kind: protocol.EventQuestion, Tool: ev.ToolName, Input: ev.ToolInput})
	case "SessionEnd":
		s.stream.emit(protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventNote, Text: "Claude Code exited."}}})
	}
	return nil, nil
}

// hold keeps a hook's Events for the transcript's next batch.
func (st *stream) hold(evs ...protocol.Event) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, e := range evs {
		st.holdLocked(e, nil)
	}
}

// holdNote keeps a note about the prompt Claude Code took for the batch
// with the prompt's record.
func (st *stream) holdNote(ev protocol.Event) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.holdLocked(ev, func(e protocol.Event) bool { return e.Kind == protocol.EventPrompt })
}

// holdStart keeps a subagent's start for the batch with its Agent call,
// unless the call has gone already.
func (st *stream) holdStart(ev protocol.Event) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var after func(protocol.Event) bool
	if ev.Parent != "" && !st.calls[ev.Parent] {
		after = func(e protocol.Event) bool { return e.Kind == protocol.EventToolUse && e.ToolID == ev.Parent }
	}
	st.holdLocked(ev, after)
}

// holdLocked times a held Event and makes sure it goes within holdMax;
// the stream's lock is held.
func (st *stream) holdLocked(ev protocol.Event, after func(protocol.Event) bool) {
	ev.At = time.Now()
	st.held = append(st.held, held{ev, after})
	if st.timer == nil {
		st.timer = time.AfterFunc(holdMax, func() { st.emit(protocol.SessionEvents{}) })
	}
}

// transcript takes one batch the follower read: the held hook Events go
// right after it.
func (s *session) transcript(evs []protocol.Event, offsets map[string]int64) {
	m := protocol.SessionEvents{Events: evs, Offsets: offsets}
	sent := s.sent.Load()
	for _, ev := range evs {
		if ev.Agent != "" {
			continue
		}
		switch ev.Kind {
		case protocol.EventTurnStart:
			if s.current(ev) {
				s.inTurn.Store(true)
			}
		case protocol.EventTurnEnd:
			s.inTurn.Store(false)
		case protocol.EventPrompt:
			// Only the prompt being typed, as this Claude Code wrote it:
			// a batch read late (written before a sleep, or while the
			// Runner was away) can show an older one, which says nothing
			// of this one.
			typed := sent != nil && s.current(ev) && sameTaken(sent.text, ev.Text)
			if typed {
				m.Typed = true
				sent.taken()
			}
			// When a record is read against its stamp: a late one has the
			// Runner type its prompt again. "first" is false when the
			// hook told of the prompt before it.
			s.log.Debug("the transcript tells of a prompt", "session", s.id, "written", ev.At, "first", typed)
		}
	}
	s.stream.emit(m)
}

// emit sends the held Events after m's, in one message, through the
// outbox; a message with nothing in it is not sent. A message with nothing
// at all is the hold's end, which sends everything held.
func (st *stream) emit(m protocol.SessionEvents) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	for i, e := range m.Events {
		if e.At.IsZero() {
			m.Events[i].At = now
		}
		if e.Kind == protocol.EventToolUse && e.Tool == agentTool && e.ToolID != "" {
			if st.calls == nil {
				st.calls = map[string]bool{}
			}
			st.calls[e.ToolID] = true
		}
	}
	holdEnd := m.Events == nil && m.Offsets == nil && m.Hook == ""
	if m.Offsets != nil || m.Hook == "" {
		// A transcript batch, or the hold's end: what was held goes now,
		// each Event that waits for another right after it. (A hook's own
		// signal goes at once, without waiting.)
		out := make([]protocol.Event, 0, len(m.Events)+len(st.held))
		placed := make([]bool, len(st.held))
		for _, e := range m.Events {
			out = append(out, e)
			for i, h := range st.held {
				if h.after != nil && !placed[i] && h.after(e) {
					out, placed[i] = append(out, h.Event), true
				}
			}
		}
		var kept []held
		// waits holds, by subagent, what its first kept Event waits for:
		// its later ones (its end) wait for it too, or a subagent that
		// ended before its start went would be listed running for good.
		waits := map[string]func(protocol.Event) bool{}
		for i, h := range st.held {
			switch w := waits[h.Agent]; {
			case placed[i]:
			case holdEnd:
				out = append(out, h.Event)
			case w != nil:
				h.after = w
				kept = append(kept, h)
			case h.after == nil:
				out = append(out, h.Event)
			default:
				kept = append(kept, h)
				if h.Agent != "" {
					waits[h.Agent] = h.after
				}
			}
		}
		for _, e := range out[len(m.Events):] {
			if e.Kind == protocol.EventSubagentStart {
				delete(st.calls, e.Parent)
			}
		}
		m.Events, st.held = out, kept
		if st.timer != nil && kept == nil {
			st.timer.Stop()
			st.timer = nil
		}
	}
	if len(m.Events) == 0 && m.Offsets == nil && m.Hook == "" {
		return
	}
	m.SessionID = st.id
	st.out.add(st.id, protocol.TypeSessionEvents, m)
}
