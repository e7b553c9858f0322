package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// handleSessions registers what a Runner may send about its Sessions. Each
// handler answers only for a Session on that Runner, and only after hello.
func (h runnersAPI) handleSessions(rc *runners.Conn, welcomed <-chan struct{}) {
	own := ownSession(h.store.Sessions, rc, welcomed)
	// runnable decodes a request about a Session this Runner may run now:
	// starting or awake, its Creator a Member, and the Runner one they may
	// use, asked now rather than at connect, so a Runner unshared since, or
	// revoked, gets nothing.
	runnable := func(ctx context.Context, body json.RawMessage) (store.Session, error) {
		var req protocol.SessionRef
		s, err := own(ctx, body, &req, func() string { return req.SessionID })
		if err != nil {
			return s, err
		}
		if s.State != store.Starting && s.State != store.Active {
			return s, fmt.Errorf("session %s is %s, not starting or awake: %w", s.ID, s.State, errdefs.ErrForbidden)
		}
		if _, err := h.store.Members.UserByID(ctx, s.CreatorID); err != nil {
			return s, fmt.Errorf("the Session's Creator is no longer a Member: %w", errdefs.ErrForbidden)
		}
		if rn, err := h.store.Runners.RunnerByID(ctx, rc.Runner.ID); err != nil || !rn.UsableBy(s.CreatorID) {
			return s, fmt.Errorf("this Runner is not one the Session's Creator may use (neither theirs nor shared): %w", errdefs.ErrForbidden)
		}
		return s, nil
	}

	rc.Conn.Handle(protocol.TypeSessionGitHubToken, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		s, err := runnable(ctx, body)
		if err != nil {
			return nil, err
		}
		if rc.Version < protocol.GitRelayVersion {
			// It would write the token into the Sandbox.
			return nil, fmt.Errorf("this Runner speaks protocol %d, and would put a GitHub token in the Sandbox; its owner updates it to a kndl of protocol %d, whose git relay holds the token: %w",
				rc.Version, protocol.GitRelayVersion, errdefs.ErrForbidden)
		}
		return h.sandboxToken(ctx, s)
	})
	rc.Conn.Handle(protocol.TypeSessionCloneToken, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		s, err := runnable(ctx, body)
		if err != nil {
			return nil, err
		}
		return h.repoToken(ctx, s, forge.Clone)
	})

	rc.Conn.Handle(protocol.TypeSessionCredentials, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		s, err := runnable(ctx, body)
		if err != nil {
			return nil, err
		}
		return h.credentials(ctx, s)
	})

	rc.Conn.Handle(protocol.TypeSessionEvents, true, func(ctx context.Context, body json.RawMessage) (any, error) {
		var req protocol.SessionEvents
		s, err := own(ctx, body, &req, func() string { return req.SessionID })
		if err != nil {
			return nil, err
		}
		for i := range req.Events {
			req.Events[i].Seq = 0
			if req.Events[i].Kind == "" {
				return nil, fmt.Errorf("an event without a kind: %w", errdefs.ErrInvalid)
			}
		}
		return nil, h.sessions.Events(ctx, s, req)
	})

	// What a Session pushed comes from its Runner's git relay alone, never
	// from what the Sandbox prints.
	rc.Conn.Handle(protocol.TypeSessionPushed, true, func(ctx context.Context, body json.RawMessage) (any, error) {
		var req protocol.SessionPushed
		s, err := own(ctx, body, &req, func() string { return req.SessionID })
		if err != nil {
			return nil, err
		}
		if len(req.Refs) > protocol.MaxPushedRefs {
			return nil, fmt.Errorf("%d refs in one push: the git relay takes at most %d: %w", len(req.Refs), protocol.MaxPushedRefs, errdefs.ErrInvalid)
		}
		var branches []string
		for _, r := range req.Refs {
			if b, ok := strings.CutPrefix(r.Ref, "refs/heads/"); ok && strings.Trim(r.New, "0") != "" {
				branches = append(branches, b)
			}
		}
		h.pulls.Pushed(ctx, s.ID, branches)
		return nil, nil
	})

	rc.Conn.Handle(protocol.TypeSessionExited, true, func(ctx context.Context, body json.RawMessage) (any, error) {
		var req protocol.SessionExited
		s, err := own(ctx, body, &req, func() string { return req.SessionID })
		if err != nil {
			return nil, err
		}
		return nil, h.sessions.Exited(ctx, s.ID, req.Detail)
	})
}

// ownSession returns a decoder of a Runner's message about a Session of its
// own: it refuses one before hello, a malformed body, and a Session on
// another Runner (as if it didn't exist).
func ownSession(st *store.Sessions, rc *runners.Conn, welcomed <-chan struct{}) func(ctx context.Context, body json.RawMessage, v any, id func() string) (store.Session, error) {
	return func(ctx context.Context, body json.RawMessage, v any, id func() string) (store.Session, error) {
		select {
		case <-welcomed:
		default:
			return store.Session{}, fmt.Errorf("say hello first: %w", errdefs.ErrInvalid)
		}
		if err := json.Unmarshal(body, v); err != nil {
			return store.Session{}, fmt.Errorf("malformed body: %v: %w", err, errdefs.ErrInvalid)
		}
		s, err := st.SessionByID(ctx, id())
		if err != nil || s.RunnerID != rc.Runner.ID {
			return store.Session{}, fmt.Errorf("session %q: %w", id(), errdefs.ErrNotFound)
		}
		return s, nil
	}
}

// handleLive registers what a Runner sends for the web UI: a Session's
// open ports and its terminal's frames.
func (h viewAPI) handleLive(rc *runners.Conn, welcomed <-chan struct{}) {
	own := ownSession(h.store.Sessions, rc, welcomed)
	rc.Conn.Handle(protocol.TypeSessionPorts, true, func(ctx context.Context, body json.RawMessage) (any, error) {
		var req protocol.SessionPorts
		s, err := own(ctx, body, &req, func() string { return req.SessionID })
		if err != nil {
			return nil, err
		}
		if len(req.Ports) > maxPorts {
			return nil, fmt.Errorf("%d ports: at most %d are listed: %w", len(req.Ports), maxPorts, errdefs.ErrInvalid)
		}
		h.sessionPorts(ctx, rc, s, req.Ports)
		return nil, nil
	})
	rc.Conn.Handle(protocol.TypeTerminalFrame, true, func(ctx context.Context, body json.RawMessage) (any, error) {
		var f protocol.TerminalFrame
		select {
		case <-welcomed:
		default:
			return nil, fmt.Errorf("say hello first: %w", errdefs.ErrInvalid)
		}
		if err := json.Unmarshal(body, &f); err != nil {
			return nil, fmt.Errorf("malformed body: %v: %w", err, errdefs.ErrInvalid)
		}
		// Frames go only to a terminal opened on this connection
		// (terminalFrame checks), so no store read is needed per frame.
		h.terminalFrame(rc, f)
		return nil, nil
	})
}

// maxPorts bounds one Session's list.
const maxPorts = 1000
