package health

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestChecksRunSideBySideEachUnderItsOwnTimeout: /health takes as long as
// its slowest check, not their sum, keeps the checks' order, and a check
// past Timeout fails alone with a 503 naming it.
func TestChecksRunSideBySideEachUnderItsOwnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wait := func(d time.Duration) func(context.Context) (any, error) {
			return func(ctx context.Context) (any, error) {
				select {
				case <-time.After(d):
					return d.Milliseconds(), nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
		h := Handler(slog.New(slog.NewTextHandler(io.Discard, nil)),
			Check{Name: "store", Run: wait(1500 * time.Millisecond)},
			Check{Name: "migrations", Run: wait(1500 * time.Millisecond)},
			Check{Name: "slow", Run: wait(time.Hour)},
			Check{Name: "runners", Run: func(context.Context) (any, error) { return 3, nil }})
		start := time.Now()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/health", nil))
		if took := time.Since(start); took != Timeout {
			t.Errorf("answered in %v, want %v: the slowest check's Timeout, not the sum", took, Timeout)
		}
		var rep Report
		if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if w.Code != http.StatusServiceUnavailable || rep.Status != "unavailable" || len(rep.Failing) != 1 || rep.Failing[0] != "slow" {
			t.Errorf("got %d %+v, want 503 failing slow alone", w.Code, rep)
		}
		var names []string
		for _, c := range rep.Checks {
			names = append(names, c.Name)
			if c.OK == (c.Name == "slow") {
				t.Errorf("check %s: ok %v", c.Name, c.OK)
			}
		}
		if want := []string{"store", "migrations", "slow", "runners"}; !slices.Equal(names, want) {
			t.Errorf("checks in order %v, want %v", names, want)
		}
	})
}
