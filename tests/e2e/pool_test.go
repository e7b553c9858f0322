package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// fromPoolLine is what a Session's start log says when it took a warm
// pool Sandbox.
const fromPoolLine = "started from the warm pool"

// poolReady waits until the Runner's warm pool holds n ready Sandboxes
// none of except names, and returns their pool ids.
func (s *System) poolReady(except map[string]bool, n int) []string {
	s.t.Helper()
	deadline := time.Now().Add(testenv.WaitBuild)
	for {
		all, err := s.Backend.List(context.Background())
		if err != nil {
			s.t.Fatal(err)
		}
		var ids []string
		for _, st := range all {
			id, ok := strings.CutPrefix(st.ID, "w-")
			if !ok || except[id] || st.State != sandbox.StateRunning {
				continue
			}
			if _, handed := os.Stat(filepath.Join(s.Home, "pool", id, "session")); errors.Is(handed, os.ErrNotExist) {
				ids = append(ids, id)
			}
		}
		// Ready once the Runner says so: Claude Code is at its prompt.
		if len(ids) >= n && strings.Count(s.logText(), "a warm pool Sandbox is ready") >= len(except)+n {
			return ids[:n]
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("not %d warm pool Sandboxes ready within %v; the log:\n%s", n, testenv.WaitBuild, s.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sandboxOf names the Sandbox a Session runs in: its own, or the warm pool
// one its directory links to.
func (s *System) sandboxOf(id string) string {
	if target, err := os.Readlink(filepath.Join(s.Home, "sessions", id)); err == nil {
		return "w-" + filepath.Base(target)
	}
	return "s-" + id
}

// startLogSays reports whether a Session's start log has a line with text.
func (s *System) startLogSays(id, text string) bool {
	for _, e := range s.Events(id) {
		if e.Kind == protocol.EventLog && strings.Contains(e.Text, text) {
			return true
		}
	}
	return false
}

// TestNoWarmPoolSandboxServesTwoSessionsEachAtTheReposHeadAndAChangedVariableThrowsItAway:
// with RUNNER_WARM_POOL=1, a Session after the first takes the Sandbox the
// pool made for its Environment version, says so in its start log, and
// runs its Turn there with the Repo's Variables and the Creator's token, at
// the Repo's head: a commit pushed after the pool Sandbox was cloned is in
// its Workspace (git in the Sandbox pulls it through the git relay as the
// Session). The pool makes a new one for the next Session, never handing
// the same one out again. A Variable changed since the pool Sandbox started
// throws it away: that Session starts cold, with the new value.
func TestNoWarmPoolSandboxServesTwoSessionsEachAtTheReposHeadAndAChangedVariableThrowsItAway(t *testing.T) {
	t.Parallel()
	s := Start(t, WithSandboxGitHub(time.Minute), WithWarmPool(1))
	dir := s.Repo()
	s.GitHub.ServeRepo(t, "acme/app", dir)
	s.GitHub.InstallApp("acme/app")
	repo := s.GitHub.RepoURL("acme/app")
	var r api.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": repo}, &r)
	setRegion := func(v string) {
		if code := s.Do(http.MethodPut, "/api/repos/"+r.ID+"/variables/REGION", api.VariableRequest{Value: v}, &api.Variable{}); code != http.StatusOK {
			t.Fatalf("set REGION: got %d, want 200", code)
		}
	}
	setRegion("eu-north-1")
	s.Model.On(testkit.PromptContains("region?"), testkit.Bash("printenv REGION; git -C /workspace log -1 --format=%s"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("done"))
	// regionAndHead is the Session's REGION and its Workspace's head.
	regionAndHead := func(id string) string { return turnResult(t, s, id) }

	first := s.NewSession(repo, "region? cold")
	if got := regionAndHead(first.ID); got != "eu-north-1\nreadme" {
		t.Fatalf("the first Session's REGION and head: got %q, want eu-north-1 and readme", got)
	}
	if s.startLogSays(first.ID, fromPoolLine) {
		t.Fatal("the first Session says it came from the pool, which had nothing yet")
	}
	served := map[string]bool{}     // pool ids handed out
	servedTo := map[string]string{} // pool id -> the Session it went to
	for i := range 2 {
		p := s.poolReady(served, 1)[0]
		if i == 0 { // a commit the pool Sandbox was not cloned at
			for _, args := range [][]string{{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "pushed after the fill"},
				{"push", "-q", s.GitHub.BarePath("acme/app"), "HEAD:main"}} {
				if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v %s", args, err, out)
				}
			}
		}
		// The first prompt, typed into the pool's Claude Code, arrives
		// byte for byte, once.
		prompt := fmt.Sprintf("region? warm %d:\ta tab, e\u0301, \U0001F600", i)
		v := s.NewSession(repo, prompt)
		if got := regionAndHead(v.ID); got != "eu-north-1\npushed after the fill" {
			t.Fatalf("warm Session %d's REGION and head: got %q, want eu-north-1 and the commit pushed after the fill", i, got)
		}
		once(t, s.Events(v.ID), protocol.EventPrompt, "region? warm")
		for _, e := range s.Events(v.ID) {
			if e.Kind == protocol.EventPrompt && e.Text != prompt {
				t.Fatalf("warm Session %d's prompt arrived as %q, want %q", i, e.Text, prompt)
			}
		}
		if !s.startLogSays(v.ID, fromPoolLine) {
			t.Fatalf("warm Session %d's start log does not say %q: %s", i, fromPoolLine, dump(s.Events(v.ID)))
		}
		if got := s.sandboxOf(v.ID); got != "w-"+p {
			t.Fatalf("warm Session %d runs in %s, want the pool's w-%s", i, got, p)
		}
		if other, ok := servedTo[p]; ok {
			t.Fatalf("pool Sandbox %s served %s and then %s", p, other, v.ID)
		}
		served[p], servedTo[p] = true, v.ID
	}

	// A Variable changed after the pool Sandbox started throws it away.
	p := s.poolReady(served, 1)[0]
	setRegion("us-east-2")
	v := s.NewSession(repo, "region? changed")
	if got, _, _ := strings.Cut(regionAndHead(v.ID), "\n"); got != "us-east-2" {
		t.Fatalf("after the change REGION: got %q, want us-east-2", got)
	}
	if s.startLogSays(v.ID, fromPoolLine) || s.sandboxOf(v.ID) != "s-"+v.ID {
		t.Fatalf("the Session after the change took the pool Sandbox (runs in %s), want a cold start", s.sandboxOf(v.ID))
	}
	for deadline := time.Now().Add(testenv.WaitMedium); ; time.Sleep(50 * time.Millisecond) {
		_, err := s.Backend.Status(context.Background(), "w-"+p)
		if errors.Is(err, sandbox.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stale pool Sandbox w-%s: got %v, want it removed", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Home, "pool", p)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale pool Sandbox's directory: got %v, want it removed", err)
	}
}

// BenchmarkWarmPoolStart times `kndl new` (POST /api/sessions) to the first
// prompt typed (its turn_start: Claude Code took it) from the warm pool,
// and the same on a Runner with the pool off, side by side in one run on
// one host, each iteration one of each once the pool is full again, and
// prints both medians with their ratio: the target is at most 0.1.
func BenchmarkWarmPoolStart(b *testing.B) {
	type runner struct {
		s     *System
		repo  string
		took  []time.Duration
		label string
	}
	var rs []*runner
	for _, n := range []int{0, 1} {
		s := Start(b, WithWarmPool(n))
		r := &runner{s: s, repo: s.Repo(), label: map[int]string{0: "no-pool", 1: "pool"}[n]}
		s.Model.On(testkit.PromptContains("bench"), testkit.Text("ok"))
		w := s.NewSession(r.repo, "bench warm up")
		s.WaitEvent(w.ID, testenv.WaitBuild, "the warm-up turn's end", kind(protocol.EventTurnEnd))
		rs = append(rs, r)
	}
	served := map[string]bool{}
	for i := 0; b.Loop(); i++ {
		// The pool full again, so no fill runs beside either start.
		b.StopTimer()
		served[rs[1].s.poolReady(served, 1)[0]] = true
		b.StartTimer()
		for _, r := range rs {
			logged := len(r.s.logText())
			start := time.Now()
			v := r.s.NewSession(r.repo, fmt.Sprintf("bench %d", i))
			ts := r.s.WaitEvent(v.ID, testenv.WaitBuild, "the first prompt taken", kind(protocol.EventTurnStart))
			// Its stamp, not the poll that saw it: the poll's interval is
			// no part of the start.
			r.took = append(r.took, ts.At.Sub(start))
			b.StopTimer()
			fmt.Printf("warm-pool-start-steps %s %d: %s\n", r.label, i, startSteps(r.s.Events(v.ID), start, ts.At))
			for _, line := range strings.Split(r.s.logText()[logged:], "\n") {
				if strings.Contains(line, v.ID) {
					fmt.Printf("warm-pool-start-log %s %d: %.300s\n", r.label, i, line)
				}
			}
			if got := r.s.startLogSays(v.ID, fromPoolLine); got != (r.label == "pool") {
				b.Fatalf("%s: session %d says it came from the pool: %v", r.label, i, got)
			}
			r.s.WaitEvent(v.ID, testenv.WaitMedium, "the Turn's end", kind(protocol.EventTurnEnd))
			r.s.Backend.Remove(context.Background(), r.s.sandboxOf(v.ID))
			b.StartTimer()
		}
	}
	cold, pool := rs[0].took, rs[1].took
	reportMedian(b, pool, "ms/pool-median")
	reportMedian(b, cold, "ms/no-pool-median")
	pm, cm := median(pool), median(cold)
	ratio := float64(pm) / float64(cm)
	b.ReportMetric(ratio, "pool/no-pool")
	fmt.Printf("warm-pool-start pool_ms=%d no_pool_ms=%d ratio=%.3f target=0.1 host=%q\n", pm.Milliseconds(), cm.Milliseconds(), ratio, cpuModel())
}

// startSteps lists a start's Events up to its turn_start, each as its ms
// since start, where the start's time goes.
func startSteps(evs []protocol.Event, start, end time.Time) string {
	var steps []string
	for _, e := range evs {
		if e.At.After(end) {
			continue
		}
		text, _, _ := strings.Cut(e.Text, "\n")
		if len(text) > 160 {
			text = text[:160]
		}
		steps = append(steps, fmt.Sprintf("%d %s %q", e.At.Sub(start).Milliseconds(), e.Kind, text))
	}
	return strings.Join(steps, "; ")
}

// cpuModel is lscpu's model name of this host.
func cpuModel() string {
	out, _ := exec.Command("lscpu").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Model name:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// turnResult waits for the end of Session id's Turn and returns its first
// tool result, trimmed.
func turnResult(t *testing.T, s *System, id string) string {
	t.Helper()
	s.WaitEvent(id, testenv.WaitBuild, "the Turn's end", kind(protocol.EventTurnEnd))
	for _, e := range s.Events(id) {
		if e.Kind == protocol.EventToolResult {
			return strings.TrimSpace(e.Text)
		}
	}
	t.Fatalf("session %s: no tool result", id)
	return ""
}
