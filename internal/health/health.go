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

// Handler answers with a Report of checks, run one after another.
func Handler(log *slog.Logger, checks ...Check) http.Handler {
	log = log.With("component", "health")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := Report{Status: "ok", Checks: []Result{}}
		for _, c := range checks {
			ctx, cancel := context.WithTimeout(r.Context(), Timeout)
			start := time.Now()
			v, err := c.Run(ctx)
			cancel()
			res := Result{Name: c.Name, OK: err == nil, Value: v, Millis: float64(time.Since(start).Microseconds()) / 1000}
			if err != nil {
				log.Warn("health check failed", "check", c.Name, "err", err)
				rep.Status, rep.Failing, res.Value = "unavailable", append(rep.Failing, c.Name), nil
			}
			rep.Checks = append(rep.Checks, res)
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
