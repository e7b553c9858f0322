package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// together is how many Sessions BenchmarkSessionsStartedTogether starts at
// once: a team starting its morning.
const together = 5

// BenchmarkSessionsStartedTogether starts five Sessions at once from a warm
// Build, each with a first prompt the model answers with a Bash call, and
// times each from its POST /api/sessions to its first tool's result (the
// Event's time): the start, the first prompt's delivery and one tool run,
// model time excluded; and from Claude Code up (the ready Event) to that
// result, the delivery and the tool alone. It reports the slowest of the
// five and their median (medians over the iterations), and the prompts
// typed again per
// iteration: by the Runner, which types again a prompt Claude Code did not
// take, and by the Hub, which gives one back to the queue after its
// deadline. KNDL_E2E_SANDBOX picks the backend; KNDL_LOAD_LOG=FILE keeps
// the Hub's and the Runner's log.
func BenchmarkSessionsStartedTogether(b *testing.B) {
	s := Start(b)
	repo := s.Repo()
	s.Model.On(testkit.PromptContains("warm up"), testkit.Text("ok"))
	s.Model.On(testkit.PromptContains("together"), testkit.Bash("true"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("ran"))
	if path := os.Getenv("KNDL_LOAD_LOG"); path != "" {
		defer func() { os.WriteFile(path, []byte(s.logText()), 0o600) }()
	}
	w := s.NewSession(repo, "warm up")
	s.WaitEvent(w.ID, testenv.WaitBuild, "the warm-up turn's end", kind(protocol.EventTurnEnd))
	var slowest, each, fromReady []time.Duration
	var runnerAgain, hubAgain int
	for i := 0; b.Loop(); i++ {
		logBefore := s.logText()
		ids, took, delivered := make([]string, together), make([]time.Duration, together), make([]time.Duration, together)
		var wg sync.WaitGroup
		errs := make(chan error, together)
		for j := range together {
			wg.Go(func() {
				posted := time.Now()
				var v api.SessionView
				if err := s.call(http.MethodPost, "/api/sessions", api.NewSession{Repo: repo, Prompt: fmt.Sprintf("together %d-%d", i, j)}, &v); err != nil {
					errs <- err
					return
				}
				ids[j] = v.ID
				ready, result := firstToolResult(b, s, v.ID)
				took[j], delivered[j] = result.Sub(posted), result.Sub(ready)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.StopTimer()
		log := strings.TrimPrefix(s.logText(), logBefore)
		runnerAgain += strings.Count(log, msgRunnerTypesAgain)
		hubAgain += strings.Count(log, msgHubTypesAgain)
		b.Logf("iteration %d: first tool's result %v after the start, %v after Claude Code was up; typed again by the Runner %d, by the Hub %d; load average %s",
			i, took, delivered, strings.Count(log, msgRunnerTypesAgain), strings.Count(log, msgHubTypesAgain), loadAverage())
		for _, id := range ids {
			s.Backend.Remove(context.Background(), "s-"+id)
		}
		b.StartTimer()
		slowest = append(slowest, slices.Max(took))
		each, fromReady = append(each, took...), append(fromReady, delivered...)
	}
	reportMedian(b, slowest, "ms/all-five-median")
	reportMedian(b, each, "ms/each-median")
	reportMedian(b, fromReady, "ms/ready-to-tool-median")
	b.ReportMetric(float64(runnerAgain)/float64(b.N), "runner-typed-again/op")
	b.ReportMetric(float64(hubAgain)/float64(b.N), "hub-typed-again/op")
}

// What the Runner logs when it types a prompt (or its Enter) again, and
// the Hub when it sends one again: before protocol version 3 it typed it
// again after 15 s ("prompt not taken; typing it again"), since, only a
// prompt the Runner answers not taken goes back to the queue ("prompt not
// taken").
const (
	msgRunnerTypesAgain = `msg="Claude Code did not take the prompt; typing it again"`
	msgHubTypesAgain    = `msg="prompt not taken`
)

// firstToolResult waits for a Session's first tool result and returns the
// times of its ready Event (Claude Code up) and of that result.
func firstToolResult(b *testing.B, s *System, id string) (ready, result time.Time) {
	deadline := time.Now().Add(testenv.WaitBuild)
	for time.Now().Before(deadline) {
		var evs []protocol.Event
		if err := s.call(http.MethodGet, "/api/sessions/"+id+"/events", nil, &evs); err == nil {
			for _, e := range evs {
				switch e.Kind {
				case protocol.EventReady:
					ready = e.At
				case protocol.EventToolResult:
					return ready, e.At
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Errorf("session %s: no tool result within %v", id, testenv.WaitBuild)
	return deadline, deadline
}
