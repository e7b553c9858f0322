package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape serves m's metrics as Prometheus asks for them and parses them
// with Prometheus's own text parser.
func scrape(t *testing.T, m http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	m.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("scrape: status %d, want 200", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); expfmt.ResponseFormat(http.Header{"Content-Type": {ct}}).FormatType() != expfmt.TypeTextPlain {
		t.Fatalf("Content-Type %q, want the text exposition format", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

// value is the value of the family's metric with labels, and whether
// there is one.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

type fakeGauges struct {
	mu       sync.Mutex
	sessions map[string]int
	runners  int
	pools    []Pool
	err      error
}

func (g *fakeGauges) gauges() Gauges {
	return Gauges{
		SessionsByState: func(context.Context) (map[string]int, error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.sessions, g.err
		},
		RunnersConnected: func() int {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.runners
		},
		WarmPools: func() []Pool {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.pools
		},
	}
}

func TestTheExpositionParsesAndFollowsWhatIsCounted(t *testing.T) {
	g := &fakeGauges{sessions: map[string]int{"active": 1, "asleep": 0}, runners: 1, pools: []Pool{{Runner: "r1", Ready: 2, MemoryMiB: 512}}}
	m := New(g.gauges(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	fams := scrape(t, m)
	checkValues(t, "before", fams, []want{
		{"kndl_sessions", []string{"state", "active"}, 1},
		{"kndl_sessions", []string{"state", "asleep"}, 0},
		{"kndl_runners_connected", nil, 1},
		{"kndl_warm_pool_sandboxes", []string{"runner", "r1"}, 2},
		{"kndl_warm_pool_memory_mib", []string{"runner", "r1"}, 512},
		{"kndl_turns_started_total", nil, 0},
		{"kndl_turns_ended_total", nil, 0},
		{"kndl_prompt_delivery_seconds", nil, 0},
	})

	g.mu.Lock()
	g.sessions = map[string]int{"active": 0, "asleep": 1}
	g.runners = 0
	g.pools = []Pool{{Runner: "r1", Ready: 1, MemoryMiB: 256}}
	g.mu.Unlock()
	m.TurnStarted()
	m.TurnEnded()
	m.PromptDelivered(300 * time.Millisecond)
	m.SessionFault("queue waits on nothing")
	m.GatewayRequest("inst-1", http.StatusOK)
	m.GatewayRequest("inst-1", http.StatusOK)
	m.GatewayRequest("unknown", http.StatusForbidden)
	m.StoreCall("append_events", 2*time.Millisecond)
	fams = scrape(t, m)
	checkValues(t, "after", fams, []want{
		{"kndl_sessions", []string{"state", "active"}, 0},
		{"kndl_sessions", []string{"state", "asleep"}, 1},
		{"kndl_runners_connected", nil, 0},
		{"kndl_warm_pool_sandboxes", []string{"runner", "r1"}, 1},
		{"kndl_warm_pool_memory_mib", []string{"runner", "r1"}, 256},
		{"kndl_turns_started_total", nil, 1},
		{"kndl_turns_ended_total", nil, 1},
		{"kndl_session_faults_total", []string{"kind", "queue waits on nothing"}, 1},
		{"kndl_prompt_delivery_seconds", nil, 1},
		{"kndl_gateway_requests_total", []string{"installation", "inst-1", "code", "2xx"}, 2},
		{"kndl_gateway_requests_total", []string{"installation", "unknown", "code", "4xx"}, 1},
		{"kndl_store_call_seconds", []string{"op", "append_events"}, 1},
	})
	h := fams["kndl_prompt_delivery_seconds"].Metric[0].Histogram
	if h.GetSampleSum() != 0.3 {
		t.Errorf("prompt delivery sum = %v s, want 0.3", h.GetSampleSum())
	}
	if fams["go_goroutines"] == nil || fams["process_resident_memory_bytes"] == nil {
		t.Error("the Go runtime's and the process's metrics are missing")
	}
}

// TestAStoreThatFailsLeavesTheOtherMetrics: Sessions by state can't be
// read, and the rest is still served.
func TestAStoreThatFailsLeavesTheOtherMetrics(t *testing.T) {
	g := &fakeGauges{err: errors.New("database is closed"), runners: 2}
	fams := scrape(t, New(g.gauges(), slog.New(slog.NewTextHandler(io.Discard, nil))))
	if _, ok := value(fams, "kndl_sessions", "state", "active"); ok {
		t.Error("Sessions by state served from a store that failed")
	}
	if got, _ := value(fams, "kndl_runners_connected"); got != 2 {
		t.Errorf("kndl_runners_connected = %v, want 2", got)
	}
}

func TestStatusClass(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{{200, "2xx"}, {204, "2xx"}, {302, "3xx"}, {403, "4xx"}, {409, "4xx"}, {502, "5xx"}, {0, "other"}, {999, "other"}}
	for _, tt := range tests {
		if got := statusClass(tt.status); got != tt.want {
			t.Errorf("statusClass(%d) = %q, want %q", tt.status, got, tt.want)
		}
	}
}

// want is a metric's expected value: a histogram's is its sample count.
type want struct {
	name   string
	labels []string
	value  float64
}

// checkValues reports each metric in wants whose value in fams differs.
func checkValues(t *testing.T, when string, fams map[string]*dto.MetricFamily, wants []want) {
	t.Helper()
	for _, w := range wants {
		if got, ok := value(fams, w.name, w.labels...); !ok || got != w.value {
			t.Errorf("%s: %s%v = %v (present %v), want %v", when, w.name, w.labels, got, ok, w.value)
		}
	}
}
