// Package health is the Hub's public /health answer: each check it runs,
// timed, and an overall status, 200 when every check passes and 503 naming
// the ones that fail. It is public, so it shows figures only (a count, a
// version number), never names, ids or an error's text, which may name a
// path; the operator's log gets the error. Only internal/hub imports it.
package health

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Check is one check. Run returns a figure to show, or nil, and an error
// if the check fails.
type Check struct {
	Name string
	Run  func(ctx context.Context) (any, error)
}

// Result is what a check found.
type Result struct {
	Name   string  `json:"name"`
	OK     bool    `json:"ok"`
	Value  any     `json:"value,omitempty"`
	Millis float64 `json:"ms"`
}

// Report is the /health answer.
type Report struct {
	// Status is "ok", or "unavailable" when a check failed.
	Status  string   `json:"status"`
	Failing []string `json:"failing,omitempty"`
	Checks  []Result `json:"checks"`
}

// Timeout bounds each check: a store that doesn't answer within it is down
// as far as a load balancer is concerned.
const Timeout = 2 * time.Second

// Handler answers with a Report of checks, run side by side, each under
// its own Timeout: a standby taking over a load answers /health while
// thousands of watchers wait on the same store, and its checks one after
// another took the sum of their waits (the store 1.2 s, then its
// migrations 0.8 s more, on the load test's takeover).
func Handler(log *slog.Logger, checks ...Check) http.Handler {
	log = log.With("component", "health")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := Report{Status: "ok", Checks: make([]Result, len(checks))}
		errs := make([]error, len(checks))
		var wg sync.WaitGroup
		for i, c := range checks {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(r.Context(), Timeout)
				defer cancel()
				start := time.Now()
				v, err := c.Run(ctx)
				rep.Checks[i], errs[i] = Result{Name: c.Name, OK: err == nil, Value: v, Millis: float64(time.Since(start).Microseconds()) / 1000}, err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				log.Warn("health check failed", "check", checks[i].Name, "err", err)
				rep.Status, rep.Failing, rep.Checks[i].Value = "unavailable", append(rep.Failing, checks[i].Name), nil
			}
		}
		code := http.StatusOK
		if rep.Status != "ok" {
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(rep)
	})
}
