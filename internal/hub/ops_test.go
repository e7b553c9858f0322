package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"kndl.dev/kndl/internal/health"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

func (f *fixture) health(t *testing.T) (int, health.Report, string) {
	t.Helper()
	resp, body := get(t, f.srv.URL+"/health", "")
	var rep health.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatalf("/health: %d %s: %v", resp.StatusCode, body, err)
	}
	return resp.StatusCode, rep, string(body)
}

// get GETs url with bearer, if any, as its only credential.
func get(t *testing.T, url, bearer string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func check(rep health.Report, name string) (health.Result, bool) {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return health.Result{}, false
}

// TestHealthSaysWhatItChecksAndNamesWhatFails: /health shows each check
// with figures only, 200 while all pass; with the store down, 503 naming
// the checks that fail and nothing of why.
func TestHealthSaysWhatItChecksAndNamesWhatFails(t *testing.T) {
	f := newFixture(t)
	hello(t, f)
	code, rep, body := f.health(t)
	if code != http.StatusOK || rep.Status != "ok" || len(rep.Failing) != 0 {
		t.Fatalf("/health = %d %s, want 200 ok", code, body)
	}
	_, known, _ := f.store.Migrations(context.Background())
	for _, c := range []struct {
		name, value string
	}{{"store", "null"}, {"migrations", fmt.Sprintf(`{"version":%d}`, known)}, {"runners", `{"connected":1}`}} {
		got, ok := check(rep, c.name)
		if v, _ := json.Marshal(got.Value); !ok || !got.OK || string(v) != c.value {
			t.Errorf("check %s = %+v (present %v), want ok with %s", c.name, got, ok, c.value)
		}
	}
	for _, secret := range []string{f.runner.ID, `"r1"`, f.dbPath} {
		if strings.Contains(body, secret) {
			t.Errorf("/health shows %q: %s", secret, body)
		}
	}

	f.store.Close()
	code, rep, body = f.health(t)
	if code != http.StatusServiceUnavailable || rep.Status != "unavailable" || strings.Join(rep.Failing, ",") != "store,migrations" {
		t.Fatalf("/health with the store down = %d %s, want 503 naming store and migrations", code, body)
	}
	if r, _ := check(rep, "runners"); !r.OK {
		t.Errorf("runners check with the store down: %+v, want ok (it asks no store)", r)
	}
	for _, leak := range []string{"closed", "sql", f.dbPath} {
		if strings.Contains(body, leak) {
			t.Errorf("/health with the store down shows %q: %s", leak, body)
		}
	}
}

// scrape reads /metrics with token and parses it with Prometheus's text
// parser.
func (f *fixture) scrape(t *testing.T, token string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, body := get(t, f.srv.URL+"/metrics", token)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample is the value of name's metric whose labels include labels (name,
// value pairs): a histogram's sample count.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// TestMetricsFollowASessionAndItsTurn: Sessions by state, Runners
// connected, a prompt's delivery, a Turn's start and end and the store's
// calls each move /metrics as they happen.
func TestMetricsFollowASessionAndItsTurn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	token, err := f.store.Signins.CreateMetricsToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := f.store.Members.DevUser(ctx)
	repo, _ := f.store.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	m := f.scrape(t, token)
	if got := sample(m, "kndl_sessions", "state", "starting"); got != 1 {
		t.Fatalf("starting Sessions = %v, want 1", got)
	}
	if got := sample(m, "kndl_runners_connected"); got != 0 {
		t.Fatalf("Runners connected = %v, want 0", got)
	}

	// Its Runner says it still runs it: Active.
	f.store.Sessions.MoveSession(ctx, s.ID, store.Starting, store.Frozen, "", false)
	delivered := make(chan protocol.SessionDeliver, 4)
	helloWith(t, f, f.rtoken, []string{s.ID}, func(c *protocol.Conn) {
		c.Handle(protocol.TypeSessionDeliver, false, func(_ context.Context, body json.RawMessage) (any, error) {
			var d protocol.SessionDeliver
			json.Unmarshal(body, &d)
			delivered <- d
			<-t.Context().Done() // still typing: the hook says it was taken
			return protocol.SessionDelivered{}, nil
		})
		c.Handle(protocol.TypeSessionStop, false, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	})
	testenv.Eventually(t, testenv.WaitShort, "the Session Active and its Runner counted", func() bool {
		m := f.scrape(t, token)
		return sample(m, "kndl_sessions", "state", "active") == 1 && sample(m, "kndl_sessions", "state", "frozen") == 0 &&
			sample(m, "kndl_sessions", "state", "starting") == 0 && sample(m, "kndl_runners_connected") == 1
	})

	s, _ = f.store.Sessions.SessionByID(ctx, s.ID)
	if _, err := f.hub.sessions.Prompt(ctx, s, store.Prompt{AuthorID: dev.ID, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-delivered:
	case <-ctxDone(t):
		t.Fatal("the prompt was not typed")
	}
	if m := f.scrape(t, token); sample(m, "kndl_prompt_delivery_seconds") != 0 || sample(m, "kndl_turns_started_total") != 0 {
		t.Fatal("a prompt typed but not taken counted as delivered, or as a Turn")
	}
	f.hub.sessions.Accepted(s.ID) // the mod's UserPromptSubmit
	m = f.scrape(t, token)
	if got := sample(m, "kndl_prompt_delivery_seconds"); got != 1 {
		t.Errorf("prompt deliveries timed = %v, want 1", got)
	}
	if got, ended := sample(m, "kndl_turns_started_total"), sample(m, "kndl_turns_ended_total"); got != 1 || ended != 0 {
		t.Errorf("Turns started, ended = %v, %v; want 1, 0", got, ended)
	}
	f.hub.sessions.TurnEnded(s.ID)
	f.hub.sessions.TurnEnded(s.ID) // a second telling of the same end
	if got := sample(f.scrape(t, token), "kndl_turns_ended_total"); got != 1 {
		t.Errorf("Turns ended = %v, want 1", got)
	}

	if err := f.hub.sessions.Sleep(ctx, s.ID, "test"); err != nil {
		t.Fatal(err)
	}
	m = f.scrape(t, token)
	if sample(m, "kndl_sessions", "state", "asleep") != 1 || sample(m, "kndl_sessions", "state", "active") != 0 {
		t.Errorf("after sleep: asleep %v, active %v; want 1, 0", sample(m, "kndl_sessions", "state", "asleep"), sample(m, "kndl_sessions", "state", "active"))
	}
	for _, op := range []string{"session_by_id", "move_session", "take_prompt", "check_metrics_token"} {
		if got := sample(m, "kndl_store_call_seconds", "op", op); got < 1 {
			t.Errorf("store calls %s timed = %v, want some", op, got)
		}
	}
}

func ctxDone(t *testing.T) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitShort)
	t.Cleanup(cancel)
	return ctx.Done()
}
