package hub

import (
	"fmt"
	"math"
	"net/http"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// limitsAPI serves a Repo's limits for its Sessions started from GitHub,
// which internal/hub/session holds.
type limitsAPI struct{ core }

// Bounds of a Repo's limits: past them a limit is no limit, which 0 says.
const (
	maxTurnsLimit     = 10000
	maxTurnHoursLimit = 1000
	maxSpendLimit     = 1e6 // US dollars
)

func (h limitsAPI) showLimits(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoFor(r.Context(), p, r.PathValue("repo"))
	var l store.RepoLimits
	if err == nil {
		l, err = h.store.Repos.RepoLimits(r.Context(), repo.ID)
	}
	h.reply(w, r, http.StatusOK, apiRepoLimits(l), err)
}

// changeLimits sets the limits given. It takes push permission, as the
// Repo's other settings do; a Session at a limit goes on only when woken
// or prompted after.
func (h limitsAPI) changeLimits(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.RepoLimitsChange
	err := readJSON(r, &req)
	var repo store.Repo
	if err == nil {
		repo, err = h.guard.repoToChange(r.Context(), p, r.PathValue("repo"), "limits")
	}
	var l store.RepoLimits
	if err == nil {
		l, err = h.store.Repos.RepoLimits(r.Context(), repo.ID)
	}
	if err == nil {
		if req.MaxTurns != nil {
			l.MaxTurns = *req.MaxTurns
		}
		if req.MaxTurnHours != nil {
			l.MaxTurnHours = *req.MaxTurnHours
		}
		if req.MaxSpend != nil {
			l.MaxSpend = *req.MaxSpend
		}
		if req.MaxSessionSpend != nil {
			l.MaxSessionSpend = *req.MaxSessionSpend
		}
		if req.GitHubAttempts != nil {
			l.GitHubAttempts = *req.GitHubAttempts
		}
		err = checkLimits(l)
	}
	if err == nil {
		err = h.store.Repos.SetRepoLimits(r.Context(), repo.ID, l)
	}
	h.reply(w, r, http.StatusOK, apiRepoLimits(l), err)
}

func checkLimits(l store.RepoLimits) error {
	if l.MaxTurns < 0 || l.MaxTurns > maxTurnsLimit {
		return fmt.Errorf("max_turns %d: want 0 (no limit) to %d: %w", l.MaxTurns, maxTurnsLimit, errdefs.ErrInvalid)
	}
	if math.IsNaN(l.MaxTurnHours) || l.MaxTurnHours < 0 || l.MaxTurnHours > maxTurnHoursLimit {
		return fmt.Errorf("max_turn_hours %v: want 0 (no limit) to %d: %w", l.MaxTurnHours, maxTurnHoursLimit, errdefs.ErrInvalid)
	}
	for name, v := range map[string]float64{"max_spend": l.MaxSpend, "max_session_spend": l.MaxSessionSpend} {
		if math.IsNaN(v) || v < 0 || v > maxSpendLimit {
			return fmt.Errorf("%s %v: want 0 (no cap) to %.0f US dollars: %w", name, v, maxSpendLimit, errdefs.ErrInvalid)
		}
	}
	return nil
}
