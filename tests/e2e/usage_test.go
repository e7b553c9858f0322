package e2e

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestWhatASessionSpentShowsInTheCLITheAPITheViewAndTheUsagePage: a Turn
// of two model replies whose fake model reports known usage (a tool call,
// then the answer after its result) is summed once each: in kndl show
// --json (the Session's and the Turn's end), in GET
// /api/sessions/{id}/usage and GET /api/usage, in the Session view's
// header and at the Turn's end, and on the Usage page, each cost marked an
// estimate.
func TestWhatASessionSpentShowsInTheCLITheAPITheViewAndTheUsagePage(t *testing.T) {
	t.Parallel()
	s := Start(t)
	first := testkit.Usage{Input: 1000, Output: 50, CacheRead: 20000, CacheWrite: 300}
	second := testkit.Usage{Input: 2000, Output: 70, CacheRead: 21000, CacheWrite: 400}
	s.Model.On(testkit.PromptContains("count the cost"), testkit.Bash("echo counted-by-claude").WithUsage(first))
	s.Model.On(testkit.ToolResultContains("counted-by-claude"), testkit.Text("Counted.").WithUsage(second))
	v := s.NewSession(s.Repo(), "please count the cost")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the turn's end", kind(protocol.EventTurnEnd))

	turns := s.Model.Turns()
	if len(turns) != 2 {
		t.Fatalf("the model was called %d times, want the two scripted replies", len(turns))
	}
	model := turns[0].Params.Model
	want := claude.Tokens{Input: 3000, Output: 120, CacheRead: 41000, CacheWrite: 700}
	usd, priced := claude.EstimatedCost(model, want)
	if !priced {
		t.Fatalf("the price table has no row for %s, the model Claude Code asked for", model)
	}
	check := func(where string, got api.Spent) {
		t.Helper()
		if got.Tokens != want || len(got.Models) != 1 || got.Models[0].Model != model || math.Abs(got.EstimatedUSD-usd) > 1e-9 {
			t.Errorf("%s: got %+v, want %+v of %s at $%v", where, got, want, model, usd)
		}
	}

	out, errOut, code := s.kndl("", "show", v.ID, "--json")
	var shown struct {
		api.SessionView
		Events []api.Event `json:"events"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil {
		t.Fatalf("kndl show --json: exit %d, %s\n%s", code, errOut, out)
	}
	check("kndl show --json's usage", shown.Usage)
	var ends []api.Spent
	for _, e := range shown.Events {
		if e.Kind == protocol.EventTurnEnd {
			ends = append(ends, api.SpentOf(e.TurnUsage))
		}
	}
	if len(ends) != 1 {
		t.Fatalf("kndl show --json: %d turn_ends, want one", len(ends))
	}
	check("the turn_end's turn_usage", ends[0])
	if out, _, _ := s.kndl("", "show", v.ID); !strings.Contains(out, "spent:      3,000 input · 120 output · 41,000 cache read · 700 cache write tokens · $") ||
		!strings.Contains(out, "estimated") {
		t.Errorf("kndl show does not say what the Session spent as an estimate:\n%s", out)
	}

	var su api.SessionUsage
	s.Do(http.MethodGet, "/api/sessions/"+v.ID+"/usage", nil, &su)
	check("GET /api/sessions/{id}/usage", su.Spent)
	if len(su.Turns) != 1 {
		t.Fatalf("GET /api/sessions/{id}/usage: turns %+v, want one", su.Turns)
	}
	check("its Turn", su.Turns[0].Spent)
	var rep api.UsageReport
	s.Do(http.MethodGet, "/api/usage?days=1", nil, &rep)
	check("GET /api/usage's total", rep.Total)
	if len(rep.Days) != 1 || rep.Days[0].RepoID != v.RepoID || rep.Days[0].MemberID != v.CreatorID || rep.Days[0].Member == "" {
		t.Fatalf("GET /api/usage: days %+v, want one row of this Session's Creator and Repo", rep.Days)
	}

	b := NewBrowser(t)
	s.SignInDev(b)
	b.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	line := "3,000 input · 120 output · 41,000 cache read · 700 cache write tokens · $"
	b.Wait(testenv.WaitShort, "what it spent in the header", `(document.getElementById("usage").textContent || "").includes(`+jsString(line)+`) && document.getElementById("usage").textContent.includes("estimated")`)
	b.Wait(testenv.WaitShort, "what the Turn spent at its end", `[...document.querySelectorAll("#transcript .ev.turn .spent")].some(e => e.textContent.includes(`+jsString(line)+`))`)
	b.Screenshot("session-usage.png")

	b.Go(s.URL+"/usage", "#usage")
	row := Eval[string](b, `document.querySelector("#usage tbody tr").textContent`)
	total := Eval[string](b, `document.getElementById("usage-total").textContent`)
	for _, cell := range []string{"3,000", "120", "41,000", "700", "estimated"} {
		if !strings.Contains(row, cell) || !strings.Contains(total, cell) {
			t.Errorf("the Usage page's row %q and total %q, want %s in each", row, total, cell)
		}
	}
	if !strings.Contains(row, rep.Days[0].Member) || !strings.Contains(row, rep.Days[0].RepoName) {
		t.Errorf("the Usage page's row %q, want its Member %q and Repo %q", row, rep.Days[0].Member, rep.Days[0].RepoName)
	}
	if page := Eval[string](b, `document.body.textContent`); !strings.Contains(page, "estimate") {
		t.Error("the Usage page does not say its cost is an estimate")
	}
	b.Screenshot("usage-page.png")

	// The Sessions list's row: the estimated cost, each kind of tokens on
	// hover; and kndl ls's.
	cost := api.Spent{EstimatedUSD: usd}.Estimate()
	b.Go(s.URL+"/", `#repos li[data-id="`+v.ID+`"] .spent`)
	if got := Eval[string](b, `(() => { const e = document.querySelector('#repos li[data-id="`+v.ID+`"] .spent'); return e.hidden ? "" : e.textContent + " | " + e.title; })()`); !strings.HasPrefix(got, cost+" | "+line) {
		t.Errorf("the Sessions list's row says it spent %q, want %s with each kind of tokens", got, cost)
	}
	if out, _, _ := s.kndl("", "ls"); !strings.Contains(out, cost) {
		t.Errorf("kndl ls does not say the Session spent %s:\n%s", cost, out)
	}
}
