package hub

import (
	"context"
	"fmt"
	"strings"

	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/hub/attempts"
	"kndl.dev/kndl/internal/hub/notify"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// effects is what the Hub does when the Session Owner says what happened
// to a Session: each room ends its own part, here and nowhere else.
type effects struct{ h *Hub }

// Stopped: a Session no longer runs. Its Creator's webhooks are told if it
// failed for good (not a start the Hub retries), and its attempt set may
// be ready now. Its redaction set goes, to
// be made afresh at its next start without the values replaced meanwhile,
// with the masks the store kept for it; its Sandbox token, of no more use,
// is revoked at GitHub.
func (e effects) Stopped(sessionID string) {
	h := e.h
	ctx := h.life.Context()
	if s, err := h.store.Sessions.SessionByID(ctx, sessionID); err == nil && s.State == session.Failed && !s.Transient {
		h.notify.Session(ctx, s, notify.SessionFailed, s.StateDetail)
		h.checks.Stopped(sessionID)
	}
	if err := h.masks.Drop(ctx, sessionID); err != nil {
		h.log.Error("drop a session's kept masks", "session", sessionID, "err", err)
	}
	h.tokens.Stopped(ctx, sessionID)
}

// LeftActive: a Session left Active. What only an Active Session has goes:
// its open ports.
func (e effects) LeftActive(sessionID string) {
	h := e.h
	h.web.mu.Lock()
	delete(h.web.ports, sessionID)
	h.web.mu.Unlock()
	newViewAPI(h).portsChanged(sessionID)
}

// Recorded: a Session's Events were stored, redacted. Its Creator's
// webhooks are told of a question waiting and of a Turn's end; an
// attempt's check runs after each of its Turns.
func (e effects) Recorded(sessionID string, evs []protocol.Event) {
	for _, ev := range evs {
		if ev.Kind == protocol.EventTurnEnd && ev.Agent == "" {
			e.h.checks.TurnEnded(sessionID)
		}
	}
	kinds, texts := notify.FromEvents(evs)
	if len(kinds) == 0 {
		return
	}
	e.tell(e.h.life.Context(), sessionID, func(s store.Session) {
		for i, kind := range kinds {
			e.h.notify.Session(e.h.life.Context(), s, kind, texts[i])
		}
	})
}

// pullOpened: the pull request tracker found a new pull request from a
// Session's branch.
func (e effects) pullOpened(ctx context.Context, sessionID string, p forge.Pull) {
	e.tell(ctx, sessionID, func(s store.Session) {
		e.h.notify.Session(ctx, s, notify.PullOpened, fmt.Sprintf("#%d %s %s", p.Number, p.Title, p.URL))
	})
}

// tell calls f with the Session as stored, logging a failure to read it.
func (e effects) tell(ctx context.Context, sessionID string, f func(store.Session)) {
	s, err := e.h.store.Sessions.SessionByID(ctx, sessionID)
	if err != nil {
		e.h.log.Error("read a session to notify of it", "session", sessionID, "err", err)
		return
	}
	f(s)
}

// attemptsReady: every attempt of set setID ended its first Turn and
// that Turn's check. Its Creator's webhooks are told once (the store
// marks the set), outside any one Session's pace, with how many passed
// and the set's page.
func (e effects) attemptsReady(ctx context.Context, setID string) {
	h := e.h
	set, err := h.store.Attempts.AttemptSetByID(ctx, setID)
	var first store.Session
	if err == nil {
		first, err = h.store.Sessions.SessionByID(ctx, set.Sessions[0])
	}
	passed := 0
	for _, id := range set.Sessions {
		if err != nil {
			break
		}
		var cs []store.TurnCheck
		if cs, err = h.store.Attempts.TurnChecks(ctx, id); err == nil && len(cs) > 0 && cs[len(cs)-1].Passed() {
			passed++
		}
	}
	if err == nil {
		text := fmt.Sprintf("The %d attempts of %q are ready (each ended its first Turn and check, or failed): %d passed the check. Ranked: %s/attempts/%s",
			len(set.Sessions), set.Title, passed, strings.TrimSuffix(h.cfg.PublicURL, "/"), set.ID)
		err = h.notify.Members(ctx, first, []string{set.CreatorID}, notify.AttemptsReady, text)
	}
	if err != nil {
		h.log.Error("tell of an attempt set ready", "set", setID, "err", err)
	}
}

// newChecks makes the attempts' checks from the Hub's parts, once, in New.
func newChecks(h *Hub) *attempts.Checks {
	return attempts.NewChecks(attempts.CheckOptions{Store: attempts.CheckStore{Attempts: h.store.Attempts, Sessions: h.store.Sessions}, Logger: h.log, Mask: h.masks.WatcherMask,
		Ready:   effects{h}.attemptsReady,
		Command: func(ctx context.Context, s store.Session) (string, error) { return h.envs.CheckOf(ctx, s.ID, s.RepoID) },
		Runner: func(id string) (attempts.Requester, int) {
			if rc := h.runners.Get(id); rc != nil {
				return rc.Conn, rc.Version
			}
			return nil, 0
		}})
}

var _ session.Effects = effects{}
