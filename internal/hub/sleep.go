package hub

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// stopTimeout bounds a Runner's stopping Claude Code and the Sandbox.
const stopTimeout = 2 * time.Minute

// sleepSession stops a Session's Claude Code and Sandbox, keeping its disks
// and Workspace, and records it Asleep only once its Runner says it has
// stopped (or is away: it stops the Session when it comes back, since the
// Hub no longer takes it back).
func (h *Hub) sleepSession(ctx context.Context, s store.Session, why string) error {
	if rc := h.runnerConn(s.RunnerID); rc != nil {
		ctx, cancel := context.WithTimeout(ctx, stopTimeout)
		defer cancel()
		if err := rc.conn.Request(ctx, protocol.TypeSessionStop, protocol.SessionRef{SessionID: s.ID}, nil); err != nil {
			return fmt.Errorf("the Runner did not stop the Session: %w", err)
		}
	}
	h.store.RevokeModToken(ctx, s.ID)
	h.setLive(s.ID, func(l *live) { l.ready, l.busy, l.set = false, false, nil })
	h.record(ctx, s.ID, protocol.Event{Kind: protocol.EventNote, Text: "The Session went to sleep: " + why + "."})
	return h.store.SetSessionState(ctx, s.ID, store.Asleep, why)
}

// wakeSession starts an Asleep Session's Claude Code again, resuming its
// conversation if Claude Code wrote it down.
func (h *Hub) wakeSession(ctx context.Context, s store.Session) error {
	if err := h.store.SetSessionState(ctx, s.ID, store.Starting, ""); err != nil {
		return err
	}
	if !s.Conversation {
		// Claude Code exited before it wrote anything down: nothing to resume.
		h.record(ctx, s.ID, protocol.Event{Kind: protocol.EventNote,
			Text: "Claude Code never wrote this conversation down, so it starts afresh; the history above is not in its memory."})
	}
	go h.startSession(s, s.Conversation)
	return nil
}

// sleepSessionsOf puts a person's awake Sessions to sleep, saying why: when
// they are removed as a Member, or their setup token is removed or replaced.
func (h *Hub) sleepSessionsOf(ctx context.Context, userID, why string) {
	ss, err := h.store.Sessions(ctx, store.SessionFilter{States: []store.SessionState{store.Starting, store.Active, store.Frozen}})
	if err != nil {
		h.log.Error("list sessions to sleep", "err", err)
		return
	}
	for _, s := range ss {
		if s.CreatorID == userID {
			if err := h.sleepSession(ctx, s, why); err != nil {
				h.log.Warn("session did not go to sleep", "session", s.ID, "err", err)
			}
		}
	}
}

func (h *Hub) sleepHandler(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.drivableSession(r.Context(), p, r.PathValue("id"))
	if err == nil && s.State != store.Active && s.State != store.Frozen {
		err = fmt.Errorf("the Session is %s, not awake: %w", s.State, errdefs.ErrConflict)
	}
	if err == nil {
		err = h.sleepSession(r.Context(), s, "its Creator put it to sleep")
	}
	h.answerNoContent(w, r, err)
}

func (h *Hub) wakeHandler(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.drivableSession(r.Context(), p, r.PathValue("id"))
	if err == nil && s.State != store.Asleep {
		err = fmt.Errorf("the Session is %s, not asleep: %w", s.State, errdefs.ErrConflict)
	}
	if err == nil && h.runnerConn(s.RunnerID) == nil {
		err = fmt.Errorf("the Session's Runner is not connected; it wakes when the Runner is back and a prompt waits: %w", errdefs.ErrUnavailable)
	}
	if err == nil {
		err = h.wakeSession(r.Context(), s)
	}
	h.answerNoContent(w, r, err)
}

// takeBack answers a (re)connected Runner's hello: the Sessions it still
// runs become Active again with fresh mod tokens; those the Hub thought
// awake on it that no longer run go to sleep, and wake at once if prompts
// wait. A Session it reports that the Hub does not take back, the Runner
// stops.
func (h *Hub) takeBack(ctx context.Context, rc *runnerConn, running []string) []protocol.ResumedSession {
	reported := map[string]bool{}
	for _, id := range running {
		reported[id] = true
	}
	ss, err := h.store.Sessions(ctx, store.SessionFilter{RunnerID: rc.runner.ID, States: []store.SessionState{store.Active, store.Frozen}})
	if err != nil {
		h.log.Error("sessions of a reconnected runner", "err", err)
		return nil
	}
	var out []protocol.ResumedSession
	for _, s := range ss {
		if !reported[s.ID] {
			h.store.RevokeModToken(ctx, s.ID)
			h.setLive(s.ID, func(l *live) { l.ready, l.busy, l.set = false, false, nil })
			h.record(ctx, s.ID, protocol.Event{Kind: protocol.EventNote, Text: "Claude Code was not running when its Runner came back."})
			h.store.SetSessionState(ctx, s.ID, store.Asleep, "Claude Code was not running when its Runner came back")
			if q, _ := h.store.Prompts(ctx, s.ID); len(q) > 0 {
				s.State = store.Asleep
				h.wakeSession(ctx, s)
			}
			continue
		}
		tok, err := h.store.IssueModToken(ctx, s.ID)
		if err != nil {
			continue
		}
		offsets, _ := h.store.TranscriptOffsets(ctx, s.ID)
		h.store.SetSessionState(ctx, s.ID, store.Active, "")
		h.setLive(s.ID, func(l *live) { l.ready, l.busy = true, false })
		out = append(out, protocol.ResumedSession{SessionID: s.ID, ModToken: tok, Offsets: offsets})
		// A prompt typed now reaches the mod's hook once the Runner has the
		// mod token: the hook retries until then.
		go h.dispatch(s.ID)
	}
	return out
}

// freezeSessions marks a Runner's awake Sessions Frozen when it goes away:
// their Claude Code keeps running in the Sandbox.
func (h *Hub) freezeSessions(runnerID string) {
	ctx := context.Background()
	ss, err := h.store.Sessions(ctx, store.SessionFilter{RunnerID: runnerID, States: []store.SessionState{store.Active}})
	if err != nil {
		return
	}
	for _, s := range ss {
		h.setLive(s.ID, func(l *live) { l.ready = false })
		h.store.SetSessionState(ctx, s.ID, store.Frozen, "its Runner is not connected")
	}
}
