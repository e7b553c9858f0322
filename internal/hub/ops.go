package hub

import (
	"context"
	"fmt"
	"net/http"

	"kndl.dev/kndl/internal/health"
	"kndl.dev/kndl/internal/metrics"
)

// opsAPI serves /health and /metrics, which the Hub makes as it starts.
type opsAPI struct {
	healthz http.Handler     // what /health answers: newHealth
	metrics *metrics.Metrics // what /metrics serves: newMetrics
}

// newMetrics makes the Hub's metrics, reading Sessions by state from the
// store and Runners from who is connected at each scrape.
func (h *Hub) newMetrics() *metrics.Metrics {
	return metrics.New(metrics.Gauges{
		SessionsByState: func(ctx context.Context) (map[string]int, error) {
			counts, err := h.store.Sessions.SessionCounts(ctx)
			if err != nil {
				return nil, err
			}
			out := make(map[string]int, len(counts))
			for st, n := range counts {
				out[string(st)] = n
			}
			return out, nil
		},
		RunnersConnected: h.runnersConnected,
		WarmPools:        h.warmPools,
	}, h.cfg.Logger)
}

// newHealth makes /health's checks: the store answers a trivial query, its
// migrations are this binary's, and how many Runners are connected (none
// is no fault: a Hub serves its pages and API without any).
func (h *Hub) newHealth() http.Handler {
	return health.Handler(h.cfg.Logger,
		health.Check{Name: "store", Run: func(ctx context.Context) (any, error) { return nil, h.db.Ping(ctx) }},
		health.Check{Name: "migrations", Run: func(ctx context.Context) (any, error) {
			applied, known, err := h.db.Migrations(ctx)
			if err != nil {
				return nil, err
			}
			if applied != known {
				return nil, fmt.Errorf("the store is at migration %d, this binary's newest is %d", applied, known)
			}
			return map[string]int{"version": applied}, nil
		}},
		health.Check{Name: "runners", Run: func(context.Context) (any, error) {
			return map[string]int{"connected": h.runnersConnected()}, nil
		}},
	)
}

func (h *Hub) runnersConnected() int {
	return len(h.runners.All())
}

func (h opsAPI) health(w http.ResponseWriter, r *http.Request, _ Principal) {
	h.healthz.ServeHTTP(w, r)
}

func (h opsAPI) serveMetrics(w http.ResponseWriter, r *http.Request, _ Principal) {
	h.metrics.ServeHTTP(w, r)
}
