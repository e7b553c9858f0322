package runner

import (
	"encoding/json"
	"sync"
	"time"

	"kndl.dev/kndl/internal/protocol"
)

// A Session's subagents, as the mod's hooks tell of them (measured on
// Claude Code 2.1.328):
//
//   - SubagentStart names the agent and its type but not the Agent tool
//     call that started it. The Agent call's PostToolUse does (its
//     tool_response's agentId), and it comes before or after SubagentStart:
//     with three Agent calls in one message, one SubagentStart came after
//     its call's PostToolUse and the other two before, in no order of
//     their calls. So a subagent_start waits for its call's PostToolUse, for
//     holdMax at most, and then goes without its parent.
//   - A subagent's own tool calls fire PreToolUse and PostToolUse with its
//     agent_id. Answering one with continue false ends the subagent there,
//     and the main conversation goes on (its running Turn too); a
//     PreToolUse answered so also denies the tool, or it would still run.
//     The transcript then ends the subagent (hook_stopped_continuation,
//     internal/transcript); no SubagentStop fires.
//
// So a stop from its Creator waits for the subagent's next tool call, or
// for the end of the one it is in.

// agentTool is the tool that starts a subagent.
const agentTool = "Agent"

// stopReason is what a stopped subagent's transcript says stopped it.
const stopReason = "Stopped by its Creator."

// subagents is one Session's bookkeeping of its subagents.
type subagents struct {
	// stream takes the subagents' starts and ends.
	stream *stream

	mu sync.Mutex
	// parents maps an agent id to the Agent tool call that started it.
	parents map[string]string
	// starting holds a subagent_start until its Agent call's PostToolUse
	// names its parent, or its timer sends it without.
	starting map[string]*pendingStart
	// stopping are the agents to stop at their next tool call's hook.
	stopping map[string]bool
}

type pendingStart struct {
	ev    protocol.Event
	timer *time.Timer
	// end is the subagent's end, if it came first (a quick one, its
	// Agent call's PostToolUse late): it goes after the start.
	end *protocol.Event
}

// send holds the start, then the end if it came, in that order.
func (ps *pendingStart) send(st *stream, parent string) {
	ps.ev.Parent = parent
	if parent != "" {
		st.holdStart(ps.ev)
	} else {
		st.hold(ps.ev)
	}
	if ps.end != nil {
		ps.end.Parent = parent
		st.hold(*ps.end)
	}
}

// agentLaunch is the part of an Agent tool call's PostToolUse
// tool_response the Runner reads.
type agentLaunch struct {
	AgentID string `json:"agentId"`
}

// started takes SubagentStart: the subagent_start goes into the
// stream once its parent is known, or after holdMax without it.
func (a *subagents) started(ev hookEvent) {
	start := protocol.Event{Kind: protocol.EventSubagentStart, Agent: ev.AgentID, Text: ev.AgentType}
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.parents[ev.AgentID]; ok {
		start.Parent = p
		a.stream.holdStart(start)
		return
	}
	if a.starting == nil {
		a.starting = map[string]*pendingStart{}
	}
	ps := &pendingStart{ev: start}
	ps.timer = time.AfterFunc(holdMax, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.starting[ev.AgentID] == ps {
			delete(a.starting, ev.AgentID)
			ps.send(a.stream, "")
		}
	})
	a.starting[ev.AgentID] = ps
}

// launched takes an Agent tool call's PostToolUse, which names the
// subagent it started.
func (a *subagents) launched(ev hookEvent) {
	var l agentLaunch
	if json.Unmarshal(ev.ToolResponse, &l) != nil || l.AgentID == "" || ev.ToolUseID == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.parents == nil {
		a.parents = map[string]string{}
	}
	a.parents[l.AgentID] = ev.ToolUseID
	if ps := a.starting[l.AgentID]; ps != nil {
		ps.timer.Stop()
		delete(a.starting, l.AgentID)
		ps.send(a.stream, ev.ToolUseID)
	}
}

// subagentStopped takes SubagentStop: the subagent finished on its own.
func (a *subagents) stopped(ev hookEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.stopping, ev.AgentID)
	end := protocol.Event{Kind: protocol.EventSubagentEnd, Agent: ev.AgentID, Parent: a.parents[ev.AgentID]}
	if ps := a.starting[ev.AgentID]; ps != nil {
		ps.end = &end // after its start, which waits for its parent
		return
	}
	a.stream.hold(end)
}

// stopAnswer is the answer to a subagent's PreToolUse or PostToolUse when
// its Creator asked it to stop, once: continue false ends it, and a
// PreToolUse's deny keeps the tool from running. It is nil for any other
// hook, which goes on as it would.
func (a *subagents) stopAnswer(ev hookEvent) []byte {
	if ev.AgentID == "" {
		return nil
	}
	a.mu.Lock()
	stop := a.stopping[ev.AgentID]
	delete(a.stopping, ev.AgentID)
	a.mu.Unlock()
	if !stop {
		return nil
	}
	answer := map[string]any{"continue": false, "stopReason": stopReason}
	if ev.Name == "PreToolUse" {
		answer["hookSpecificOutput"] = map[string]any{"hookEventName": "PreToolUse",
			"permissionDecision": "deny", "permissionDecisionReason": stopReason}
	}
	b, _ := json.Marshal(answer)
	return b
}

// askStop marks a subagent to stop at its next tool call's hook. The Hub
// checks that it runs; asked again, it answers the same.
func (a *subagents) askStop(agent string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping == nil {
		a.stopping = map[string]bool{}
	}
	a.stopping[agent] = true
}
