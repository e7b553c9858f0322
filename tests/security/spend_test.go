package security

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/store"
)

// TestTheUsagePageChartsSpendPerDayAndEachCapsUse: what the relays counted
// shows on the Usage page as an SVG bar a day, drawn by the Hub, beside the
// table, with each spend cap's use today against the cap; GET /api/usage
// (what kndl usage prints) gives the same figures. A Member's report shows
// their own cap, never a Repo's day, which is everyone's.
func TestTheUsagePageChartsSpendPerDayAndEachCapsUse(t *testing.T) {
	e := newEnv(t, func(c *hub.Config) { c.MemberMaxSpend = 10 })
	ctx := context.Background()
	owner := e.owner()
	olivia := e.userOf("olivia")
	s := e.session(olivia, "acme/app")
	// $2 a million input tokens, $10 a million output: $3.00.
	if err := e.store.Usage.CountReplies(ctx, s.ID, []store.Reply{{Message: "msg_a", Usage: store.Usage{Model: "claude-sonnet-5-5", Input: 1_000_000, Output: 100_000}}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Repos.SetRepoLimits(ctx, s.RepoID, store.RepoLimits{MaxTurns: 20, MaxTurnHours: 2, MaxSpend: 5}); err != nil {
		t.Fatal(err)
	}
	code, page := e.do(nil, req{method: "GET", path: "/usage?days=7", cookie: e.cookieOf(owner)})
	if code != http.StatusOK {
		t.Fatalf("GET /usage: %d", code)
	}
	chart, _, ok := strings.Cut(page[strings.Index(page, `<figure id="usage-chart">`)+1:], "</svg>")
	if !ok || strings.Count(chart, "<rect ") != 7 || !strings.Contains(chart, "$3.00 (estimate)") {
		t.Fatalf("the chart: %q, want 7 bars, today's at $3.00", chart)
	}
	for _, want := range []string{"Member olivia (HUB_MEMBER_MAX_SPEND): $3.00 of $10.00 a day used today (30%)", "Repo acme/app (--max-spend): $3.00 of $5.00 a day used today (60%)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	_, raw := e.do(nil, req{method: "GET", path: "/api/usage?days=7&all=1", cookie: e.cookieOf(owner)})
	var rep api.UsageReport
	if err := json.Unmarshal([]byte(raw), &rep); err != nil {
		t.Fatal(err)
	}
	if n := len(rep.PerDay); n != 7 || rep.PerDay[6].EstimatedUSD != 3 || rep.PerDay[0].EstimatedUSD != 0 {
		t.Fatalf("per_day %+v, want 7 days, today's $3", rep.PerDay)
	}
	if len(rep.Caps) != 2 || rep.Caps[0].Cap != "member" || rep.Caps[1].Cap != "repo" || rep.Caps[1].UsedUSD != 3 {
		t.Fatalf("caps %+v, want the Member's and the Repo's, $3 used", rep.Caps)
	}
	_, raw = e.do(nil, req{method: "GET", path: "/api/usage?days=7", cookie: e.cookieOf(owner)})
	rep = api.UsageReport{}
	json.Unmarshal([]byte(raw), &rep)
	if len(rep.Caps) != 1 || rep.Caps[0].Cap != "member" {
		t.Fatalf("one's own report's caps %+v, want only the Member's", rep.Caps)
	}
}
