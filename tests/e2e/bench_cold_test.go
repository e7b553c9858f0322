package e2e

import (
	"fmt"
	"net/http"
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
// starts a new Hub and Runner for each side in turn, the order turning
// each time: crun, then gVisor making its Builds on gVisor and on crun
// (RUNNER_BUILD_BACKEND=crun). It prints a line a script reads for each
// gVisor side, its figure beside crun's of the same run (medians):
//
//	cold-start side=gvisor builds=gvisor ms=… crun_ms=… ratio=… target=1.3 load=… host=…
//
//	KNDL_E2E=1 CGO_ENABLED=0 go test -run '^$' -bench ColdSessionStart -benchtime 3x -v ./tests/e2e/
func BenchmarkColdSessionStart(b *testing.B) {
	sides := []struct {
		name string
		opts []Option
	}{
		{"crun", []Option{WithRuntime("crun")}},
		{"gvisor builds=gvisor", []Option{WithRuntime("runsc")}},
		{"gvisor builds=crun", []Option{WithRuntime("runsc"), WithBuildsOnCrun()}},
	}
	took := make([][]time.Duration, len(sides))
	for i := 0; b.Loop(); i++ {
		for j := range sides {
			k := (i + j) % len(sides)
			took[k] = append(took[k], coldStart(b, sides[k].name, i, sides[k].opts...))
		}
	}
	crun := median(took[0])
	for k, side := range sides[1:] {
		m := median(took[k+1])
		fmt.Printf("cold-start side=%s ms=%d crun_ms=%d ratio=%.3f target=1.3 load=%q host=%q\n",
			side.name, m.Milliseconds(), crun.Milliseconds(), float64(m)/float64(crun), loadAverage(), cpuModel())
	}
	reportMedian(b, took[0], "crun-ms/first-tool")
	reportMedian(b, took[1], "gvisor-ms/first-tool")
}

// coldStart starts a new Hub and Runner with opts and times its first
// Session's first tool's result from the POST. The Session is put to
// sleep after, so its Sandbox weighs on no later start.
func coldStart(b *testing.B, side string, i int, opts ...Option) time.Duration {
	s := Start(b, append(opts, WithColdRunner())...)
	s.Model.On(testkit.PromptContains("cold start"), testkit.Bash("true"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("ran"))
	repo := s.Repo()
	posted := time.Now()
	v := s.NewSession(repo, "cold start")
	_, result := firstToolResult(b, s, v.ID)
	b.Logf("%s, iteration %d: first tool's result %v after the POST; load average %s", side, i, result.Sub(posted), loadAverage())
	if testing.Verbose() {
		for _, e := range s.Events(v.ID) {
			if e.Kind == protocol.EventLog || e.Kind == protocol.EventReady {
				b.Logf("  %6.2f s %s %.100s", e.At.Sub(posted).Seconds(), e.Kind, e.Text)
			}
		}
	}
	s.turnEnds(v.ID, 1)
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil); code != http.StatusNoContent {
		b.Fatalf("sleep: HTTP %d", code)
	}
	return result.Sub(posted)
}
