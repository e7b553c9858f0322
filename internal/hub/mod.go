package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// maxHookBytes bounds one hook event from the mod.
const maxHookBytes = 1 << 20

// hookEvent is the part of a Claude Code hook payload the Hub reads.
type hookEvent struct {
	Name    string          `json:"hook_event_name"`
	Source  string          `json:"source"`
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
}

// modHook takes a hook event from a Session's mod (through its Runner's
// relay, which put in the mod token), turns it into Events, and moves the
// Session's Turn state.
func (h *Hub) modHook(w http.ResponseWriter, r *http.Request, p Principal) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHookBytes))
	var ev hookEvent
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = fmt.Errorf("hook event over %d bytes: %w", maxHookBytes, errdefs.ErrTooLarge)
		} else {
			err = fmt.Errorf("hook event is not JSON: %w", errdefs.ErrInvalid)
		}
		h.writeError(w, r, err)
		return
	}
	id := p.Session.ID
	ctx := r.Context()
	// Hooks fire before Claude Code writes what led to them into the
	// transcript (a Stop's transcript still lacks the Turn's last words,
	// measured on 2.1.328), so a hook's Events wait for the transcript's
	// next Events; turn start and end come from the transcript itself.
	record := h.recordAfterTranscript
	switch ev.Name {
	case "SessionStart":
		err = h.sessions.Record(ctx, id, protocol.Event{Kind: protocol.EventReady, Text: ev.Source})
	case "UserPromptSubmit":
		h.sessions.Accepted(id)
	case "Stop":
		h.sessions.TurnEnded(id)
	case "StopFailure":
		msg := ev.LastAssistantMessage
		if msg == "" {
			msg = string(ev.Error)
		}
		record(ctx, id, protocol.Event{Kind: protocol.EventError, Text: "The model API failed: " + msg},
			protocol.Event{Kind: protocol.EventTurnEnd, Reason: "error", IsError: true})
		h.sessions.TurnEnded(id)
	case "SubagentStart":
		record(ctx, id, protocol.Event{Kind: protocol.EventSubagentStart, Agent: ev.AgentID, Text: ev.AgentType})
	case "SubagentStop":
		record(ctx, id, protocol.Event{Kind: protocol.EventSubagentEnd, Agent: ev.AgentID})
	case "Notification":
		record(ctx, id, protocol.Event{Kind: protocol.EventNotification, Text: ev.Message})
	case "PermissionRequest":
		record(ctx, id, protocol.Event{Kind: protocol.EventQuestion, Tool: ev.ToolName, Input: ev.ToolInput})
	case "SessionEnd":
		err = h.sessions.Record(ctx, id, protocol.Event{Kind: protocol.EventNote, Text: "Claude Code exited."})
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	// Tool calls and Claude's text come from the transcript the Runner
	// tails; their hooks carry nothing more.
	writeJSON(w, http.StatusOK, struct{}{})
}

// sessionByMod resolves a mod token to its Session, for the route table.
func (h *Hub) sessionByMod(ctx context.Context, token string) (store.Session, error) {
	s, err := h.store.SessionByModToken(ctx, token)
	if err == nil && s.State != store.Active && s.State != store.Starting {
		err = fmt.Errorf("session %s is %s: %w", s.ID, s.State, errdefs.ErrUnauthorized)
	}
	return s, err
}
