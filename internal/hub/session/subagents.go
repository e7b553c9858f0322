package session

import (
	"context"
	"fmt"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// subagent is one of an awake Session's subagents that its Events say
// runs.
type subagent struct {
	// parent is the Agent tool call that started it, once known.
	parent string
	// stopAsked: its Creator asked it to stop (subagent_stop).
	stopAsked bool
}

// runningAgents reads the subagents a Session's stored Events say run.
func runningAgents(ctx context.Context, st *store.Sessions, id string) (map[string]*subagent, error) {
	list, err := st.RunningSubagents(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*subagent, len(list))
	for agent, parent := range list {
		out[agent] = &subagent{parent: parent}
	}
	return out, nil
}

// StopSubagent asks the Runner to stop one subagent of an Active Session
// that its Events say runs, and records the ask (subagent_stop). The
// subagent ends at its next tool call (or once the one it is in ends); its
// transcript's subagent_end, reason stopped, says so. The main conversation
// and its Turn go on. Asked again before it ends, it asks the Runner again
// and records nothing more. Returns ErrNotFound for a subagent not running.
func (o *Owner) StopSubagent(ctx context.Context, id, agent string) error {
	s, err := o.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		return err
	}
	if s.State != Active {
		return fmt.Errorf("the Session is %s, not active: no subagent runs: %w", s.State, errdefs.ErrConflict)
	}
	var a subagent
	var running bool
	o.runs.on(id, func(r *run) {
		if r.agents[agent] != nil {
			a, running = *r.agents[agent], true
		}
	})
	if !running {
		return fmt.Errorf("subagent %q is not running in this Session (it finished, or never ran): %w", agent, errdefs.ErrNotFound)
	}
	rc := o.opts.Runners.Runner(s.RunnerID)
	if rc == nil {
		return fmt.Errorf("the Session's Runner is not connected: %w", errdefs.ErrUnavailable)
	}
	if err := rc.Request(ctx, protocol.TypeSessionStopSubagent, protocol.SessionSubagent{SessionID: id, AgentID: agent}, nil); err != nil {
		return err
	}
	if a.stopAsked {
		return nil
	}
	return o.stream.Record(ctx, id, protocol.Event{Kind: protocol.EventSubagentStop, Agent: agent, Parent: a.parent,
		Text: "Its Creator asked it to stop: it stops at its next tool call."})
}
