package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"golang.org/x/sync/singleflight"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// changesAPI serves a Session's changes (the Changes tab, kndl diff) to
// everyone with access to its Repo, as its transcript is.
type changesAPI struct {
	core
	runners *runners.Conns
	masks   *masks.Sets
	diffs   *singleflight.Group // the Hub's: one Runner's answer shared among everyone asking at once
}

// showChanges asks the Session's Runner for its Workspace's changes and
// answers them masked as its Events are. The Runner answers from the
// Workspace on its disk whatever the Session's state (asleep or archived
// too), so long as it is connected and still has it.
func (h changesAPI) showChanges(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	var ch api.Changes
	if err == nil {
		ch, err = h.changes(r.Context(), s)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ch)
}

// changes fetches a Session's Changes from its Runner and masks them,
// once for everyone asking at the same time; a caller who leaves does not
// cut the others' answer short.
func (h changesAPI) changes(ctx context.Context, s store.Session) (api.Changes, error) {
	v, err, _ := h.diffs.Do(s.ID, func() (any, error) { return h.fetchChanges(context.WithoutCancel(ctx), s) })
	if err != nil {
		return api.Changes{}, err
	}
	return v.(api.Changes), nil
}

// fetchChanges asks the Session's Runner for its Changes and masks them.
func (h changesAPI) fetchChanges(ctx context.Context, s store.Session) (api.Changes, error) {
	var ch api.Changes
	if s.RunnerID == "" {
		return ch, fmt.Errorf("the Session has no Workspace yet: no Runner has taken it: %w", errdefs.ErrConflict)
	}
	rc := h.runners.Get(s.RunnerID)
	if rc == nil {
		return ch, fmt.Errorf("the Session's Runner, which holds its Workspace, is not connected; its changes show once it is back: %w", errdefs.ErrUnavailable)
	}
	if rc.Version < protocol.DiffVersion {
		return ch, fmt.Errorf("the Session's Runner %s speaks protocol %d, which has no changes; they show once its owner updates it to a kndl of protocol %d: %w",
			rc.Runner.Name, rc.Version, protocol.DiffVersion, errdefs.ErrUnavailable)
	}
	var info protocol.SessionDiffInfo
	conn, err := h.runners.OpenStream(ctx, rc, protocol.TypeSessionDiff, func(stream string) any {
		return protocol.SessionDiff{SessionID: s.ID, Stream: stream}
	}, &info)
	if err != nil {
		return ch, fmt.Errorf("the Session's changes: %w", err)
	}
	defer conn.Close()
	if info.Size > protocol.ChangesMax {
		return ch, fmt.Errorf("the Runner's answer of %s is over the %s the Hub reads: %w", bytesText(info.Size), bytesText(protocol.ChangesMax), errdefs.ErrTooLarge)
	}
	data := make([]byte, info.Size)
	if _, err := io.ReadFull(conn, data); err != nil {
		return ch, fmt.Errorf("the Session's changes could not be read whole from its Runner: %w", errdefs.ErrUnavailable)
	}
	if err := json.Unmarshal(data, &ch); err != nil {
		return ch, fmt.Errorf("the Runner's changes are malformed: %v: %w", err, errdefs.ErrUnavailable)
	}
	mask, err := h.masks.WatcherMask(ctx, s.ID)
	if err != nil {
		return ch, err
	}
	maskChanges(&ch, mask)
	return ch, nil
}

// maskChanges masks every text of ch, as an Event's are: a file Claude
// wrote a Sensitive value into shows it masked, and so do its name and a
// commit's subject.
func maskChanges(ch *api.Changes, mask func(string) string) {
	for _, f := range []*string{&ch.Base, &ch.Branch, &ch.Cut} {
		*f = mask(*f)
	}
	for i := range ch.Files {
		f := &ch.Files[i]
		f.Path, f.OldPath, f.Diff = mask(f.Path), mask(f.OldPath), mask(f.Diff)
	}
	for i := range ch.Commits {
		c := &ch.Commits[i]
		c.Subject, c.Author = mask(c.Subject), mask(c.Author)
	}
}
