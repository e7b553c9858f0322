package hub

import (
	"context"
	"time"

	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// swapWait bounds one awake Session's Runner taking a new allowlist.
const swapWait = 10 * time.Second

// egressNow takes an applied version's egress to the awake Sessions of
// its Repo before the apply answers (environment.Service.EgressNow), and
// notes in each Session's history whether it applied now or waits for
// the next wake: a Frozen one's Runner is away, so it waits. A failure is logged: the version is applied, and each
// Session gets it at its next wake regardless.
func (h environmentsAPI) egressNow(ctx context.Context, applied environment.Version) {
	awake, err := h.store.Sessions.List(ctx, store.SessionFilter{States: []store.SessionState{session.Active, session.Frozen}})
	if err != nil {
		h.log.Error("the awake sessions of an applied environment", "repo", applied.RepoID, "err", err)
		return
	}
	var ids []string
	for _, s := range awake {
		if s.RepoID == applied.RepoID {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	notes, err := h.envs.EgressNow(ctx, applied, ids, func(ctx context.Context, id string, p egress.Policy) error {
		ctx, cancel := context.WithTimeout(ctx, swapWait)
		defer cancel()
		return h.sessions.Egress(ctx, id, p)
	})
	if err != nil {
		h.log.Error("egress of an applied environment to its awake sessions", "repo", applied.RepoID, "err", err)
	}
	for id, note := range notes {
		if err := h.sessions.Record(ctx, id, protocol.Event{Kind: protocol.EventNote, Text: note}); err != nil {
			h.log.Error("note an egress change", "session", id, "err", err)
		}
	}
}
