package hub

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/web"
)

// usageAPI answers what Sessions spent: a Session's in all and by Turn,
// and a report by day, Member and Repo (the Usage page's).
type usageAPI struct{ core }

// defaultUsageDays is how far back a report reaches when not asked.
const defaultUsageDays = 30

// spentOf is the store's sums by model as the API shows them, with the
// estimated cost.
func spentOf(sums []store.Usage) api.Spent {
	us := make([]protocol.Usage, len(sums))
	for i, u := range sums {
		us[i] = protocol.Usage{Model: u.Model, Tokens: claude.Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}}
	}
	return api.SpentOf(us)
}

// sessionSpent is what a Session spent.
func (h core) sessionSpent(ctx context.Context, id string) (api.Spent, error) {
	sums, err := h.store.Usage.SessionUsage(ctx, id)
	return spentOf(sums), err
}

// sessionUsage answers GET /api/sessions/{id}/usage to everyone who may
// read the Session.
func (h usageAPI) sessionUsage(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	var turns []store.TurnUsage
	if err == nil {
		turns, err = h.store.Usage.SessionTurnUsage(r.Context(), s.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var all []store.Usage
	out := api.SessionUsage{Turns: []api.TurnSpent{}}
	for i := 0; i < len(turns); {
		j := i
		for j < len(turns) && turns[j].Turn == turns[i].Turn {
			all = append(all, turns[j].Usage)
			j++
		}
		out.Turns = append(out.Turns, api.TurnSpent{Turn: turns[i].Turn, Spent: spentOf(usageOf(turns[i:j]))})
		i = j
	}
	out.Spent = spentOf(all)
	writeJSON(w, http.StatusOK, out)
}

func usageOf(turns []store.TurnUsage) []store.Usage {
	out := make([]store.Usage, len(turns))
	for i, t := range turns {
		out[i] = t.Usage
	}
	return out
}

// report is what Sessions spent over the last ?days=N (default 30): p's
// own, or with ?all=1 everyone's, which only the Owner sees.
func (h usageAPI) report(r *http.Request, p Principal) (api.UsageReport, error) {
	days := defaultUsageDays
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxUsageDays {
			return api.UsageReport{}, fmt.Errorf("days %q: want a whole number of days from 1 to %d: %w", v, api.MaxUsageDays, errdefs.ErrInvalid)
		}
		days = n
	}
	all := r.URL.Query().Get("all") == "1"
	creator := p.User.ID
	if all {
		if err := ownerOnly(p, "sees everyone's usage; leave out all=1 for your own"); err != nil {
			return api.UsageReport{}, err
		}
		creator = ""
	}
	ctx := r.Context()
	since := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1-days)
	rows, err := h.store.Usage.UsageByDay(ctx, since, creator)
	if err != nil {
		return api.UsageReport{}, err
	}
	logins, repos := map[string]string{}, map[string]string{}
	if ms, err := h.store.Members.List(ctx); err == nil {
		for _, m := range ms {
			logins[m.ID] = cmp.Or(m.GitHubLogin, m.Name)
		}
	}
	if rs, err := h.store.Repos.List(ctx); err == nil {
		for _, rp := range rs {
			repos[rp.ID] = rp.Name
		}
	}
	out := api.UsageReport{Since: since, All: all, Days: []api.UsageDay{}, Caps: []api.CapUse{}}
	perDay := map[string]float64{}
	today := time.Now().UTC().Format(time.DateOnly)
	todayOf := map[string][]store.Usage{} // by Member, then by Repo ("repo:" id)
	var total []store.Usage
	for i := 0; i < len(rows); {
		j := i
		var sums []store.Usage
		for j < len(rows) && rows[j].Day.Equal(rows[i].Day) && rows[j].CreatorID == rows[i].CreatorID && rows[j].RepoID == rows[i].RepoID {
			sums = append(sums, rows[j].Usage)
			j++
		}
		d := rows[i]
		out.Days = append(out.Days, api.UsageDay{Day: d.Day.Format(time.DateOnly), MemberID: d.CreatorID, Member: logins[d.CreatorID],
			RepoID: d.RepoID, RepoName: repos[d.RepoID], Spent: spentOf(sums)})
		total = append(total, sums...)
		perDay[d.Day.Format(time.DateOnly)] += out.Days[len(out.Days)-1].EstimatedUSD
		if d.Day.Format(time.DateOnly) == today {
			todayOf[d.CreatorID] = append(todayOf[d.CreatorID], sums...)
			todayOf["repo:"+d.RepoID] = append(todayOf["repo:"+d.RepoID], sums...)
		}
		i = j
	}
	out.Total = spentOf(total)
	for d := since; !d.After(time.Now().UTC()); d = d.AddDate(0, 0, 1) {
		day := d.Format(time.DateOnly)
		out.PerDay = append(out.PerDay, api.DayCost{Day: day, EstimatedUSD: perDay[day]})
	}
	if c := h.cfg.MemberMaxSpend; c > 0 {
		ids := []string{p.User.ID}
		if all {
			ids = nil
			for id := range todayOf {
				if !strings.HasPrefix(id, "repo:") {
					ids = append(ids, id)
				}
			}
			slices.Sort(ids)
		}
		for _, id := range ids {
			out.Caps = append(out.Caps, api.CapUse{Cap: "member", Name: cmp.Or(logins[id], p.User.GitHubLogin, p.User.Name), UsedUSD: spentOf(todayOf[id]).EstimatedUSD, CapUSD: c})
		}
	}
	if all { // a Repo's day is every Member's: the Owner's to see
		rs, err := h.store.Repos.List(ctx)
		if err != nil {
			return api.UsageReport{}, err
		}
		for _, rp := range rs {
			l, err := h.store.Repos.RepoLimits(ctx, rp.ID)
			if err != nil {
				return api.UsageReport{}, err
			}
			if l.MaxSpend > 0 {
				out.Caps = append(out.Caps, api.CapUse{Cap: "repo", Name: rp.Name, UsedUSD: spentOf(todayOf["repo:"+rp.ID]).EstimatedUSD, CapUSD: l.MaxSpend})
			}
		}
	}
	return out, nil
}

// usageReport answers GET /api/usage.
func (h usageAPI) usageReport(w http.ResponseWriter, r *http.Request, p Principal) {
	rep, err := h.report(r, p)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// usagePage is the Usage page: the person's own usage, the Owner's
// everyone's (or their own, with ?all=0).
func (h usageAPI) usagePage(w http.ResponseWriter, r *http.Request, p Principal) {
	q := r.URL.Query()
	if isOwner(p) && q.Get("all") == "" {
		q.Set("all", "1")
		r.URL.RawQuery = q.Encode()
	}
	rep, err := h.report(r, p)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type row struct{ Day, Member, Repo, Input, Output, CacheRead, CacheWrite, Cost, Models string }
	cells := func(s api.Spent) row {
		var models []string
		for _, m := range s.Models {
			models = append(models, fmt.Sprintf("%s: %s input, %s output", m.Model, api.Count(m.Input), api.Count(m.Output)))
		}
		return row{Input: api.Count(s.Input), Output: api.Count(s.Output), CacheRead: api.Count(s.CacheRead),
			CacheWrite: api.Count(s.CacheWrite), Cost: s.Estimate(), Models: strings.Join(models, "; ")}
	}
	rows := make([]row, len(rep.Days))
	for i, d := range rep.Days {
		rows[i] = cells(d.Spent)
		rows[i].Day, rows[i].Member, rows[i].Repo = d.Day, d.Member, d.RepoName
	}
	var caps []string
	for _, c := range rep.Caps {
		caps = append(caps, c.Line())
	}
	h.appPage(w, p, web.Usage, struct {
		All, Owner bool
		Since      string
		Total      row
		Rows       []row
		Chart      spendChart
		Caps       []string
	}{rep.All, isOwner(p), rep.Since.Format(time.DateOnly), cells(rep.Total), rows, chartOf(rep.PerDay), caps})
}

// spendChart is the Usage page's chart of spend per day, drawn on the
// server as SVG: one bar a day, the tallest the most spent.
type spendChart struct {
	W, H int
	Bars []spendBar
	Most string // the tallest bar's figure, for the axis
}

// spendBar is one day's bar, in the chart's own units.
type spendBar struct {
	X, Y, W, H float64
	Label      string
}

// Chart sizes, in the SVG's units.
const chartW, chartH = 600, 160

func chartOf(days []api.DayCost) spendChart {
	c := spendChart{W: chartW, H: chartH}
	most := 0.0
	for _, d := range days {
		most = max(most, d.EstimatedUSD)
	}
	c.Most = fmt.Sprintf("$%.2f", most)
	if len(days) == 0 {
		return c
	}
	step := float64(chartW) / float64(len(days))
	for i, d := range days {
		h := 0.0
		if most > 0 {
			h = (chartH - 20) * d.EstimatedUSD / most
		}
		c.Bars = append(c.Bars, spendBar{X: float64(i)*step + step*0.1, Y: chartH - h, W: step * 0.8, H: h,
			Label: fmt.Sprintf("%s: $%.2f (estimate)", d.Day, d.EstimatedUSD)})
	}
	return c
}
