package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
)

// subagent is one of a Session's subagents as its Events tell of it; the
// Session view (internal/web's session.js) reads them the same way.
type subagent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// Description is what the Agent tool call that started it says of
	// it: its description, or the first words of its prompt.
	Description string `json:"description"`
	// State is running, stopping (its Creator asked it to stop), finished,
	// stopped or interrupted.
	State string `json:"state"`
	// Parent is the Agent tool call that started it.
	Parent string `json:"parent,omitempty"`
}

// subagentsOf lists a Session's subagents from its Events, in the order
// they started.
func subagentsOf(evs []api.Event) []subagent {
	type call struct{ Description, Prompt, SubagentType string }
	calls := map[string]call{}     // Agent tool calls by id
	parents := map[string]string{} // agent id -> its Agent call, from any of its Events
	var out []subagent
	at := map[string]int{}
	for _, e := range evs {
		if e.Agent != "" && e.Parent != "" && parents[e.Agent] == "" {
			parents[e.Agent] = e.Parent
		}
		switch e.Kind {
		case protocol.EventToolUse:
			if e.Tool == "Agent" {
				var in struct {
					Description  string `json:"description"`
					Prompt       string `json:"prompt"`
					SubagentType string `json:"subagent_type"`
				}
				json.Unmarshal(e.Input, &in)
				calls[e.ToolID] = call{in.Description, in.Prompt, in.SubagentType}
			}
		case protocol.EventSubagentStart:
			if i, ok := at[e.Agent]; ok {
				out[i].State = "running" // resumed
				continue
			}
			at[e.Agent] = len(out)
			out = append(out, subagent{ID: e.Agent, Type: e.Text, State: "running"})
		case protocol.EventSubagentStop:
			if i, ok := at[e.Agent]; ok && out[i].State == "running" {
				out[i].State = "stopping"
			}
		case protocol.EventSubagentEnd:
			if i, ok := at[e.Agent]; ok {
				out[i].State = endedAs(e.Reason)
			}
		}
	}
	for i := range out {
		a := &out[i]
		a.Parent = parents[a.ID]
		c := calls[a.Parent]
		a.Description = or(c.Description, oneLine(c.Prompt, 60))
		a.Type = or(a.Type, c.SubagentType)
	}
	return out
}

// endedAs is the state a subagent_end's reason leaves its subagent in.
func endedAs(reason string) string {
	switch reason {
	case protocol.SubagentStopped, protocol.SubagentInterrupted:
		return reason
	}
	return "finished"
}

// printSubagents writes a Session's subagents, and how to stop one.
func printSubagents(w io.Writer, id string, agents []subagent) {
	if len(agents) == 0 {
		return
	}
	fmt.Fprintf(w, "\nSubagents:\n")
	running := false
	for _, a := range agents {
		fmt.Fprintf(w, "  %s  %-16s %-11s %s\n", a.ID, or(a.Type, "-"), a.State, a.Description)
		running = running || a.State == "running"
	}
	if running {
		fmt.Fprintf(w, "  (stop one with: kndl stop-subagent %s AGENT_ID)\n", id)
	}
}

// sessionStopSubagent asks the Hub to stop one subagent.
func sessionStopSubagent(ctx context.Context, io IO, args []string) error {
	pos, c, err := ParseFor(Flags(io, "stop-subagent"), args, 2)
	if err != nil {
		return err
	}
	if err := c.StopSubagent(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Asked subagent %s to stop: it stops at its next tool call (one it is running ends first). kndl show %s says when it has.\n", pos[1], pos[0])
	return nil
}
