package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
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
// five and their median (medians over the iterations), each phase's median
// from the POST (phases), the CPU each Sandbox and its Claude Code had
// spent by the first tool's result and the CPU of this process (the Hub,
// the Runner and the test) an iteration (sandboxCPU), and the prompts
// typed again per iteration: by the Runner, which types again a prompt
// Claude Code did not take, and by the Hub, which gives one back to the
// queue after its deadline. KNDL_E2E_SANDBOX picks the backend;
// KNDL_LOAD_LOG=FILE keeps the Hub's and the Runner's log.
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
	var starts []start
	var ownCPU []time.Duration
	var runnerAgain, hubAgain int
	for i := 0; b.Loop(); i++ {
		logBefore := s.logText()
		cpuBefore := processCPU()
		ids, took, delivered := make([]string, together), make([]time.Duration, together), make([]time.Duration, together)
		these := make([]start, together)
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
				these[j] = timeStart(b, s, v.ID, posted)
				took[j], delivered[j] = these[j].phase(phaseResult), these[j].phase(phaseResult)-these[j].phase(phaseReady)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.StopTimer()
		own := processCPU() - cpuBefore
		log := strings.TrimPrefix(s.logText(), logBefore)
		runnerAgain += strings.Count(log, msgRunnerTypesAgain)
		hubAgain += strings.Count(log, msgHubTypesAgain)
		b.Logf("iteration %d: first tool's result %v after the start, %v after Claude Code was up; typed again by the Runner %d, by the Hub %d; load average %s",
			i, took, delivered, strings.Count(log, msgRunnerTypesAgain), strings.Count(log, msgHubTypesAgain), loadAverage())
		for j, st := range these {
			b.Logf("  session %d: %s; CPU by the first tool's result: %s", j, st.phases(), st.cpu)
		}
		b.Logf("  this process (Hub, Runner, test): %v CPU", own.Round(time.Millisecond))
		for _, id := range ids {
			s.Backend.Remove(context.Background(), "s-"+id)
		}
		b.StartTimer()
		slowest = append(slowest, slices.Max(took))
		each, fromReady = append(each, took...), append(fromReady, delivered...)
		starts, ownCPU = append(starts, these...), append(ownCPU, own)
	}
	reportMedian(b, slowest, "ms/all-five-median")
	reportMedian(b, each, "ms/each-median")
	reportMedian(b, fromReady, "ms/ready-to-tool-median")
	for p := phaseStarted; p <= phaseToolUse; p++ {
		reportMedian(b, collect(starts, func(st start) time.Duration { return st.phase(p) }), "ms/to-"+phaseNames[p])
	}
	reportMedian(b, collect(starts, func(st start) time.Duration { return st.cpu.sandbox }), "cpu-ms/sandbox")
	reportMedian(b, collect(starts, func(st start) time.Duration { return st.cpu.claude }), "cpu-ms/claude-code")
	reportMedian(b, collect(starts, func(st start) time.Duration { return st.cpu.claudeChildren }), "cpu-ms/claude-code-children")
	reportMedian(b, ownCPU, "cpu-ms/hub-runner-op")
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

// A Session's start, in the phases its Events mark, each timed from its
// POST: the Runner starting Claude Code (the log's "waiting for Claude
// Code", after the Sandbox, its tmux and the seed), Claude Code showing its
// prompt (ready), taking the first prompt (its UserPromptSubmit: prompt),
// the first model reply's tool call (tool_use) and the tool's result.
type start struct {
	at  [phaseResult + 1]time.Duration
	cpu cpuSpent
}

const (
	phaseStarted = iota
	phaseReady
	phaseTaken
	phaseToolUse
	phaseResult
)

var phaseNames = [...]string{"claude-started", "ready", "prompt-taken", "tool-use", "tool-result"}

func (st start) phase(p int) time.Duration { return st.at[p] }

func (st start) phases() string {
	var parts []string
	for p, d := range st.at {
		parts = append(parts, fmt.Sprintf("%s %v", phaseNames[p], d.Round(10*time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

func collect(starts []start, f func(start) time.Duration) []time.Duration {
	out := make([]time.Duration, len(starts))
	for i, st := range starts {
		out[i] = f(st)
	}
	return out
}

// firstToolResult waits for a Session's first tool result and returns the
// times of its ready Event (Claude Code up) and of that result.
func firstToolResult(b *testing.B, s *System, id string) (ready, result time.Time) {
	now := time.Now()
	st := timeStart(b, s, id, now)
	return now.Add(st.phase(phaseReady)), now.Add(st.phase(phaseResult))
}

// pollEvents is how often timeStart reads a Session's Events. The times
// are the Events' own, so it only has to be often enough for the CPU read
// at the first tool's result; every 20 ms, five Sessions' Events cost this
// process more CPU than the Hub and the Runner spent (13 to 26 CPU-s an
// iteration, at load average 15), on the two cores the Sessions share.
const pollEvents = 250 * time.Millisecond

// timeStart waits for a Session's first tool result, posted at posted, and
// returns its phases and the CPU its Sandbox had spent then.
func timeStart(b *testing.B, s *System, id string, posted time.Time) start {
	var st start
	deadline := time.Now().Add(testenv.WaitBuild)
	for time.Now().Before(deadline) {
		var evs []protocol.Event
		if err := s.call(http.MethodGet, "/api/sessions/"+id+"/events", nil, &evs); err == nil {
			for _, e := range evs {
				switch {
				case e.Kind == protocol.EventLog && e.Text == "waiting for Claude Code":
					st.at[phaseStarted] = e.At.Sub(posted)
				case e.Kind == protocol.EventReady:
					st.at[phaseReady] = e.At.Sub(posted)
				case e.Kind == protocol.EventPrompt && st.at[phaseTaken] == 0:
					st.at[phaseTaken] = e.At.Sub(posted)
				case e.Kind == protocol.EventToolUse && st.at[phaseToolUse] == 0:
					st.at[phaseToolUse] = e.At.Sub(posted)
				case e.Kind == protocol.EventToolResult:
					st.at[phaseResult] = e.At.Sub(posted)
					st.cpu = startCPU(id)
					return st
				}
			}
		}
		time.Sleep(pollEvents)
	}
	b.Errorf("session %s: no tool result within %v", id, testenv.WaitBuild)
	st.at[phaseResult] = testenv.WaitBuild
	return st
}

// cpuSpent is the CPU a Sandbox had spent: all of its cgroup, and of it
// Claude Code's own process, what Claude Code ran and waited for (its
// hooks, its shell, git, the editor) and the tmux server. On gVisor the
// cgroup holds the runsc processes, so only the whole is known.
type cpuSpent struct {
	sandbox, claude, claudeChildren, tmux time.Duration
}

func (c cpuSpent) String() string {
	return fmt.Sprintf("Sandbox %v (Claude Code %v, what it ran %v, tmux %v)", c.sandbox.Round(10*time.Millisecond),
		c.claude.Round(10*time.Millisecond), c.claudeChildren.Round(10*time.Millisecond), c.tmux.Round(10*time.Millisecond))
}

// startCPU reads what a Session's Sandbox and its processes spent.
func startCPU(id string) cpuSpent {
	c := cpuSpent{sandbox: cgroupCPU(id)}
	for _, pid := range sandboxPids(id) {
		self, children := testkit.ProcessCPU(pid)
		switch name := procName(pid); {
		case name == "claude":
			c.claude += self
			c.claudeChildren += children
		case name == "tmux":
			c.tmux += self
		}
	}
	return c
}

// processCPU is the CPU this process (the Hub, the Runner and the test)
// has spent, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
