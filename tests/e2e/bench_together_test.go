package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
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
// in the same iteration, before or after them by turns, five bare Claude
// Codes at once on this host, as the Runner starts Claude Code
// (testkit.StartClaudesTogether), each in a clone of the Repo (inClone):
// the reference. Each iteration and the
// end print a line with both and the ratio ("sessions-together"): the time
// until all five had their first tool's result (the Sessions' from their
// POST /api/sessions to the result's Event: the start, the first prompt's
// delivery and one tool run; target at most 1.2×), and the CPU each had
// spent by then (a Session's Sandbox, from its POST, against a bare Claude
// Code's own and what it ran; target at most 1.15×), with this process's
// CPU (the Hub, the Runner and the test) over the five Sessions apart. It
// reports too each phase's median from the POST (phases), of a Sandbox's
// CPU Claude Code's own and what it ran, and the prompts typed again per
// iteration: by the Runner, which types again a prompt Claude Code did not
// take, and by the Hub, which gives one back to the queue after its
// deadline. KNDL_E2E_SANDBOX picks the backend; KNDL_LOAD_LOG=FILE keeps
// the Hub's and the Runner's log.
func BenchmarkSessionsStartedTogether(b *testing.B) { benchTogether(b, 0) }

// BenchmarkSessionsStartedTogetherFromPool is BenchmarkSessionsStartedTogether
// on a Runner with a warm pool of five (RUNNER_WARM_POOL), full before each
// half of an iteration, so no fill runs beside either start: each Session
// must say it came from the pool, and the time until all five have their
// first tool's result is at most half the bare five's. A Session's CPU is
// its Sandbox's from the POST; Claude Code's start, before, was the fill's.
func BenchmarkSessionsStartedTogetherFromPool(b *testing.B) { benchTogether(b, together) }

func benchTogether(b *testing.B, pool int) {
	s := Start(b, WithWarmPool(pool))
	bin := testkit.RealClaude(b)
	repo := s.Repo()
	s.Model.On(testkit.PromptContains("warm up"), testkit.Text("ok"))
	s.Model.On(testkit.PromptContains(testkit.TogetherPrompt), testkit.Bash("true"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("ran"))
	if path := os.Getenv("KNDL_LOAD_LOG"); path != "" {
		defer func() { os.WriteFile(path, []byte(s.logText()), 0o600) }()
	}
	w := s.NewSession(repo, "warm up")
	s.WaitEvent(w.ID, testenv.WaitBuild, "the warm-up turn's end", kind(protocol.EventTurnEnd))
	mode, wallTarget, cpuTarget := "no-pool", "1.2", "1.15"
	if pool > 0 {
		mode, wallTarget, cpuTarget = "pool", "0.5", "none"
	}
	var all, bareAll, each, fromReady, cpu, bareCPU, ownCPU []time.Duration
	var starts []start
	var runnerAgain, hubAgain int
	served := map[string]bool{} // pool ids handed out
	for i := 0; b.Loop(); i++ {
		var ss sessionsTogether
		var bare testkit.Together
		halves := []func(){
			func() { ss = s.startTogether(b, repo, i, pool > 0, served) },
			func() { bare = testkit.StartClaudesTogether(b, bin, together, inClone(b, repo)) },
		}
		first := "sessions"
		if i%2 == 1 {
			slices.Reverse(halves)
			first = "bare"
		}
		for _, half := range halves {
			if pool > 0 {
				s.poolReady(served, pool)
			}
			half()
		}
		sc := collect(ss.starts, func(st start) time.Duration { return st.cpu.sandbox })
		fmt.Printf("sessions-together %s %d: first=%s sessions_all_ms=%d bare_all_ms=%d wall_ratio=%.3f session_cpu_ms=%d bare_cpu_ms=%d cpu_ratio=%.3f hub_runner_cpu_ms=%d load=%q\n",
			mode, i, first, ss.all.Milliseconds(), bare.All.Milliseconds(), ratio(ss.all, bare.All),
			median(sc).Milliseconds(), median(bare.Tool).Milliseconds(), ratio(median(sc), median(bare.Tool)), ss.own.Milliseconds(), loadAverage())
		// Where each side's time and CPU go, medians of the five: to its
		// prompt drawn (a pool Session's was before), from there to its
		// first tool's result, Claude Code's own CPU and what it ran.
		ms := func(ds []time.Duration) int64 { return median(ds).Milliseconds() }
		bareToResult, bareRan := make([]time.Duration, together), make([]time.Duration, together)
		for j := range together {
			bareToResult[j], bareRan[j] = bare.Result[j]-bare.Ready[j], bare.Tool[j]-bare.Own[j]
		}
		fmt.Printf("sessions-together-phases %s %d: sessions ready_ms=%d to_result_ms=%d claude_cpu_ms=%d ran_cpu_ms=%d; bare ready_ms=%d to_result_ms=%d claude_cpu_ms=%d ran_cpu_ms=%d\n",
			mode, i, ms(collect(ss.starts, func(st start) time.Duration { return st.phase(phaseReady) })),
			ms(collect(ss.starts, func(st start) time.Duration { return st.phase(phaseResult) - st.phase(phaseReady) })),
			ms(collect(ss.starts, func(st start) time.Duration { return st.cpu.claude })),
			ms(collect(ss.starts, func(st start) time.Duration { return st.cpu.claudeChildren })),
			ms(bare.Ready), ms(bareToResult), ms(bare.Own), ms(bareRan))
		all, bareAll = append(all, ss.all), append(bareAll, bare.All)
		cpu, bareCPU = append(cpu, sc...), append(bareCPU, bare.Tool...)
		for _, st := range ss.starts {
			each, fromReady = append(each, st.phase(phaseResult)), append(fromReady, st.phase(phaseResult)-st.phase(phaseReady))
		}
		starts, ownCPU = append(starts, ss.starts...), append(ownCPU, ss.own)
		runnerAgain, hubAgain = runnerAgain+ss.runnerAgain, hubAgain+ss.hubAgain
	}
	fmt.Printf("sessions-together %s: sessions_all_ms=%d bare_all_ms=%d wall_ratio=%.3f wall_target=%s session_cpu_ms=%d bare_cpu_ms=%d cpu_ratio=%.3f cpu_target=%s hub_runner_cpu_ms_per_session=%d iterations=%d load=%q host=%q\n",
		mode, median(all).Milliseconds(), median(bareAll).Milliseconds(), ratio(median(all), median(bareAll)), wallTarget,
		median(cpu).Milliseconds(), median(bareCPU).Milliseconds(), ratio(median(cpu), median(bareCPU)), cpuTarget,
		median(ownCPU).Milliseconds()/together, len(all), loadAverage(), cpuModel())
	b.ReportMetric(ratio(median(all), median(bareAll)), "wall/bare")
	b.ReportMetric(ratio(median(cpu), median(bareCPU)), "cpu/bare")
	reportMedian(b, all, "ms/all-five-median")
	reportMedian(b, bareAll, "ms/bare-all-five-median")
	reportMedian(b, each, "ms/each-median")
	reportMedian(b, fromReady, "ms/ready-to-tool-median")
	for p := phaseStarted; p <= phaseToolUse; p++ {
		reportMedian(b, collect(starts, func(st start) time.Duration { return st.phase(p) }), "ms/to-"+phaseNames[p])
	}
	reportMedian(b, cpu, "cpu-ms/sandbox")
	reportMedian(b, bareCPU, "cpu-ms/bare-claude-code")
	reportMedian(b, collect(starts, func(st start) time.Duration { return st.cpu.claude }), "cpu-ms/claude-code")
	reportMedian(b, collect(starts, func(st start) time.Duration { return st.cpu.claudeChildren }), "cpu-ms/claude-code-children")
	reportMedian(b, ownCPU, "cpu-ms/hub-runner-op")
	b.ReportMetric(float64(runnerAgain)/float64(b.N), "runner-typed-again/op")
	b.ReportMetric(float64(hubAgain)/float64(b.N), "hub-typed-again/op")
}

// sessionsTogether is what startTogether measured of five Sessions: each
// one's start, the time until all five had their first tool's result, this
// process's CPU meanwhile, and the prompts typed again.
type sessionsTogether struct {
	starts                []start
	all, own              time.Duration
	runnerAgain, hubAgain int
}

// startTogether starts five Sessions at once, waits for each one's first
// tool's result, logs their phases and removes their Sandboxes. fromPool:
// each must have taken a warm pool Sandbox, whose pool id goes in served,
// and its CPU is counted from the POST.
func (s *System) startTogether(b *testing.B, repo string, i int, fromPool bool, served map[string]bool) sessionsTogether {
	logBefore := s.logText()
	cpuBefore := processCPU()
	poolCPU := map[string]time.Duration{}
	if fromPool {
		all, err := s.Backend.List(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range all {
			if strings.HasPrefix(st.ID, "w-") {
				poolCPU[st.ID] = cgroupCPU(st.ID)
			}
		}
	}
	ids, results := make([]string, together), make([]time.Time, together)
	r := sessionsTogether{starts: make([]start, together)}
	var wg sync.WaitGroup
	errs := make(chan error, together)
	begun := time.Now()
	for j := range together {
		wg.Go(func() {
			posted := time.Now()
			var v api.SessionView
			if err := s.call(http.MethodPost, "/api/sessions", api.NewSession{Repo: repo, Prompt: fmt.Sprintf("%s %d-%d", testkit.TogetherPrompt, i, j)}, &v); err != nil {
				errs <- err
				return
			}
			ids[j] = v.ID
			r.starts[j] = timeStart(b, s, v.ID, posted)
			results[j] = posted.Add(r.starts[j].phase(phaseResult))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	r.own = processCPU() - cpuBefore
	r.all = slices.MaxFunc(results, func(a, b time.Time) int { return a.Compare(b) }).Sub(begun)
	log := strings.TrimPrefix(s.logText(), logBefore)
	r.runnerAgain, r.hubAgain = strings.Count(log, msgRunnerTypesAgain), strings.Count(log, msgHubTypesAgain)
	b.Logf("iteration %d: all five %v; typed again by the Runner %d, by the Hub %d; load average %s", i, r.all, r.runnerAgain, r.hubAgain, loadAverage())
	for j, id := range ids {
		sb := s.sandboxOf(id)
		if fromPool {
			if !s.startLogSays(id, fromPoolLine) || !strings.HasPrefix(sb, "w-") {
				b.Fatalf("session %d (%s) runs in %s and its start log does not say %q: %s", j, id, sb, fromPoolLine, dump(s.Events(id)))
			}
			served[strings.TrimPrefix(sb, "w-")] = true
			r.starts[j].cpu.sandbox -= poolCPU[sb]
		}
		b.Logf("  session %d: %s; CPU by the first tool's result: %s", j, r.starts[j].phases(), r.starts[j].cpu)
		s.Backend.Remove(context.Background(), sb)
	}
	b.Logf("  this process (Hub, Runner, test): %v CPU", r.own.Round(time.Millisecond))
	return r
}

// inClone has a bare Claude Code work in a clone of repo, as a Session's
// does in its Workspace: Claude Code runs git there as it starts (17
// commands), none in an empty folder. One at a time, a bare one ran 60
// CPU-ms more by its first tool's result in a clone (240, from 180).
func inClone(b *testing.B, repo string) func(*testkit.Claude) {
	return func(c *testkit.Claude) {
		dir := filepath.Join(c.Work, "repo")
		if out, err := exec.Command("git", "clone", "-q", repo, dir).CombinedOutput(); err != nil {
			b.Fatalf("git clone: %v\n%s", err, out)
		}
		c.Work = dir
	}
}

// ratio is a over b.
func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

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
	// cpuBefore is how long before the result's stamp cpu was sampled.
	cpuBefore time.Duration
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
	return strings.Join(parts, ", ") + fmt.Sprintf(" (CPU sampled %v before)", st.cpuBefore.Round(time.Millisecond))
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
// are the Events' own; every 20 ms, five Sessions' Events cost this
// process more CPU than the Hub and the Runner spent (13 to 26 CPU-s an
// iteration, at load average 15), on the two cores the Sessions share.
const pollEvents = 250 * time.Millisecond

// sampleCPU is how often timeStart samples a Session's Sandbox's CPU (its
// cgroup's, one file read). On a busy host the result's Event reached the
// Hub 0.2 to 1.5 s after its stamp, and Claude Code goes on meanwhile (the
// next model call, its reply drawn): the Sandbox's CPU counted is the last
// sample before the stamp, as a bare Claude Code's is read within about
// 10 ms of its result in its transcript. Its processes' split is read when
// the Event is seen.
const sampleCPU = 50 * time.Millisecond

// timeStart waits for a Session's first tool result, posted at posted, and
// returns its phases and the CPU its Sandbox had spent then.
func timeStart(b *testing.B, s *System, id string, posted time.Time) start {
	var st start
	type sample struct {
		at  time.Time
		cpu time.Duration
	}
	var mu sync.Mutex
	var samples []sample
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(sampleCPU)
		defer tick.Stop()
		var dir string // the Sandbox's cgroup, once it has one
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if dir == "" {
				dir = sandboxCgroup("cpuacct", s.sandboxOf(id))
			}
			c := cgroupUsage(dir)
			mu.Lock()
			samples = append(samples, sample{time.Now(), c})
			mu.Unlock()
		}
	}()
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
					mu.Lock()
					defer mu.Unlock()
					i := sort.Search(len(samples), func(i int) bool { return samples[i].at.After(e.At) })
					if i == 0 {
						b.Errorf("session %s: no CPU sample before its first tool's result", id)
						return st
					}
					st.cpu = processesCPU(s.sandboxOf(id))
					st.cpu.sandbox, st.cpuBefore = samples[i-1].cpu, e.At.Sub(samples[i-1].at)
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

// processesCPU reads what Sandbox name's processes spent: the split of
// cpuSpent, whose whole (sandbox) its cgroup's samples give.
func processesCPU(name string) cpuSpent {
	var c cpuSpent
	for _, pid := range sandboxPids(name) {
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
