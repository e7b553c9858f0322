package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/hub/notify"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// attemptsFixture is a Hub with a Repo whose Environment names a check
// and has a Sensitive Variable, and a Runner on the real protocol that
// takes each start and answers each check as checks says.
type attemptsFixture struct {
	*fixture
	repo   api.Repo
	secret string
	mu     sync.Mutex
	checks map[string]protocol.SessionCheckResult // by Session id
	asked  []protocol.SessionCheck
}

func newAttemptsFixture(t *testing.T, tune ...func(*Config)) *attemptsFixture {
	t.Helper()
	f := &attemptsFixture{fixture: newFixture(t, tune...), secret: "check-secret-value-73", checks: map[string]protocol.SessionCheckResult{}}
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	f.hub.StoreClaudeToken(ctx, dev.ID, setupToken)
	_, body := f.call(t, http.MethodPost, "/api/repos", `{"url":"/srv/app"}`)
	json.Unmarshal([]byte(body), &f.repo)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPut, "/api/repos/" + f.repo.ID + "/variables/TOKEN", `{"value":"` + f.secret + `","sensitive":true}`},
		{http.MethodPut, "/api/repos/" + f.repo.ID + "/environment/draft", `{"check":"make test"}`},
		{http.MethodPost, "/api/repos/" + f.repo.ID + "/environment/apply", ``},
	} {
		if code, body := f.call(t, c.method, c.path, c.body); code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
	hello(t, f.fixture, func(c *protocol.Conn) {
		c.Handle(protocol.TypeSessionStart, false, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
		c.Handle(protocol.TypeSessionStop, false, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
		c.Handle(protocol.TypeSessionCheck, false, func(_ context.Context, body json.RawMessage) (any, error) {
			var req protocol.SessionCheck
			json.Unmarshal(body, &req)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.asked = append(f.asked, req)
			return f.checks[req.SessionID], nil
		})
	})
	return f
}

// start posts an attempt set of n and returns the Hub's answer.
func (f *attemptsFixture) start(t *testing.T, n string) (int, api.AttemptSet, string) {
	t.Helper()
	code, body := f.call(t, http.MethodPost, "/api/attempts", `{"repo":"/srv/app","prompt":"make the tests pass","attempts":`+n+`}`)
	var set api.AttemptSet
	json.Unmarshal([]byte(body), &set)
	return code, set, body
}

// started starts a set of n attempts, which must be made.
func (f *attemptsFixture) started(t *testing.T, n string) api.AttemptSet {
	t.Helper()
	code, set, body := f.start(t, n)
	if code != http.StatusCreated {
		t.Fatalf("POST /api/attempts: got %d %s", code, body)
	}
	return set
}

// endTurn records a Turn of Session id that started and ended, once it
// is Active (its start has recorded its Environment version), and waits
// for its check to be kept.
func (f *attemptsFixture) endTurn(t *testing.T, id string) store.TurnCheck {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, testenv.WaitShort, "the attempt Active", func() bool {
		s, err := f.store.Sessions.SessionByID(ctx, id)
		return err == nil && s.State == store.Active
	})
	for _, kind := range []string{protocol.EventTurnStart, protocol.EventTurnEnd} {
		if err := f.hub.sessions.Record(ctx, id, protocol.Event{Kind: kind}); err != nil {
			t.Fatal(err)
		}
	}
	var got []store.TurnCheck
	testenv.Eventually(t, testenv.WaitShort, "the Turn's check kept", func() bool {
		got, _ = f.store.Attempts.TurnChecks(ctx, id)
		return len(got) == 1
	})
	return got[0]
}

// TestAnAttemptSetOutsideTwoToEightIsRefusedAndMakesNothing: --attempts
// 0, 1 or 9 is a 400 naming the range, and no Session is made.
func TestAnAttemptSetOutsideTwoToEightIsRefusedAndMakesNothing(t *testing.T) {
	f := newAttemptsFixture(t)
	for _, n := range []string{"0", "1", "9", "-3"} {
		code, _, body := f.start(t, n)
		if code != http.StatusBadRequest || !strings.Contains(body, "2 to 8") {
			t.Errorf("attempts %s: got %d %s, want 400 naming 2 to 8", n, code, body)
		}
	}
	if ss, _ := f.store.Sessions.List(context.Background(), store.SessionFilter{}); len(ss) != 0 {
		t.Fatalf("got %d Sessions after refused sets, want none", len(ss))
	}
}

// TestAnAttemptSetsSessionsCountTowardTheAwakeLimit: with one awake
// Session a Member, a set of 3 starts one attempt and the other two wait
// Asleep in the Member's line, as any three Sessions would.
func TestAnAttemptSetsSessionsCountTowardTheAwakeLimit(t *testing.T) {
	f := newAttemptsFixture(t, func(c *Config) { c.MemberMaxAwake = 1 })
	code, set, body := f.start(t, "3")
	if code != http.StatusCreated || len(set.Attempts) != 3 {
		t.Fatalf("POST /api/attempts: got %d %s, want 201 with 3 attempts", code, body)
	}
	states := map[api.SessionState]int{}
	for _, a := range set.Attempts {
		s, err := f.store.Sessions.SessionByID(context.Background(), a.Session.ID)
		if err != nil {
			t.Fatal(err)
		}
		states[api.SessionState(s.State)]++
		if s.State == store.Asleep && s.Place == 0 {
			t.Errorf("attempt %d asleep with no place in line", a.Place)
		}
	}
	if states[api.Starting]+states[api.Active] != 1 || states[api.Asleep] != 2 {
		t.Fatalf("got states %v, want 1 awake and 2 asleep in line", states)
	}
}

// TestAttemptsRankByTheirChecksWhichTheRunnerRanAfterTheTurn: the check
// runs in each attempt's Sandbox after its Turn, kept with that Turn; the
// one that passed ranks first, the failed one next, the unchecked last.
func TestAttemptsRankByTheirChecksWhichTheRunnerRanAfterTheTurn(t *testing.T) {
	f := newAttemptsFixture(t)
	code, set, body := f.start(t, "3")
	if code != http.StatusCreated || len(set.Attempts) != 3 || set.Check != "make test" {
		t.Fatalf("POST /api/attempts: got %d %s", code, body)
	}
	ids := []string{set.Attempts[0].Session.ID, set.Attempts[1].Session.ID, set.Attempts[2].Session.ID}
	f.mu.Lock()
	f.checks[ids[0]] = protocol.SessionCheckResult{ExitCode: 2, DurationMS: 1500, Output: "FAIL: TestX"}
	f.checks[ids[1]] = protocol.SessionCheckResult{ExitCode: 0, DurationMS: 900, Output: "ok"}
	f.mu.Unlock()
	if c := f.endTurn(t, ids[0]); c.ExitCode != 2 || c.Passed() || c.Output != "FAIL: TestX" || c.Turn == 0 {
		t.Errorf("attempt 1's check: got %+v, want exit 2 kept with its Turn", c)
	}
	f.endTurn(t, ids[1])
	f.mu.Lock()
	if len(f.asked) != 2 || f.asked[0].Command != "make test" || f.asked[0].TimeoutMS <= 0 {
		t.Errorf("the Runner was asked %+v, want make test twice with a timeout", f.asked)
	}
	f.mu.Unlock()

	code, body = f.call(t, http.MethodGet, "/api/attempts/"+set.ID, "")
	var got api.AttemptSet
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/attempts/%s: got %d %s", set.ID, code, body)
	}
	var order []int
	for _, a := range got.Attempts {
		order = append(order, a.Place)
	}
	if len(order) != 3 || order[0] != 2 || order[1] != 1 || order[2] != 3 {
		t.Errorf("got the attempts ranked %v, want [2 1 3]: passed, failed, not run", order)
	}
	if c := got.Attempts[0].Check; c == nil || !c.Passed || c.DurationMS != 900 {
		t.Errorf("the first's check: got %+v, want passed in 900 ms", c)
	}
}

// TestAChecksOutputIsMaskedThenCut: the Sandbox's output is masked with
// the Session's values before the Hub keeps its last 4 KiB, so a value
// across the Hub's cut is not kept in part, and one cut at the start of
// the Runner's window lies in what the Hub drops.
func TestAChecksOutputIsMaskedThenCut(t *testing.T) {
	f := newAttemptsFixture(t)
	set := f.started(t, "2")
	id := set.Attempts[0].Session.ID
	// The last CheckKeep bytes start 6 bytes into the second value.
	out := f.secret[6:] + strings.Repeat("y", 5000) + f.secret + strings.Repeat("z", protocol.CheckKeep-len(f.secret)+6-len("\nTOKEN=\n")-len(f.secret)) +
		"\nTOKEN=" + f.secret + "\n"
	f.mu.Lock()
	f.checks[id] = protocol.SessionCheckResult{ExitCode: 1, Output: out}
	f.mu.Unlock()
	c := f.endTurn(t, id)
	if strings.Contains(c.Output, f.secret) || strings.Contains(c.Output, f.secret[6:]) || len(c.Output) > protocol.CheckKeep || !strings.HasSuffix(c.Output, "\n") {
		t.Errorf("got the kept output %q (%d bytes), want its last %d bytes with the value masked", c.Output[max(0, len(c.Output)-80):], len(c.Output), protocol.CheckKeep)
	}
}

// TestKeepingAnAttemptSleepsTheOthers: its Creator keeps one attempt and
// the others go to sleep; a Session not of the set, or others that are
// neither sleep nor archive, is a 400 that changes nothing.
func TestKeepingAnAttemptSleepsTheOthers(t *testing.T) {
	f := newAttemptsFixture(t)
	code, set, body := f.start(t, "3")
	if code != http.StatusCreated {
		t.Fatalf("POST /api/attempts: got %d %s", code, body)
	}
	ctx := context.Background()
	awake := func() int {
		n := 0
		for _, a := range set.Attempts {
			if s, _ := f.store.Sessions.SessionByID(ctx, a.Session.ID); s.State != store.Asleep {
				n++
			}
		}
		return n
	}
	testenv.Eventually(t, testenv.WaitShort, "the attempts Active", func() bool { return awake() == 3 })
	kept := set.Attempts[1].Session.ID
	for _, bad := range []string{`{"session_id":"` + kept + `","others":"delete"}`, `{"session_id":"no-such","others":"sleep"}`} {
		if code, body := f.call(t, http.MethodPost, "/api/attempts/"+set.ID+"/keep", bad); code != http.StatusBadRequest {
			t.Errorf("keep %s: got %d %s, want 400", bad, code, body)
		}
	}
	if n := awake(); n != 3 {
		t.Fatalf("after refused keeps: got %d awake, want 3", n)
	}
	if code, body := f.call(t, http.MethodPost, "/api/attempts/"+set.ID+"/keep", `{"session_id":"`+kept+`","others":"sleep"}`); code != http.StatusOK {
		t.Fatalf("keep: got %d %s", code, body)
	}
	testenv.Eventually(t, testenv.WaitShort, "the other two asleep", func() bool {
		s, _ := f.store.Sessions.SessionByID(ctx, kept)
		return awake() == 1 && s.State == store.Active
	})
}

// TestAttemptsReadyIsToldOnceWhenEveryFirstTurnAndCheckEnded: the
// Creator's webhook gets attempts_ready once every attempt's first Turn
// and its check ended, saying how many passed and linking the set's page;
// a later Turn and check tell it no second time.
func TestAttemptsReadyIsToldOnceWhenEveryFirstTurnAndCheckEnded(t *testing.T) {
	f := newAttemptsFixture(t, loopbackHooks(time.Second))
	ep := newEndpoint(t, nil)
	f.addWebhook(t, f.cli, ep.URL, "json")
	set := f.started(t, "2")
	ids := []string{set.Attempts[0].Session.ID, set.Attempts[1].Session.ID}
	f.mu.Lock()
	f.checks[ids[0]] = protocol.SessionCheckResult{ExitCode: 1, Output: "FAIL"}
	f.checks[ids[1]] = protocol.SessionCheckResult{ExitCode: 0, Output: "ok"}
	f.mu.Unlock()
	f.endTurn(t, ids[0])
	f.endTurn(t, ids[1])
	var ready []notify.Event
	for len(ready) == 0 {
		if p := ep.next(t); p.kind == notify.AttemptsReady {
			var ev notify.Event
			json.Unmarshal(p.body, &ev)
			ready = append(ready, ev)
		}
	}
	if ev := ready[0]; !strings.Contains(ev.Text, "2 attempts") || !strings.Contains(ev.Text, "1 passed") ||
		!strings.HasSuffix(ev.Text, "/attempts/"+set.ID) || ev.Session.ID != ids[0] {
		t.Errorf("got %+v, want the set's 2 attempts, 1 passed, its page, about its first attempt", ev)
	}
	// A second Turn of the first attempt, and its check.
	ctx := context.Background()
	for _, kind := range []string{protocol.EventTurnStart, protocol.EventTurnEnd} {
		if err := f.hub.sessions.Record(ctx, ids[0], protocol.Event{Kind: kind}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, testenv.WaitShort, "the second Turn's check kept", func() bool {
		got, _ := f.store.Attempts.TurnChecks(ctx, ids[0])
		return len(got) == 2
	})
	for done := time.After(500 * time.Millisecond); ; {
		select {
		case p := <-ep.got:
			if p.kind == notify.AttemptsReady {
				t.Fatalf("got attempts_ready a second time: %s", p.body)
			}
			continue
		case <-done:
		}
		break
	}
}

// TestAnAttemptSetShowsWhatEachAttemptAndTheWholeSetSpent: the set's
// answer and its usage route give each attempt's spend and the sum.
func TestAnAttemptSetShowsWhatEachAttemptAndTheWholeSetSpent(t *testing.T) {
	f := newAttemptsFixture(t)
	set := f.started(t, "2")
	ctx := context.Background()
	for i, a := range set.Attempts {
		r := store.Reply{Message: "m" + a.Session.ID, Usage: store.Usage{Model: "claude-sonnet-5-5", Input: int64(1000 * (i + 1)), Output: 10}}
		if err := f.store.Usage.CountReplies(ctx, a.Session.ID, []store.Reply{r}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	code, body := f.call(t, http.MethodGet, "/api/attempts/"+set.ID+"/usage", "")
	var u api.AttemptSetUsage
	if err := json.Unmarshal([]byte(body), &u); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/attempts/%s/usage: got %d %s", set.ID, code, body)
	}
	if len(u.Attempts) != 2 || u.Attempts[0].Input != 1000 || u.Attempts[1].Input != 2000 || u.Attempts[1].Place != 2 ||
		u.Input != 3000 || u.EstimatedUSD <= u.Attempts[1].EstimatedUSD {
		t.Errorf("got %+v, want attempts of 1000 and 2000 input tokens, 3000 in all", u)
	}
	code, body = f.call(t, http.MethodGet, "/api/attempts/"+set.ID, "")
	var got api.AttemptSet
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/attempts/%s: got %d %s", set.ID, code, body)
	}
	if got.Spent.Input != 3000 || got.Spent.EstimatedUSD != u.EstimatedUSD || got.Attempts[0].Session.Spent == nil {
		t.Errorf("got the set's spend %+v and an attempt's %+v, want 3000 input tokens in all, %v, and each attempt's", got.Spent, got.Attempts[0].Session.Spent, u.EstimatedUSD)
	}
}

// TestASessionsViewNamesItsAttemptSetAndWhatItWasForkedFrom: GET
// /api/sessions/{id} (kndl show --json) names the set an attempt is of
// and the parent and Turn a fork was copied at; neither for a Session of
// none.
func TestASessionsViewNamesItsAttemptSetAndWhatItWasForkedFrom(t *testing.T) {
	f := newAttemptsFixture(t)
	set := f.started(t, "2")
	ctx := context.Background()
	parent, err := f.store.Sessions.SessionByID(ctx, set.Attempts[0].Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	fork, err := f.store.Sessions.CreateFork(ctx, parent, uuid.NewString(), "a fork", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	view := func(id string) api.SessionView {
		code, body := f.call(t, http.MethodGet, "/api/sessions/"+id, "")
		var v api.SessionView
		if err := json.Unmarshal([]byte(body), &v); code != http.StatusOK || err != nil {
			t.Fatalf("GET /api/sessions/%s: got %d %s", id, code, body)
		}
		return v
	}
	if v := view(parent.ID); v.AttemptSet != set.ID || v.ForkOf != nil {
		t.Errorf("the attempt: got set %q, fork of %+v; want set %s and no fork", v.AttemptSet, v.ForkOf, set.ID)
	}
	if v := view(fork.ID); v.AttemptSet != "" || v.ForkOf == nil || v.ForkOf.ParentID != parent.ID || v.ForkOf.Turn != 3 {
		t.Errorf("the fork: got set %q, fork of %+v; want no set, a fork of %s at Turn 3", v.AttemptSet, v.ForkOf, parent.ID)
	}
}

// TestAnAttemptThatFailedHoldsItsSetBackNoLonger: with one attempt's
// first Turn and check ended and the other failed for good (its Runner
// removed) before any, the set is ready and its Creator told once.
func TestAnAttemptThatFailedHoldsItsSetBackNoLonger(t *testing.T) {
	f := newAttemptsFixture(t, loopbackHooks(time.Second))
	ep := newEndpoint(t, nil)
	f.addWebhook(t, f.cli, ep.URL, "json")
	set := f.started(t, "2")
	f.endTurn(t, set.Attempts[0].Session.ID)
	f.hub.sessions.RunnerRemoved(context.Background(), f.runner.ID, "its Runner was removed")
	var ready []string
	for done := time.After(2 * time.Second); ; {
		select {
		case p := <-ep.got:
			if p.kind == notify.AttemptsReady {
				ready = append(ready, string(p.body))
			}
			continue
		case <-done:
		}
		break
	}
	if len(ready) != 1 || !strings.Contains(ready[0], "/attempts/"+set.ID) {
		t.Fatalf("got attempts_ready %q, want it once for the set", ready)
	}
}

// TestAMentionWithAttemptsStartsASetCountedAsThatManySessions: on a Repo
// that allows it (PATCH .../limits, github_attempts), "@app attempts=3"
// starts one attempt set of 3 Sessions started from GitHub, so each is
// held to the Repo's limits for those and counts in its Creator's awake
// Sessions: with 2 allowed awake, 2 start and the third waits in line.
// Each has its reply in the thread, linking the set.
func TestAMentionWithAttemptsStartsASetCountedAsThatManySessions(t *testing.T) {
	gh := testkit.NewGitHub(t)
	const secret = "webhook-secret"
	f := newFixture(t, withGitHub(gh, time.Minute), func(c *Config) { c.GitHubWebhookSecret, c.MemberMaxAwake = secret, 2 })
	gh.SetWebhook(f.srv.URL+"/github/webhook", secret)
	ctx := context.Background()
	gu := gh.AddUser("olivia")
	olivia, oliviaTok := admitted(t, f, store.GitHubIdentity{ID: gu.ID, Login: gu.Login})
	gh.InstallApp("acme/app")
	gh.SetCollaborator("acme/app", "olivia", true)
	f.hub.StoreClaudeToken(ctx, olivia.ID, setupToken)
	gh.OpenIssue("acme/app", "olivia", "Crash on start", "It crashes when HOME is unset.")
	rn, tok, err := f.store.Runners.CreateRunner(ctx, "olivias", olivia.ID)
	if err != nil {
		t.Fatal(err)
	}
	helloWith(t, f, tok, nil, func(c *protocol.Conn) {
		c.Handle(protocol.TypeSessionStart, false, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
		c.Handle(protocol.TypeSessionStop, false, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	})
	testenv.Eventually(t, testenv.WaitShort, "the Hub sees olivia's Runner", func() bool { return f.hub.Connected(rn.ID) })
	repo, err := f.store.Repos.EnsureRepo(ctx, gh.RepoURL("acme/app"), "acme/app")
	if err != nil {
		t.Fatal(err)
	}
	if code, raw := askAs(t, f, oliviaTok, http.MethodPatch, "/api/repos/"+repo.ID+"/limits", map[string]any{"github_attempts": true}); code != http.StatusOK ||
		!strings.Contains(string(raw), `"github_attempts":true`) {
		t.Fatalf("PATCH limits: got %d %s, want github_attempts on", code, raw)
	}

	if _, code := gh.Comment(t, "acme/app", 1, "olivia", "@kndl-test attempts=3 please fix this"); code != http.StatusAccepted {
		t.Fatalf("the delivery got %d, want 202", code)
	}
	var ss []store.Session
	var setID string
	testenv.EventuallyShowing(t, testenv.WaitShort, func() bool {
		ss, _ = f.store.Sessions.List(ctx, store.SessionFilter{})
		if len(ss) == 0 {
			return false
		}
		setID, _ = f.store.Attempts.AttemptSetOf(ctx, ss[0].ID)
		set, err := f.store.Attempts.AttemptSetByID(ctx, setID)
		return err == nil && len(set.Sessions) == 3 && len(ss) == 3
	}, func() string {
		return fmt.Sprintf("got %d Sessions and the thread %+v, want the set's 3", len(ss), gh.Comments("acme/app", 1))
	})
	awake, inLine := 0, 0
	for _, s := range ss {
		if id, _ := f.store.Attempts.AttemptSetOf(ctx, s.ID); id != setID || !s.Triggered {
			t.Errorf("the Session %s: got the set %q, started from GitHub %v; want the set %s, from GitHub", s.ID, id, s.Triggered, setID)
		}
		switch {
		case s.State == store.Starting || s.State == store.Active:
			awake++
		case s.State == store.Asleep && s.Place > 0:
			inLine++
		}
	}
	if awake != 2 || inLine != 1 {
		t.Errorf("got %d awake and %d in line, want 2 and 1: the set counts as 3 Sessions against the awake limit of 2", awake, inLine)
	}
	testenv.Eventually(t, testenv.WaitLong, "3 replies in the thread, each linking the set", func() bool {
		n := 0
		for _, c := range gh.Comments("acme/app", 1) {
			if strings.Contains(c.Body, "/attempts/"+setID) {
				n++
			}
		}
		return n == 3
	})
}
