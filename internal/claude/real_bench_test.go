package claude_test

import (
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testkit"
)

// together is how many Claude Codes BenchmarkRealClaudeCodesStartedTogether
// starts at once, as tests/e2e BenchmarkSessionsStartedTogether does.
const together = 5

// BenchmarkRealClaudeCodesStartedTogether starts five Claude Codes at once
// on this host, in tmux as the Runner runs them, types each a prompt the
// scripted model answers with a Bash call once it draws its prompt, and
// reports the CPU each spent (its own and what it ran) by its prompt drawn
// and by its first tool's result, and the time until all five had that
// result: what five Sessions started at once need of a host before the
// Runner, the Hub and the Sandboxes add theirs. jit=off is Claude Code as
// the Runner starts it (Launch.BashEnv), jit=on without that switch.
func BenchmarkRealClaudeCodesStartedTogether(b *testing.B) {
	bin := testkit.RealClaude(b)
	for _, jit := range []string{"off", "on"} {
		b.Run("jit="+jit, func(b *testing.B) {
			var drawn, tool, all []time.Duration
			for b.Loop() {
				r := testkit.StartClaudesTogether(b, bin, together, func(c *testkit.Claude) {
					if jit == "on" {
						c.Launch.BashEnv = ""
					}
				})
				drawn, tool, all = append(drawn, r.Drawn...), append(tool, r.Tool...), append(all, r.All)
			}
			report := func(ds []time.Duration, name string) {
				sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
				b.ReportMetric(float64(ds[len(ds)/2].Milliseconds()), name)
			}
			report(drawn, "cpu-ms/to-prompt-drawn")
			report(tool, "cpu-ms/to-first-tool")
			report(all, "ms/all-five")
			b.Logf("load average %s", loadAverage())
		})
	}
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
