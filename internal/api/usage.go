package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
)

// Spent is what model replies spent: the tokens of each kind in all, their
// cost by the price table (internal/claude/prices.json), which is an
// estimate, and the same by model.
type Spent struct {
	claude.Tokens
	// EstimatedUSD is the tokens' cost in US dollars by the price table:
	// an estimate, since a plan or a discount may charge otherwise. It
	// leaves out the models the table has no price for (Unpriced).
	EstimatedUSD float64      `json:"estimated_usd"`
	Unpriced     []string     `json:"unpriced,omitempty"`
	Models       []ModelSpent `json:"models"`
}

// ModelSpent is what replies of one model spent.
type ModelSpent struct {
	Model string `json:"model"`
	claude.Tokens
	EstimatedUSD float64 `json:"estimated_usd"`
}

// SpentOf sums usage by model, with its estimated cost.
func SpentOf(usage []protocol.Usage) Spent {
	s := Spent{Models: []ModelSpent{}}
	for _, u := range usage {
		i := slices.IndexFunc(s.Models, func(m ModelSpent) bool { return m.Model == u.Model })
		if i < 0 {
			i = len(s.Models)
			s.Models = append(s.Models, ModelSpent{Model: u.Model})
		}
		s.Models[i].Tokens.Add(u.Tokens)
	}
	for i := range s.Models {
		m := &s.Models[i]
		usd, ok := claude.EstimatedCost(m.Model, m.Tokens)
		if !ok {
			s.Unpriced = append(s.Unpriced, m.Model)
		}
		m.EstimatedUSD = usd
		s.EstimatedUSD += usd
		s.Tokens.Add(m.Tokens)
	}
	return s
}

// SessionUsage is what a Session spent (GET /api/sessions/{id}/usage): in
// all, and in each of its Turns that spent anything, in their order.
type SessionUsage struct {
	Spent
	Turns []TurnSpent `json:"turns"`
}

// TurnSpent is what one Turn spent; Turn is the seq of the turn_start
// that began it (0 for replies before any).
type TurnSpent struct {
	Turn int64 `json:"turn"`
	Spent
}

// AttemptSetUsage is what an attempt set spent (GET
// /api/attempts/{id}/usage): in all, and by attempt in their places'
// order.
type AttemptSetUsage struct {
	Spent
	Attempts []AttemptSpent `json:"attempts"`
}

// AttemptSpent is what one attempt of a set spent.
type AttemptSpent struct {
	Place     int    `json:"place"`
	SessionID string `json:"session_id"`
	Spent
}

// UsageReport is what Sessions spent, by day (UTC), Member and Repo (GET
// /api/usage?days=N): a Member's own Sessions, or with ?all=1 the Owner's
// view of everyone's.
type UsageReport struct {
	Since time.Time  `json:"since"`
	All   bool       `json:"all"`
	Total Spent      `json:"total"`
	Days  []UsageDay `json:"days"`
	// PerDay is the estimated cost of each day since Since, oldest
	// first, every day there (0 for none): the Usage page's chart.
	PerDay []DayCost `json:"per_day"`
	// Caps is each spend cap a day's spend counts toward, with today's
	// use: the caller's own Member cap, or in the Owner's report every
	// Member's with spend today and every Repo's with a cap.
	Caps []CapUse `json:"caps"`
}

// DayCost is what one day (UTC) cost, as the price table estimates it.
type DayCost struct {
	Day          string  `json:"day"`
	EstimatedUSD float64 `json:"estimated_usd"`
}

// CapUse is one spend cap and what today (UTC) used of it, in US dollars.
type CapUse struct {
	// Cap says which: "member" (HUB_MEMBER_MAX_SPEND) or "repo" (the
	// Repo's max_spend); Name is the Member's login or the Repo's name.
	Cap     string  `json:"cap"`
	Name    string  `json:"name"`
	UsedUSD float64 `json:"used_usd"`
	CapUSD  float64 `json:"cap_usd"`
}

// Line is the cap's use in a line, as kndl usage and the Usage page put
// it.
func (c CapUse) Line() string {
	what := "Member " + c.Name + " (HUB_MEMBER_MAX_SPEND)"
	if c.Cap == "repo" {
		what = "Repo " + c.Name + " (--max-spend)"
	}
	return fmt.Sprintf("%s: $%.2f of $%.2f a day used today (%.0f%%)", what, c.UsedUSD, c.CapUSD, 100*c.UsedUSD/c.CapUSD)
}

// UsageDay is what one Member's Sessions in one Repo spent on one day.
type UsageDay struct {
	Day      string `json:"day"` // 2006-01-02, in UTC
	MemberID string `json:"member_id"`
	// Member is the Member's GitHub login, or their name where they have
	// none (kndl dev's user).
	Member   string `json:"member"`
	RepoID   string `json:"repo_id"`
	RepoName string `json:"repo_name"`
	Spent
}

// MaxUsageDays bounds how far back a usage report reaches.
const MaxUsageDays = 366

// Summary is s in a line, as kndl show and the Usage page put it: each
// kind of tokens, then the cost, said to be an estimate.
func (s Spent) Summary() string {
	return fmt.Sprintf("%s input · %s output · %s cache read · %s cache write tokens · %s", Count(s.Input), Count(s.Output),
		Count(s.CacheRead), Count(s.CacheWrite), s.Estimate())
}

// Estimate is the estimated cost as shown: dollars, marked an estimate,
// naming any model it leaves out.
func (s Spent) Estimate() string {
	out := fmt.Sprintf("$%.2f estimated", s.EstimatedUSD)
	if s.EstimatedUSD > 0 && s.EstimatedUSD < 0.01 {
		out = fmt.Sprintf("$%.4f estimated", s.EstimatedUSD)
	}
	if len(s.Unpriced) > 0 {
		out += " (no price for " + strings.Join(s.Unpriced, ", ") + ")"
	}
	return out
}

// Count is a number of tokens with thousands separated: 1,234,567.
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
