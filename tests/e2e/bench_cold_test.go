package e2e

import (
	"testing"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testkit"
)

// BenchmarkColdSessionStart times a host's first Session: a Runner with no
// image and no Build (Claude Code in its cache), from POST /api/sessions to
// the first tool's result (a Bash `true` the scripted model asks for):
// the image pulled from the local registry, its Build, the Workspace
// cloned, the Sandbox, Claude Code up and the first Turn. Each iteration
// is a new Hub and Runner. builds=crun makes the Builds on crun
// (RUNNER_BUILD_BACKEND=crun), which only differs with
// KNDL_E2E_SANDBOX=gvisor.
//
//	KNDL_E2E=1 CGO_ENABLED=0 go test -run '^$' -bench ColdSessionStart -benchtime 3x ./tests/e2e/
func BenchmarkColdSessionStart(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []Option
	}{{"builds=sessions", []Option{WithColdRunner()}}, {"builds=crun", []Option{WithColdRunner(), WithBuildsOnCrun()}}} {
		b.Run(c.name, func(b *testing.B) {
			if runtime, _ := sandboxRuntime(b); runtime == "crun" && c.name == "builds=crun" {
				b.Skip("the Sandboxes run on crun already")
			}
			var took []time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				s := Start(b, c.opts...)
				s.Model.On(testkit.PromptContains("cold start"), testkit.Bash("true"))
				s.Model.On(testkit.AfterToolResult(), testkit.Text("ran"))
				repo := s.Repo()
				b.StartTimer()
				posted := time.Now()
				v := s.NewSession(repo, "cold start")
				_, result := firstToolResult(b, s, v.ID)
				took = append(took, result.Sub(posted))
				b.Logf("iteration %d: first tool's result %v after the POST; load average %s", i, result.Sub(posted), loadAverage())
				if testing.Verbose() {
					for _, e := range s.Events(v.ID) {
						if e.Kind == protocol.EventLog || e.Kind == protocol.EventReady {
							b.Logf("  %6.2f s %s %.100s", e.At.Sub(posted).Seconds(), e.Kind, e.Text)
						}
					}
				}
			}
			reportMedian(b, took, "ms/first-tool-median")
		})
	}
}
