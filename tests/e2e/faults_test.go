package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// The fault suite: each test does to a running System what a person or a
// machine does to one, and asserts that nothing is lost (every Event once,
// in order; every queued prompt delivered once) and nothing is left behind
// once its Session sleeps (no Sandbox, mount, network namespace, veth or
// relay rule). The Runner or Hub killed mid-Turn are
// TestARunnerProcessKilledMidTurnLosesNothing and
// TestKndlDevKilledMidTurnLosesNothing.

// TestTheRunnersLineCutMidTurnLosesNothing cuts the line between the
// Runner and the Hub while a Turn runs a tool, silently, as a pulled cable
// does, with a prompt queued behind the Turn meanwhile, until both sides
// have dropped it. The Hub sees the Runner gone within two ping periods
// and freezes the Session; Claude Code finishes the Turn in the Sandbox all
// the same. With the line back the Runner connects again, the Turn's
// Events arrive once and in order, and the queued prompt is delivered once.
// Both sides ping every 2 s here (protocol.PingEvery is 10 s), so the
// test waits seconds, not half a minute, for them to give up.
func TestTheRunnersLineCutMidTurnLosesNothing(t *testing.T) {
	const ping = 2 * time.Second
	s := Start(t, WithRunnerLine(), WithPingEvery(ping))
	v := s.Ready("before the cut", "Ready.")
	s.Model.On(testkit.PromptContains("work through the cut"), testkit.Bash("sleep 3; echo worked-through-the-cut"))
	s.Model.On(testkit.ToolResultContains("worked-through-the-cut"), testkit.Text("Finished while the line was cut."))
	s.Model.On(testkit.PromptContains("queued during the cut"), testkit.Text("The queued prompt's answer."))
	s.prompt(v.ID, "work through the cut")
	s.waitToolCall(v.ID, testenv.WaitMedium, "the tool call before the cut", "worked-through-the-cut")
	s.Line.Cut()
	cut := time.Now()
	s.prompt(v.ID, "a prompt queued during the cut")
	// Two periods, and room for the freeze on a loaded host.
	testenv.Eventually(t, 2*ping+testenv.WaitShort, "the Hub freezes the Session of the Runner it can't hear", func() bool {
		return s.state(v.ID).State == api.Frozen
	})
	t.Logf("the Hub froze the Session %s after the cut", time.Since(cut).Round(100*time.Millisecond))
	testenv.Eventually(t, 2*ping+testenv.WaitShort, "the Runner drops the line it can't hear", func() bool { return !s.Runner.Connected() })
	t.Logf("the Runner dropped the line %s after the cut", time.Since(cut).Round(100*time.Millisecond))
	s.Line.Restore()
	restored := time.Now()

	s.turnEnds(v.ID, 3) // the first prompt's, the cut one's, the queued one's
	t.Logf("the queued prompt's Turn ended %s after the line came back", time.Since(restored).Round(100*time.Millisecond))
	s.waitState(v.ID, api.Active)
	evs := s.Events(v.ID)
	once(t, evs, protocol.EventToolResult, "worked-through-the-cut")
	once(t, evs, protocol.EventText, "Finished while the line was cut.", "The queued prompt's answer.")
	once(t, evs, protocol.EventPrompt, "work through the cut", "queued during the cut")
	inOrder(t, evs, "work through the cut", "worked-through-the-cut", "Finished while the line was cut.",
		"queued during the cut", "The queued prompt's answer.")
	if n := s.promptCalls("queued during the cut"); n != 1 {
		t.Errorf("%d model calls carried the queued prompt as new, want 1", n)
	}
	s.sleepsLeavingNothing(v.ID)
}

// waitToolCall waits for a tool call whose input holds marker.
func (s *System) waitToolCall(id string, within time.Duration, what, marker string) {
	s.t.Helper()
	s.WaitEvent(id, within, what, func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolUse && strings.Contains(string(e.Input), marker)
	})
}

// promptCalls counts the model calls whose newest message is a prompt
// carrying text (not a tool's result after it).
func (s *System) promptCalls(text string) int {
	n := 0
	for _, r := range s.Model.Turns() {
		m := r.LastUser()
		if len(m.ToolResults()) == 0 && strings.Contains(strings.Join(m.Texts(), "\n"), text) {
			n++
		}
	}
	return n
}

// sleepsLeavingNothing puts a Session to sleep and checks the host holds
// nothing of its running Sandbox: the backend lists it stopped (its disks
// kept), and there is no mount nor loop device over a file under the
// Runner's home, and neither the
// network namespace, the veth nor the relay rule of any slot this System's
// Sandboxes had. (Other Systems' Sandboxes may share the host: each check
// names this System's own.)
func (s *System) sleepsLeavingNothing(id string) {
	s.t.Helper()
	ctx := context.Background()
	all, err := s.Backend.List(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	var slots []int
	for _, sb := range all {
		b := sb.Addr.As4()
		slots = append(slots, (int(b[2])<<8|int(b[3]))/4) // slot n's /30 is the pool's n-th
	}
	if code := s.Do(http.MethodPost, "/api/sessions/"+id+"/sleep", nil, nil); code != http.StatusNoContent {
		s.t.Fatalf("sleep: %d", code)
	}
	s.waitState(id, api.Asleep)
	all, err = s.Backend.List(ctx)
	for _, sb := range all {
		if sb.State != sandbox.StateStopped {
			s.t.Errorf("Sandbox %s is %s after sleep, want stopped", sb.ID, sb.State)
		}
	}
	if err != nil {
		s.t.Error(err)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err != nil {
		s.t.Error(err)
	} else {
		for _, l := range strings.Split(string(mi), "\n") {
			if strings.Contains(l, s.Home) {
				s.t.Errorf("a mount under the Runner's home after sleep: %s", l)
			}
		}
	}
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range backing {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), s.Home) {
			s.t.Errorf("a loop device over a file under the Runner's home after sleep: %s: %s", f, b)
		}
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		s.t.Fatalf("ip link: %v", err)
	}
	rules, err := exec.Command("nft", "list", "chain", "inet", "kndl", "sandbox_in").CombinedOutput()
	if err != nil {
		s.t.Fatalf("nft list chain inet kndl sandbox_in: %v: %s", err, rules)
	}
	if port := fmt.Sprintf("dport %d ", s.runnerCfg.RelayPort); strings.Contains(string(rules), port) {
		s.t.Errorf("a relay rule to this Runner's relay after sleep:\n%s", rules)
	}
	for _, n := range slots {
		if _, err := os.Stat(fmt.Sprintf("/run/netns/kndl-%d", n)); err == nil {
			s.t.Errorf("network namespace kndl-%d after sleep", n)
		}
		veth := fmt.Sprintf("kv%d", n)
		for _, l := range strings.Split(string(links), "\n") {
			if f := strings.Fields(l); len(f) > 1 && strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":") == veth {
				s.t.Errorf("veth %s after sleep: %s", veth, l)
			}
		}
		if strings.Contains(string(rules), `iifname "`+veth+`"`) {
			s.t.Errorf("the relay rule of %s after sleep:\n%s", veth, rules)
		}
	}
}

// TestTheHubsDiskFullForAWhileLosesNothing fills the disk the Hub's store
// is on while a Turn runs a tool. A prompt sent then is refused, saying the
// disk is full, and nothing of it is kept; the Runner's Events wait in its
// outbox, sent again until the Hub can store them. Once space is freed the
// Turn's Events arrive once and in order, and the next prompt runs.
func TestTheHubsDiskFullForAWhileLosesNothing(t *testing.T) {
	t.Parallel()
	s := Start(t, WithHubDisk(64<<20))
	v := s.Ready("before the disk fills", "Ready.")
	s.Model.On(testkit.PromptContains("work while the disk is full"), testkit.Bash(untilTouched("/tmp/disk-full")+"; echo ran-on-a-full-disk"))
	s.Model.On(testkit.ToolResultContains("ran-on-a-full-disk"), testkit.Text("Done while the disk was full."))
	s.Model.On(testkit.PromptContains("once there is room"), testkit.Text("Answered once there was room."))
	s.prompt(v.ID, "work while the disk is full")
	s.waitToolCall(v.ID, testenv.WaitMedium, "the tool call before the disk fills", "ran-on-a-full-disk")
	filler := filepath.Join(s.HubDisk, "filler")
	fill(t, filler)

	var refused Refusal
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/prompts", api.PromptRequest{Text: "refused while the disk is full"}, &refused); code != http.StatusServiceUnavailable ||
		!strings.Contains(refused.Message, "disk is full") {
		t.Fatalf("a prompt while the disk is full: %d %q, want 503 saying the disk is full", code, refused.Message)
	}
	s.inSandbox(v.ID, "touch /tmp/disk-full") // the tool ends once the Hub's disk is full
	// The Turn ends in the Sandbox meanwhile; its Events can't be stored.
	testenv.Eventually(t, testenv.WaitMedium, "the Runner told the Hub could not store its Events", func() bool {
		return strings.Contains(s.logText(), "the Hub did not take a message; sending it again")
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.turnEnds(v.ID, 2)
	s.waitState(v.ID, api.Active)
	s.prompt(v.ID, "answer once there is room")
	s.turnEnds(v.ID, 3)
	evs := s.Events(v.ID)
	once(t, evs, protocol.EventToolResult, "ran-on-a-full-disk")
	once(t, evs, protocol.EventText, "Done while the disk was full.", "Answered once there was room.")
	inOrder(t, evs, "work while the disk is full", "ran-on-a-full-disk", "Done while the disk was full.", "once there is room", "Answered once there was room.")
	for _, e := range evs {
		if strings.Contains(e.Text, "refused while the disk is full") {
			t.Fatalf("the prompt refused while the disk was full is in the Session: %+v", e)
		}
	}
	if n := s.promptCalls("refused while the disk is full"); n != 0 {
		t.Fatalf("the prompt refused while the disk was full reached the model %d times", n)
	}
	s.sleepsLeavingNothing(v.ID)
}

// fill writes path until its disk has no room left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return
		}
	}
}

// TestTheRelayRefusingForAWhileLosesNothing has the relay refuse the
// Sandbox's connections (its firewall rule taken away) while a prompt is
// typed: no hook reaches the Runner, so nothing says the prompt was taken,
// and the Turn waits, since here the model's requests go through the relay
// too (RUNNER_MODEL_ENDPOINT), and Claude Code asks again. Past the
// Runner's unheard wait the relay is back: the Turn runs, its Events arrive once
// each, the prompt reaches the model once, and the next prompt runs.
func TestTheRelayRefusingForAWhileLosesNothing(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("before the relay refuses", "Ready.")
	s.Model.On(testkit.PromptContains("while the relay refuses"), testkit.Bash("echo ran-without-the-relay"))
	s.Model.On(testkit.ToolResultContains("ran-without-the-relay"), testkit.Text("Done without the relay."))
	s.Model.On(testkit.PromptContains("after the relay is back"), testkit.Text("Answered with the relay back."))
	restore := s.refuseRelay(v.ID)
	s.prompt(v.ID, "work while the relay refuses")
	// With no hook, the transcript tells of the prompt (its time is when
	// Claude Code took it). The refusal lasts past the Runner's unheard
	// wait from then (15 s, deliver.go's unheardWaitDefault), so a Runner
	// that missed the transcript would type the prompt again. Not much
	// longer: Claude Code asks the model again on a backoff doubling from
	// half a second (a try about 18 s after the prompt, the next near 26).
	const unheardWait = 15 * time.Second
	took := s.WaitEvent(v.ID, testenv.WaitMedium, "the transcript telling of the prompt", func(e protocol.Event) bool {
		return e.Kind == protocol.EventPrompt && strings.Contains(e.Text, "while the relay refuses")
	})
	time.Sleep(time.Until(took.At.Add(unheardWait + 1500*time.Millisecond)))
	restore()
	restored := time.Now()
	s.WaitEvent(v.ID, testenv.WaitLong, "the Turn's answer once the relay is back", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Done without the relay."
	})
	t.Logf("the Turn's answer came %s after the relay was back", time.Since(restored).Round(100*time.Millisecond))
	s.prompt(v.ID, "answer after the relay is back")
	s.WaitEvent(v.ID, testenv.WaitLong, "the next prompt's answer", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Answered with the relay back."
	})
	evs := s.Events(v.ID)
	once(t, evs, protocol.EventToolResult, "ran-without-the-relay")
	once(t, evs, protocol.EventText, "Done without the relay.", "Answered with the relay back.")
	once(t, evs, protocol.EventPrompt, "while the relay refuses", "after the relay is back")
	inOrder(t, evs, "while the relay refuses", "ran-without-the-relay", "Done without the relay.", "after the relay is back", "Answered with the relay back.")
	if n := s.promptCalls("while the relay refuses"); n != 1 {
		t.Errorf("%d model calls carried the prompt typed while the relay refused, want 1", n)
	}
	s.sleepsLeavingNothing(v.ID)
}

// refuseRelay takes away the firewall rule that lets a Session's Sandbox
// reach the relay, so its connections are refused, and returns what puts
// it back.
func (s *System) refuseRelay(id string) (restore func()) {
	s.t.Helper()
	out, err := exec.Command("nft", "-a", "list", "chain", "inet", "kndl", "sandbox_in").CombinedOutput()
	if err != nil {
		s.t.Fatalf("nft: %v: %s", err, out)
	}
	port := fmt.Sprintf("dport %d ", s.runnerCfg.RelayPort)
	var rule, handle string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, port) {
			rule, handle, _ = strings.Cut(strings.TrimSpace(l), " # handle ")
		}
	}
	if handle == "" {
		s.t.Fatalf("no relay rule for port %d:\n%s", s.runnerCfg.RelayPort, out)
	}
	if out, err := exec.Command("nft", "delete", "rule", "inet", "kndl", "sandbox_in", "handle", handle).CombinedOutput(); err != nil {
		s.t.Fatalf("nft delete: %v: %s", err, out)
	}
	if _, code := s.Exec(id, "sh", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", sandbox.RelayHost, s.runnerCfg.RelayPort)); code == 0 {
		s.t.Fatal("the Sandbox still reaches the relay with its rule taken away")
	}
	return func() {
		s.t.Helper()
		args := append([]string{"insert", "rule", "inet", "kndl", "sandbox_in"}, strings.Fields(strings.ReplaceAll(rule, `"`, ""))...)
		if out, err := exec.Command("nft", args...).CombinedOutput(); err != nil {
			s.t.Fatalf("nft %v: %v: %s", args, err, out)
		}
	}
}

// TestASandboxOutOfMemorySleepsSayingSoAndWakes has the kernel kill Claude
// Code for want of memory: the test lowers the Sandbox's memory limit to
// a little over what it uses and makes Claude Code the OOM killer's first
// choice, then a tool eats memory. The Session is Asleep saying its
// Sandbox ran out of memory, and the next prompt wakes it into a fresh
// Sandbox that answers.
func TestASandboxOutOfMemorySleepsSayingSoAndWakes(t *testing.T) {
	t.Parallel()
	if runtime, _ := sandboxRuntime(t); runtime == "runsc" {
		// Measured: with the Sentry's cgroup lowered so, the tool ran for
		// 2 minutes and nothing was killed.
		t.Skip("on gVisor no host process is Claude Code's, and lowering the limit of a running Sandbox's cgroup killed nothing; " +
			"a gVisor Sandbox past its memory limit is internal/sandbox/oci TestConformanceGVisor/KilledPastMemoryLimit's")
	}
	s := Start(t)
	v := s.Ready("before the memory runs out", "Ready.")
	s.Model.On(testkit.PromptContains("use all the memory"), testkit.Bash("tail /dev/zero"))
	s.Model.On(testkit.PromptContains("after the memory ran out"), testkit.Text("Awake again after running out of memory."))
	pid := hostPID(t, "/opt/kndl/claude-code/claude", v.ID)
	limitMemory(t, pid, 64<<20)
	if err := os.WriteFile("/proc/"+pid+"/oom_score_adj", []byte("1000"), 0); err != nil {
		t.Fatal(err)
	}
	s.prompt(v.ID, "use all the memory")
	testenv.Eventually(t, testenv.WaitLong, "the Session asleep, its Sandbox out of memory", func() bool {
		st := s.state(v.ID)
		return st.State == api.Asleep && strings.Contains(st.StateDetail, "ran out of memory")
	})
	t.Logf("asleep: %s", s.state(v.ID).StateDetail)
	s.prompt(v.ID, "a prompt after the memory ran out")
	s.WaitEvent(v.ID, testenv.WaitLong, "the answer after the wake", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Awake again after running out of memory."
	})
	once(t, s.Events(v.ID), protocol.EventPrompt, "use all the memory", "after the memory ran out")
	s.sleepsLeavingNothing(v.ID)
}

// TestASandboxWhosePID1IsKilledSleepsSayingSoAndWakes kills the Sandbox's
// first process under a running Session, and every process of the
// Sandbox with it: the Session is Asleep saying its Sandbox stopped (it
// had stayed Active, its helpers started again every second, for good),
// the Runner stops starting its helpers, and the next prompt wakes it.
func TestASandboxWhosePID1IsKilledSleepsSayingSoAndWakes(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("before the Sandbox is killed", "Ready.")
	s.Model.On(testkit.PromptContains("after the Sandbox was killed"), testkit.Text("Awake again after the kill."))
	// The backend's record of the Sandbox's first process, on either runtime.
	var run struct{ PID int }
	paths, _ := filepath.Glob(filepath.Join(s.runnerCfg.Home, "sandboxes", "*", "sandboxes", "s-"+v.ID, "run.json"))
	if len(paths) != 1 {
		t.Fatalf("the Sandbox's run record: %v, want one", paths)
	}
	if raw, err := os.ReadFile(paths[0]); err != nil || json.Unmarshal(raw, &run) != nil || run.PID <= 0 {
		t.Fatalf("the Sandbox's run record %s: %v", paths[0], err)
	}
	if err := syscall.Kill(run.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, testenv.WaitMedium, "the Session asleep, its Sandbox stopped", func() bool {
		st := s.state(v.ID)
		return st.State == api.Asleep && strings.Contains(st.StateDetail, "Sandbox stopped")
	})
	t.Logf("asleep: %s", s.state(v.ID).StateDetail)
	retries := func() int { return strings.Count(s.logText(), "did not start") }
	before := retries()
	time.Sleep(3 * time.Second)
	if n := retries(); n != before {
		t.Errorf("the Runner went on starting the Session's helpers once it slept: %d more tries in 3 s", n-before)
	}
	s.prompt(v.ID, "a prompt after the Sandbox was killed")
	s.WaitEvent(v.ID, testenv.WaitLong, "the answer after the wake", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Awake again after the kill."
	})
	once(t, s.Events(v.ID), protocol.EventPrompt, "before the Sandbox is killed", "after the Sandbox was killed")
}

// TestASandboxPastItsDiskLimitSaysSoAndSleepsLeavingNothing runs a
// Runner with RUNNER_SANDBOX_MAX_DISK_MIB: the start log says the limit,
// a Bash call writing past it fails with "No space left on device" while
// the host's disk has room, a note after it says the disk is full, and
// Claude Code, its state on a disk of its own, goes on: the next call
// frees the space. A sleep leaves no mount or loop device; the wake keeps
// what the Sandbox wrote.
func TestASandboxPastItsDiskLimitSaysSoAndSleepsLeavingNothing(t *testing.T) {
	t.Parallel()
	const mib = 512
	s := Start(t, WithSandboxDisk(mib))
	v := s.Ready("before the disk fills", "Ready.")
	s.WaitEvent(v.ID, testenv.WaitShort, "the start log's line on the disk", func(e protocol.Event) bool {
		return e.Kind == protocol.EventLog && strings.Contains(e.Text, fmt.Sprintf("of %d MiB used", mib))
	})
	s.Model.On(testkit.PromptContains("fill the disk"), testkit.Bash("echo kept > /root/kept; head -c 600M /dev/zero > /root/big"))
	s.Model.On(testkit.ToolResultContains("No space left on device"), testkit.Bash("rm /root/big && echo freed-the-disk"))
	s.Model.On(testkit.ToolResultContains("freed-the-disk"), testkit.Text("The disk has room again."))
	s.prompt(v.ID, "fill the disk")
	s.WaitEvent(v.ID, testenv.WaitLong, "the note that the disk is full", func(e protocol.Event) bool {
		return e.Kind == protocol.EventNote && strings.Contains(e.Text, "disk is full") && strings.Contains(e.Text, "RUNNER_SANDBOX_MAX_DISK_MIB")
	})
	s.WaitEvent(v.ID, testenv.WaitLong, "Claude's answer once it freed the disk", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "The disk has room again."
	})
	var host syscall.Statfs_t
	if err := syscall.Statfs(s.Home, &host); err != nil || host.Bavail*uint64(host.Bsize) < 1<<30 {
		t.Errorf("the host's filesystem: %v, %d bytes free; want room", err, host.Bavail*uint64(host.Bsize))
	}
	s.sleepsLeavingNothing(v.ID)
	s.Model.On(testkit.PromptContains("after the disk filled"), testkit.Bash("cat /root/kept"))
	s.Model.On(testkit.ToolResultContains("kept"), testkit.Text("Still there after the wake."))
	s.prompt(v.ID, "a prompt after the disk filled")
	s.WaitEvent(v.ID, testenv.WaitLong, "the answer after the wake", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Still there after the wake."
	})
}

// hostPID is the host's pid of the one process whose command line starts
// with prog and holds arg.
func hostPID(t *testing.T, prog, arg string) string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if cmd := string(b); err == nil && strings.HasPrefix(cmd, prog+"\x00") && strings.Contains(cmd, arg) {
			found = append(found, strings.Split(p, "/")[2])
		}
	}
	if len(found) != 1 {
		t.Fatalf("processes of %s with %s: %v, want one", prog, arg, found)
	}
	return found[0]
}

// limitMemory sets the memory limit of pid's cgroup to what it uses now
// and room more, on cgroup v1 (and hybrid) or v2.
func limitMemory(t *testing.T, pid string, room int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var dir, usage, limit string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == "memory" {
			dir, usage, limit = filepath.Join("/sys/fs/cgroup/memory", f[2]), "memory.usage_in_bytes", "memory.limit_in_bytes"
		}
	}
	if dir == "" {
		for _, l := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(l, "0::"); ok {
				dir, usage, limit = filepath.Join("/sys/fs/cgroup", p), "memory.current", "memory.max"
			}
		}
	}
	used, err := os.ReadFile(filepath.Join(dir, usage))
	if err != nil {
		t.Fatalf("the Sandbox's memory cgroup (%s): %v", dir, err)
	}
	var n int64
	fmt.Sscan(string(used), &n)
	if err := os.WriteFile(filepath.Join(dir, limit), []byte(fmt.Sprint(n+room)), 0); err != nil {
		t.Fatalf("limit %s: %v", dir, err)
	}
}
