package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/attempts"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/web"
)

// attemptsAPI serves attempt sets: one prompt started as several ordinary
// Sessions (each through the one start, so placed and limited as any),
// and the set ranked by the Environment's check, its diffs and its cost.
type attemptsAPI struct {
	core
	sessions sessionsAPI
	changes  changesAPI
	rows     sessionRows
	masks    *masks.Sets
	envs     *environment.Service
}

// createAttempts answers POST /api/attempts. A size out of range is
// refused before anything is made; a start refused for the first attempt
// makes nothing either.
func (h attemptsAPI) createAttempts(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.NewAttempts
	err := readJSON(r, &req)
	if err == nil {
		err = attempts.CheckCount(req.Attempts)
	}
	var set store.AttemptSet
	if err == nil {
		set, err = h.startSet(r.Context(), p, req, title(req.Prompt))
	}
	var out api.AttemptSet
	if err == nil {
		out, err = h.ranked(r.Context(), p, set)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// startSet starts the set's Sessions one after another, titled name; the
// set is recorded with the first.
func (h attemptsAPI) startSet(ctx context.Context, p Principal, req api.NewAttempts, name string) (store.AttemptSet, error) {
	var set store.AttemptSet
	for i := 1; i <= req.Attempts; i++ {
		s, err := h.sessions.start(ctx, p, req.NewSession, fmt.Sprintf("%s (attempt %d of %d)", name, i, req.Attempts))
		if err == nil && i == 1 {
			var masked string
			if masked, err = h.masks.MaskTitle(ctx, s.RepoID, p.User.ID, name); err == nil {
				set, err = h.store.Attempts.CreateAttemptSet(ctx, store.AttemptSet{CreatorID: p.User.ID, RepoID: s.RepoID, Title: masked})
			}
		}
		if err == nil {
			err = h.store.Attempts.AddAttempt(ctx, set.ID, i, s.ID)
		}
		if err != nil && i > 1 {
			return set, fmt.Errorf("the attempt set %s has %d of its %d attempts; the next did not start: %w", set.ID, i-1, req.Attempts, err)
		}
		if err != nil {
			return set, err
		}
		set.Sessions = append(set.Sessions, s.ID)
	}
	return set, nil
}

// showAttempts answers GET /api/attempts/{id} to whoever may see its
// Sessions; to anyone else, as a set that does not exist.
func (h attemptsAPI) showAttempts(w http.ResponseWriter, r *http.Request, p Principal) {
	set, err := h.store.Attempts.AttemptSetByID(r.Context(), r.PathValue("id"))
	var out api.AttemptSet
	if err == nil {
		out, err = h.ranked(r.Context(), p, set)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// keepAttempt answers POST /api/attempts/{id}/keep: the Creator keeps one
// attempt, and the others sleep or are archived, as they choose. Only the
// Creator, who drives every attempt; the kept one's pull request opens
// from its view, the one button that opens pull requests.
func (h attemptsAPI) keepAttempt(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	var req api.KeepAttempt
	err := readJSON(r, &req)
	var set store.AttemptSet
	if err == nil {
		set, err = h.store.Attempts.AttemptSetByID(ctx, r.PathValue("id"))
	}
	if err == nil && !slices.Contains(set.Sessions, req.SessionID) {
		err = fmt.Errorf("the Session %q is not an attempt of this set (kndl attempts %s lists them): %w", req.SessionID, set.ID, errdefs.ErrInvalid)
	}
	if err == nil && req.Others != "sleep" && req.Others != "archive" {
		err = fmt.Errorf("others %q: say what becomes of the other attempts, sleep or archive: %w", req.Others, errdefs.ErrInvalid)
	}
	if err == nil {
		_, err = h.guard.drivableSession(ctx, p, req.SessionID)
	}
	for _, id := range set.Sessions {
		if err != nil {
			break
		}
		var s store.Session
		if id == req.SessionID {
			continue
		}
		if s, err = h.guard.drivableSession(ctx, p, id); err != nil {
			break
		}
		why := "its Creator kept another attempt"
		switch {
		case req.Others == "archive" && s.State != store.Archived:
			err = h.sessions.sessions.Archive(ctx, id, why)
		case req.Others == "sleep" && slices.Contains([]store.SessionState{store.Starting, store.Active, store.Frozen}, s.State):
			err = h.sessions.sessions.Sleep(ctx, id, why)
		}
		if err != nil {
			err = fmt.Errorf("attempt %s: %w", id, err)
		}
	}
	var out api.AttemptSet
	if err == nil {
		out, err = h.ranked(ctx, p, set)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// attemptsPage shows the set's attempts side by side, ranked: each one's
// check, diff, spend, pull request and a link to its view (transcript and
// Changes).
func (h attemptsAPI) attemptsPage(w http.ResponseWriter, r *http.Request, p Principal) {
	set, err := h.store.Attempts.AttemptSetByID(r.Context(), r.PathValue("id"))
	var out api.AttemptSet
	if err == nil {
		out, err = h.ranked(r.Context(), p, set)
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		h.notFoundPage(w, p)
		return
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type row struct {
		ID, Title, State, Check, Output, Diff, Spent string
		Rank, Place                                  int
		Pull                                         *api.Pull
	}
	rows := make([]row, len(out.Attempts))
	for i, a := range out.Attempts {
		rows[i] = row{ID: a.Session.ID, Title: a.Session.Title, State: string(a.Session.State), Check: a.Check.Line(), Diff: "unknown",
			Spent: "$0.00", Rank: i + 1, Place: a.Place, Pull: a.Session.Pull}
		if a.Check != nil {
			rows[i].Output = a.Check.Output
		}
		if a.DiffLines >= 0 {
			rows[i].Diff = fmt.Sprintf("%d lines in %d files", a.DiffLines, a.DiffFiles)
		}
		if a.Session.Spent != nil {
			rows[i].Spent = fmt.Sprintf("$%.2f", a.Session.Spent.EstimatedUSD)
		}
	}
	h.appPage(w, p, web.Attempts.WithTitle(out.Title), struct {
		ID, Title, Check, RepoID string
		IsCreator                bool
		Attempts                 []api.Attempt
		Rows                     []row
		Spent                    string
	}{out.ID, out.Title, out.Check, out.RepoID, set.CreatorID == p.User.ID, out.Attempts, rows, out.Spent.Estimate()})
}

// ranked is the set as a person sees it, its attempts best first. An
// attempt whose Changes cannot be read now (its Runner away) ranks after
// those whose can, by the rest.
func (h attemptsAPI) ranked(ctx context.Context, p Principal, set store.AttemptSet) (api.AttemptSet, error) {
	out := api.AttemptSet{ID: set.ID, RepoID: set.RepoID, Title: set.Title, CreatedAt: set.CreatedAt, Attempts: []api.Attempt{}}
	view, err := h.envs.Show(ctx, set.RepoID)
	if err != nil {
		return out, err
	}
	out.Check = view.Current.Settings.CheckCommand
	rows := make([]api.Session, 0, len(set.Sessions))
	for i, id := range set.Sessions {
		s, err := h.guard.sessionFor(ctx, p, id)
		if err != nil {
			return out, err
		}
		rows = append(rows, h.rows.now(s))
		a := api.Attempt{Place: i + 1, DiffLines: -1}
		checks, err := h.store.Attempts.TurnChecks(ctx, id)
		if err != nil {
			return out, err
		}
		if len(checks) > 0 {
			c := apiTurnCheck(checks[len(checks)-1])
			a.Check = &c
		}
		if ch, err := h.changes.changes(ctx, s); err != nil {
			a.DiffNote = err.Error()
		} else {
			a.DiffLines, a.DiffFiles = 0, len(ch.Files)
			for _, f := range ch.Files {
				a.DiffLines += f.Additions + f.Deletions
			}
		}
		out.Attempts = append(out.Attempts, a)
	}
	rows = h.rows.list(ctx, rows)
	rank := make([]attempts.Attempt, len(rows))
	for i := range rows {
		a := &out.Attempts[i]
		a.Session = rows[i]
		rank[i] = attempts.Attempt{SessionID: rows[i].ID, Passed: a.Check != nil && a.Check.Passed, DiffLines: a.DiffLines}
		if rows[i].Spent != nil {
			rank[i].CostUSD = rows[i].Spent.EstimatedUSD
		}
	}
	attempts.Rank(rank)
	u, err := h.setUsage(ctx, set)
	out.Spent = u.Spent
	if err != nil {
		return out, err
	}
	byID := map[string]api.Attempt{}
	for _, a := range out.Attempts {
		byID[a.Session.ID] = a
	}
	for i, r := range rank {
		out.Attempts[i] = byID[r.SessionID]
	}
	return out, nil
}

// apiTurnCheck is a Turn's check as the API shows it.
func apiTurnCheck(c store.TurnCheck) api.TurnCheck {
	return api.TurnCheck{Turn: c.Turn, Passed: c.Passed(), ExitCode: c.ExitCode, DurationMS: c.Duration.Milliseconds(), TimedOut: c.TimedOut,
		Output: c.Output, Error: c.Error, At: c.At}
}

// setUsage is what the set's attempts spent, in all and each.
func (h attemptsAPI) setUsage(ctx context.Context, set store.AttemptSet) (api.AttemptSetUsage, error) {
	out := api.AttemptSetUsage{Attempts: []api.AttemptSpent{}}
	by, err := h.store.Usage.SessionsUsage(ctx, set.Sessions)
	var all []store.Usage
	for i, id := range set.Sessions {
		all = append(all, by[id]...)
		out.Attempts = append(out.Attempts, api.AttemptSpent{Place: i + 1, SessionID: id, Spent: spentOf(by[id])})
	}
	out.Spent = spentOf(all)
	return out, err
}

// attemptsUsage answers GET /api/attempts/{id}/usage to whoever may see
// the set's Sessions; to anyone else, as a set that does not exist.
func (h attemptsAPI) attemptsUsage(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	set, err := h.store.Attempts.AttemptSetByID(ctx, r.PathValue("id"))
	for _, id := range set.Sessions {
		if err == nil {
			_, err = h.guard.sessionFor(ctx, p, id)
		}
	}
	var out api.AttemptSetUsage
	if err == nil {
		out, err = h.setUsage(ctx, set)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
