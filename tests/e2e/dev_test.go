package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/runner"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// devProcess is `kndl dev` run as a person runs it: its own process on
// its own KNDL_HOME, which a test may SIGKILL and start again.
type devProcess struct {
	t    *testing.T
	home string
	env  []string
	bin  string // the kndl binary start runs: this build's, unless a test sets another
	cmd  *exec.Cmd
	out  *lockedWriter
	log  *strings.Builder
}

func newDev(t *testing.T, model *testkit.Anthropic) *devProcess {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun", "tmux", "git")
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, "runner"), 0o700)
	for _, name := range []string{"images", "builds", "claude-code"} {
		cached(t, filepath.Join(home, "runner"), name)
	}
	d := &devProcess{t: t, home: home, bin: kndlBinary(t), log: &strings.Builder{}}
	d.out = &lockedWriter{w: d.log}
	relayPort := freePort(t)
	d.env = append(os.Environ(), "KNDL_HOME="+home, "KNDL_CONFIG="+filepath.Join(home, "cli.json"),
		fmt.Sprintf("HUB_LISTEN=127.0.0.1:%d", freePort(t)), fmt.Sprintf("RUNNER_RELAY_PORT=%d", relayPort),
		"CLAUDE_CODE_OAUTH_TOKEN="+claudeToken, "RUNNER_MODEL_ENDPOINT="+model.URL,
		"RUNNER_DEFAULT_IMAGE="+testkit.ImageRegistry(t), "KNDL_LOG_LEVEL=debug",
		// Each Session here starts cold: the warm pool has tests of its own.
		"RUNNER_WARM_POOL=0")
	d.env = append(d.env, sandboxEnv(t)...)
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("kndl dev's output:\n%s", d.log.String())
		}
		// What kndl dev leaves on purpose: its Sandboxes.
		ctx := context.Background()
		b, err := oci.New(ctx, sandboxOptions(t, filepath.Join(home, "runner"), relayPort, kndlBinary(t), 0, slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Errorf("remove kndl dev's Sandboxes: %v", err)
			return
		}
		all, _ := b.List(ctx)
		for _, sb := range all {
			b.Remove(ctx, sb.ID)
		}
	})
	return d
}

// start runs kndl dev and returns a System that drives its Hub's API as
// the dev user, once its Runner is connected.
func (d *devProcess) start(model *testkit.Anthropic) *System {
	d.t.Helper()
	d.cmd = exec.Command(d.bin, "dev")
	d.cmd.Env, d.cmd.Stdout, d.cmd.Stderr = d.env, d.out, d.out
	if err := testkit.StartTied(d.cmd); err != nil {
		d.t.Fatal(err)
	}
	var cfg apiclient.Config
	testenv.Eventually(d.t, testenv.WaitMedium, "kndl dev signs the CLI in", func() bool {
		b, err := os.ReadFile(filepath.Join(d.home, "cli.json"))
		return err == nil && json.Unmarshal(b, &cfg) == nil && cfg.Token != ""
	})
	s := &System{t: d.t, URL: cfg.HubURL, cli: cfg.Token, Model: model}
	testenv.Eventually(d.t, testenv.WaitMedium, "kndl dev's Runner connects", func() bool {
		var rs []api.RunnerStatus
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/api/runners", nil)
		req.Header.Set("Authorization", "Bearer "+s.cli)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&rs)
		return len(rs) == 1 && rs[0].Connected
	})
	return s
}

// stop sends kndl dev sig and waits for it to end.
func (d *devProcess) stop(sig syscall.Signal) {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	d.cmd.Process.Signal(sig)
	d.cmd.Wait()
	d.cmd = nil
}

// once fails unless each of the Session's Events of kind with text is
// there exactly once.
func once(t *testing.T, evs []protocol.Event, kind string, texts ...string) {
	t.Helper()
	for _, text := range texts {
		n := 0
		for _, e := range evs {
			if e.Kind == kind && strings.Contains(e.Text, text) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d %s Events with %q, want 1:\n%s", n, kind, text, dump(evs))
		}
	}
}

// inOrder fails t unless evs hold each of texts (in an Event's text or its
// tool input) in that order, and their sequence numbers only rise.
func inOrder(t *testing.T, evs []protocol.Event, texts ...string) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Fatalf("Event %d's seq %d follows seq %d:\n%s", i, evs[i].Seq, evs[i-1].Seq, dump(evs))
		}
	}
	at := 0
	for _, e := range evs {
		if at < len(texts) && (strings.Contains(e.Text, texts[at]) || strings.Contains(string(e.Input), texts[at])) {
			at++
		}
	}
	if at != len(texts) {
		t.Fatalf("the Events are out of order: found %d of %q in order:\n%s", at, texts, dump(evs))
	}
}

// TestKndlDevKilledMidTurnLosesNothing: kndl dev SIGKILLed while a Turn
// runs a tool, with a prompt queued behind it, and started again on the
// same home: the Turn finishes, its Events are all there once and in
// order, the queued prompt runs, and so does the next. Killed again while
// idle, the Session comes back and takes a prompt.
func TestKndlDevKilledMidTurnLosesNothing(t *testing.T) {
	t.Parallel()
	model := testkit.NewAnthropic(t, claudeToken)
	d := newDev(t, model)
	s := d.start(model)

	model.On(testkit.PromptContains("slow task"), testkit.Bash("sleep 6; echo long-job-finished"))
	model.On(testkit.ToolResultContains("long-job-finished"), testkit.Text("The long job is done."))
	model.On(testkit.PromptContains("queued behind"), testkit.Text("Queued prompt answered."))
	model.On(testkit.PromptContains("after the restart"), testkit.Text("Still here after the restart."))
	model.On(testkit.PromptContains("after the idle kill"), testkit.Text("Still here after the idle kill."))

	v := s.NewSession(s.Repo(), "run the slow task")
	s.waitToolCall(v.ID, testenv.WaitBuild, "the slow task's tool call", "long-job-finished")
	s.prompt(v.ID, "a prompt queued behind it")
	d.stop(syscall.SIGKILL)

	s = d.start(model)
	s.turnEnds(v.ID, 2) // the long job's Turn, then the queued prompt's
	s.waitState(v.ID, api.Active)
	s.prompt(v.ID, "a prompt after the restart")
	s.turnEnds(v.ID, 3)
	evs := s.Events(v.ID)
	once(t, evs, protocol.EventText, "The long job is done.", "Queued prompt answered.", "Still here after the restart.")
	once(t, evs, protocol.EventToolResult, "long-job-finished")
	for _, e := range evs {
		if e.Kind == protocol.EventToolResult && e.IsError {
			// As Claude Code's Bash tool refuses a long bare sleep at once
			// (docs/claude-code.md): the kill came after the Turn.
			t.Errorf("the slow task's tool failed, so the kill was not mid-Turn: %s", e.Text)
		}
	}
	once(t, evs, protocol.EventPrompt, "run the slow task", "queued behind", "after the restart")
	inOrder(t, evs, "run the slow task", "long-job-finished", "The long job is done.", "queued behind", "Queued prompt answered.", "after the restart")

	// Killed while idle: it comes back Active and answers.
	d.stop(syscall.SIGKILL)
	s = d.start(model)
	s.waitState(v.ID, api.Active)
	s.prompt(v.ID, "a prompt after the idle kill")
	s.turnEnds(v.ID, 4)
	once(t, s.Events(v.ID), protocol.EventText, "Still here after the idle kill.")
}

// runnerProcess runs `kndl runner` as its own process for s's Hub, with
// c's home, token and name and env added, as a Runner on another machine
// would run.
func runnerProcess(t *testing.T, c runner.Config, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(kndlBinary(t), "runner")
	cmd.Env = append(os.Environ(), "KNDL_HUB_URL="+c.HubURL, "RUNNER_TOKEN="+c.Token, "RUNNER_NAME="+c.Name,
		"RUNNER_HOME="+c.Home, fmt.Sprintf("RUNNER_RELAY_PORT=%d", c.RelayPort), "RUNNER_DEFAULT_IMAGE="+c.Image,
		"RUNNER_MODEL_ENDPOINT="+c.ModelEndpoint, "RUNNER_OUTBOUND_ALLOW="+outbound.Loopback, "RUNNER_WARM_POOL=0")
	cmd.Env = append(append(cmd.Env, sandboxEnv(t)...), env...)
	out := &lockedWriter{w: &strings.Builder{}}
	cmd.Stdout, cmd.Stderr = out, out
	if err := testkit.StartTied(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("kndl runner %s's output:\n%s", c.Name, out.w.(*strings.Builder).String())
		}
	})
	return cmd
}

// TestARunnerProcessKilledMidTurnLosesNothing: a Runner process SIGKILLed
// while a Turn runs a tool, its Hub staying up, and started again: the
// Session is Frozen meanwhile, Active again after, the Turn finishes with
// its Events there once, and the next prompt runs. The same Claude Code
// runs throughout, through the hand-over (the test's Runner stopped, a
// process started) and the kill, on both backends: each new Runner's relay
// serves it again once the Hub gave a fresh mod token, its conversation
// carries on, every prompt is read once, and the last Runner's helpers run
// in init, its ports watcher's list reaching the view.
func TestARunnerProcessKilledMidTurnLosesNothing(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("before the runner goes", "Ready.")
	pid := claudePID(t, s, v.ID)
	samePID := func(when string) {
		t.Helper()
		if got := claudePID(t, s, v.ID); got != pid {
			t.Fatalf("Claude Code %s: pid %s, want the same process (%s)", when, got, pid)
		}
	}
	// The test's own Runner hands over to a process of its own.
	s.runnerCancel()
	<-s.runnerDone
	s.waitState(v.ID, api.Frozen)
	cmd := runnerProcess(t, s.runnerCfg)
	s.waitState(v.ID, api.Active)
	samePID("after the hand-over")

	s.Model.On(testkit.PromptContains("slow work"), testkit.Bash(untilTouched("/tmp/slow-work-done")+"; echo slow-work-finished"))
	s.Model.On(testkit.ToolResultContains("slow-work-finished"), testkit.Text("The slow work is done."))
	s.Model.On(testkit.PromptContains("once it is back"), testkit.Text("Back and answering."))
	s.prompt(v.ID, "do the slow work")
	s.waitToolCall(v.ID, testenv.WaitMedium, "the slow work's tool call", "slow-work-finished")
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	s.waitState(v.ID, api.Frozen)
	runnerProcess(t, s.runnerCfg)
	s.inSandbox(v.ID, "touch /tmp/slow-work-done") // the tool ran through the kill
	s.turnEnds(v.ID, 2)
	s.waitState(v.ID, api.Active)
	samePID("after the kill")
	s.prompt(v.ID, "answer once it is back")
	s.turnEnds(v.ID, 3)
	if !lastRequestHas(s.Model, "before the runner goes") {
		t.Fatal("the conversation did not carry on through the Runners")
	}
	evs := s.Events(v.ID)
	once(t, evs, protocol.EventPrompt, "before the runner goes", "do the slow work", "answer once it is back")
	once(t, evs, protocol.EventToolResult, "slow-work-finished")
	once(t, evs, protocol.EventText, "The slow work is done.", "Back and answering.")
	// The last Runner's follower and ports watcher run in init, as the
	// first's did: no process of their own stays, and the watcher's list
	// reaches the Session's view.
	var left []string
	testenv.EventuallyShowing(t, testenv.WaitShort, func() bool {
		left = helperProcesses(t, s, v.ID)
		return len(left) == 0
	}, func() string { return "kndl helpers running as processes of their own: " + strings.Join(left, "; ") })
	if viewPorts(t, s, v.ID, func([]api.Port) bool { return true }) == nil {
		t.Fatal("no list of open ports reached the Session's view from the last Runner's watcher")
	}
}
