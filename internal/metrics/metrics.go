// Package metrics is the Hub's Prometheus metrics, served at /metrics in
// the text exposition format behind the metrics token: Sessions by state,
// Runners connected, Turns, prompt delivery latency, Gateway requests and
// store call latency. Its registry is its own, never the global one. The
// Hub makes one and hands it to the parts that count (internal/hub/session,
// internal/gateway, internal/store), each through an interface of its own;
// only internal/hub imports it.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Gauges are the figures read at each scrape rather than counted: the
// store and the Hub's connections already hold them, so no count can
// drift from the truth across a restart.
type Gauges struct {
	// SessionsByState returns how many Sessions are in each state.
	SessionsByState func(ctx context.Context) (map[string]int, error)
	// RunnersConnected returns how many Runners are connected now.
	RunnersConnected func() int
	// WarmPools returns each connected Runner's warm pool; nil for none.
	WarmPools func() []Pool
}

// Pool is one Runner's warm pool as it last said.
type Pool struct {
	Runner           string
	Ready, MemoryMiB int
}

// Metrics is the Hub's metrics. Its methods are safe from any goroutine.
type Metrics struct {
	handler         http.Handler
	turnsStarted    prometheus.Counter
	turnsEnded      prometheus.Counter
	sessionFaults   *prometheus.CounterVec
	promptLatency   prometheus.Histogram
	gateway         *prometheus.CounterVec
	webhooks        *prometheus.CounterVec
	refusalsDropped prometheus.Counter
	store           *prometheus.HistogramVec
}

// scrapeTimeout bounds the store query a scrape makes: Prometheus's own
// default scrape timeout is 10 s.
const scrapeTimeout = 5 * time.Second

// New makes the metrics, reading g at each scrape; log gets what a scrape
// could not collect.
func New(g Gauges, log *slog.Logger) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		turnsStarted: prometheus.NewCounter(prometheus.CounterOpts{Name: "kndl_turns_started_total",
			Help: "Turns started: Claude Code took a prompt (UserPromptSubmit)."}),
		turnsEnded: prometheus.NewCounter(prometheus.CounterOpts{Name: "kndl_turns_ended_total",
			Help: "Turns ended: done, interrupted or failed."}),
		sessionFaults: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kndl_session_faults_total",
			Help: "Faults the Session owner named: a state its machines should never be in (a queue waiting on nothing, a Turn unheard of, a move its table does not list), by kind."},
			[]string{"kind"}),
		promptLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kndl_prompt_delivery_seconds",
			Help:    "From a prompt queued to Claude Code taking it (UserPromptSubmit; typed, for a command), waiting behind a running Turn included.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}}),
		gateway: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kndl_gateway_requests_total",
			Help: "Requests to the MCP Gateway, by Installation id (unknown for one the Session did not start with) and the answer's status class."},
			[]string{"installation", "code"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kndl_webhook_ignored_total",
			Help: "GitHub webhook deliveries, signed and new, of an event the Hub does not act on, by event."},
			[]string{"event"}),
		refusalsDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "kndl_trigger_refusals_dropped_total",
			Help: "Replies refusing a GitHub trigger not posted: the person was refused in that thread within the day."}),
		store: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kndl_store_call_seconds",
			Help:    "Latency of the store's hot calls, by call.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}},
			[]string{"op"}),
	}
	reg.MustRegister(m.turnsStarted, m.turnsEnded, m.sessionFaults, m.promptLatency, m.gateway, m.webhooks, m.refusalsDropped, m.store, gauges{g},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError,
		ErrorLog: slog.NewLogLogger(log.With("component", "metrics").Handler(), slog.LevelWarn)})
	return m
}

// ServeHTTP serves the metrics in the text exposition format.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

// TurnStarted counts a Turn started.
func (m *Metrics) TurnStarted() { m.turnsStarted.Inc() }

// TurnEnded counts a Turn ended.
func (m *Metrics) TurnEnded() { m.turnsEnded.Inc() }

// SessionFault counts a fault of kind the Session owner named.
func (m *Metrics) SessionFault(kind string) { m.sessionFaults.WithLabelValues(kind).Inc() }

// PromptDelivered records how long a prompt took from queued to taken.
func (m *Metrics) PromptDelivered(d time.Duration) { m.promptLatency.Observe(d.Seconds()) }

// GatewayRequest counts a Gateway request to installation answered with
// status.
func (m *Metrics) GatewayRequest(installation string, status int) {
	m.gateway.WithLabelValues(installation, statusClass(status)).Inc()
}

// WebhookIgnored counts a GitHub webhook delivery of an event the Hub
// does not act on. Only signed deliveries count, so only the App's events
// name a series.
func (m *Metrics) WebhookIgnored(event string) { m.webhooks.WithLabelValues(event).Inc() }

// RefusalDropped counts a refusal of a GitHub trigger not posted, the
// person refused in that thread within the day.
func (m *Metrics) RefusalDropped() { m.refusalsDropped.Inc() }

// StoreCall records how long the store call op took.
func (m *Metrics) StoreCall(op string, d time.Duration) {
	m.store.WithLabelValues(op).Observe(d.Seconds())
}

// statusClass is "2xx" for 200 to 299 and so on: a bounded label whatever
// an MCP server answers.
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return string(rune('0'+status/100)) + "xx"
}

var (
	sessionsDesc = prometheus.NewDesc("kndl_sessions", "Sessions by state.", []string{"state"}, nil)
	runnersDesc  = prometheus.NewDesc("kndl_runners_connected", "Runners connected to the Hub now.", nil, nil)
	poolDesc     = prometheus.NewDesc("kndl_warm_pool_sandboxes", "Sandboxes a Runner's warm pool holds ready, Claude Code at its prompt, bound to no Session.", []string{"runner"}, nil)
	poolMemDesc  = prometheus.NewDesc("kndl_warm_pool_memory_mib", "Memory a Runner's warm pool counts against its bound: its ready Sandboxes and fills under way.", []string{"runner"}, nil)
)

// gauges collects Gauges at each scrape.
type gauges struct{ g Gauges }

func (c gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- sessionsDesc
	ch <- runnersDesc
	ch <- poolDesc
	ch <- poolMemDesc
}

func (c gauges) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(runnersDesc, prometheus.GaugeValue, float64(c.g.RunnersConnected()))
	if c.g.WarmPools != nil {
		for _, p := range c.g.WarmPools() {
			ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(p.Ready), p.Runner)
			ch <- prometheus.MustNewConstMetric(poolMemDesc, prometheus.GaugeValue, float64(p.MemoryMiB), p.Runner)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counts, err := c.g.SessionsByState(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
		return
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), state)
	}
}
