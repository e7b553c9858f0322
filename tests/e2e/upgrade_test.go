package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
	"kndl.dev/kndl/internal/tied"
)

// previousRelease is the commit of the release this build must upgrade from
// in place, its Sessions running: the last commit on main that passed CI,
// as there are no release tags. When a release lands, set it to that
// release's commit (git log main, its short hash will do); the next run
// builds it once into the test cache, ~/.cache/kndl-test/kndl-COMMIT.
const previousRelease = "b3e31b5"

// TestAnUpgradeOfTheHubThenTheRunnerMidTurnLosesNothing: a Hub and a Runner
// of the previous release, each its own process on its own state, with a
// Session mid-Turn (its tool waits on a file the test writes last), a
// prompt queued behind it and a watcher's kndl watch following it. The Hub
// is upgraded in place (the old process stopped as its service manager
// stops it, this build started on the same home and store), then the
// Runner. Across both, the queued prompt stays queued, the Session comes
// back Active each time, and once the tool may finish: the Turn ends, the
// queued prompt runs, so does the next, every Event from before is there
// as it was, each Event once and in order, and the watcher's stream
// resumed across both restarts with every Event once.
func TestAnUpgradeOfTheHubThenTheRunnerMidTurnLosesNothing(t *testing.T) {
	t.Parallel()
	model := testkit.NewAnthropic(t, claudeToken)
	model.On(testkit.PromptContains("long task"), testkit.Bash("until [ -e /workspace/.upgraded ]; do sleep 0.2; done; echo long-job-finished"))
	model.On(testkit.ToolResultContains("long-job-finished"), testkit.Text("The long job is done."))
	model.On(testkit.PromptContains("queued behind"), testkit.Text("Queued prompt answered."))
	model.On(testkit.PromptContains("after the upgrade"), testkit.Text("Still here after the upgrade."))

	// The old build's kndl dev makes the store and the dev user, signs the
	// CLI in and stores the setup token: everything in the store is the old
	// build's own. Its Hub and Runner then run apart, as on real machines.
	d := newDev(t, model)
	old := releaseBinary(t, previousRelease)
	d.bin = old
	s := d.start(model)
	d.stop(syscall.SIGTERM)
	key, err := os.ReadFile(filepath.Join(d.home, "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	hubEnv := slices.Concat(d.env, []string{"HUB_SECRETS_KEY=" + string(key)})
	paired := runKndl(t, old, d.env, "runner", "token", "create", "--name", "box")
	token := regexp.MustCompile(`kndlr_\S+`).FindString(paired)
	if token == "" {
		t.Fatalf("kndl runner token create printed %q, want a Runner token", paired)
	}
	runnerEnv := slices.Concat(d.env, []string{"KNDL_HUB_URL=" + s.URL, "RUNNER_TOKEN=" + token, "RUNNER_NAME=box", "RUNNER_OUTBOUND_ALLOW=" + outbound.Loopback})
	hub := startKndl(t, "the old Hub", old, hubEnv, "hub")
	s.waitHub()
	runner := startKndl(t, "the old Runner", old, runnerEnv, "runner")
	s.waitRunner("box")

	v := s.NewSession(s.Repo(), "run the long task")
	watch := startKndl(t, "the old CLI's kndl watch", old, d.env, "watch", "--json", v.ID)
	s.waitToolCall(v.ID, testenv.WaitBuild, "the long task's tool call", "long-job-finished")
	s.prompt(v.ID, "a prompt queued behind it")
	before := s.Events(v.ID)

	hub.stop(syscall.SIGTERM)
	startKndl(t, "this build's Hub", kndlBinary(t), hubEnv, "hub")
	s.waitHub()
	s.waitRunner("box")
	s.waitState(v.ID, api.Active)
	s.stillQueued(v.ID, "queued behind")

	runner.stop(syscall.SIGTERM)
	s.waitState(v.ID, api.Frozen)
	startKndl(t, "this build's Runner", kndlBinary(t), runnerEnv, "runner")
	s.waitState(v.ID, api.Active)
	s.stillQueued(v.ID, "queued behind")

	// The tool's wait ends only now, so the Turn ran across both upgrades.
	if err := os.WriteFile(filepath.Join(d.home, "runner", "sessions", v.ID, "workspace", ".upgraded"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.turnEnds(v.ID, 2) // the long task's Turn, then the queued prompt's
	s.waitState(v.ID, api.Active)
	s.prompt(v.ID, "a prompt after the upgrade")
	s.turnEnds(v.ID, 3)

	evs := s.Events(v.ID)
	kept(t, before, evs)
	once(t, evs, protocol.EventText, "The long job is done.", "Queued prompt answered.", "Still here after the upgrade.")
	once(t, evs, protocol.EventToolResult, "long-job-finished")
	once(t, evs, protocol.EventPrompt, "run the long task", "queued behind", "after the upgrade")
	inOrder(t, evs, "run the long task", "long-job-finished", "The long job is done.", "queued behind", "Queued prompt answered.", "after the upgrade")

	last := evs[len(evs)-1].Seq
	testenv.EventuallyShowing(t, testenv.WaitMedium, func() bool { return watched(t, watch).seqs[last] },
		func() string {
			return fmt.Sprintf("the watcher has no Event %d; it printed:\n%s", last, watch.stdout())
		})
	w := watched(t, watch)
	for _, e := range evs {
		if !w.seqs[e.Seq] {
			t.Errorf("the watcher missed Event %d (%s %q)", e.Seq, e.Kind, e.Text)
		}
	}
	if w.dup != 0 {
		t.Errorf("the watcher printed %d Events twice, want none:\n%s", w.dup, watch.stdout())
	}
	if n := strings.Count(watch.stderr(), "reconnecting"); n < 1 {
		t.Errorf("the watcher reconnected %d times, want at least once (the Hub restarted): %q", n, watch.stderr())
	}
}

// kept fails t unless each Event of before is in after as it was, under
// the same sequence number.
func kept(t *testing.T, before, after []protocol.Event) {
	t.Helper()
	bySeq := map[int64]string{}
	for _, e := range after {
		bySeq[e.Seq], _ = jsonOf(e)
	}
	for _, e := range before {
		if want, _ := jsonOf(e); bySeq[e.Seq] != want {
			t.Errorf("Event %d after the upgrade is %s, want %s as before it", e.Seq, bySeq[e.Seq], want)
		}
	}
}

// watchedEvents is what a kndl watch --json printed: each sequence number,
// and how many it printed more than once.
type watchedEvents struct {
	seqs map[int64]bool
	dup  int
}

func watched(t *testing.T, p *kndlProcess) watchedEvents {
	t.Helper()
	w := watchedEvents{seqs: map[int64]bool{}}
	sc := bufio.NewScanner(strings.NewReader(p.stdout()))
	sc.Buffer(nil, protocol.MaxFrameBytes)
	for sc.Scan() {
		var e protocol.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line it is still writing
		}
		if w.seqs[e.Seq] {
			w.dup++
		}
		w.seqs[e.Seq] = true
	}
	return w
}

// stillQueued fails unless the Session's queue holds a prompt with text.
func (s *System) stillQueued(id, text string) {
	s.t.Helper()
	for _, p := range s.state(id).Queue {
		if strings.Contains(p.Text, text) {
			return
		}
	}
	s.t.Fatalf("the queue %+v has no prompt %q, want it kept", s.state(id).Queue, text)
}

// waitHub waits until a Hub answers at s.URL, before the API is asked
// anything.
func (s *System) waitHub() {
	s.t.Helper()
	testenv.Eventually(s.t, testenv.WaitMedium, "the Hub answers at "+s.URL, func() bool {
		resp, err := http.Get(s.URL + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
}

// waitRunner waits until the Runner named name is connected.
func (s *System) waitRunner(name string) {
	s.t.Helper()
	testenv.Eventually(s.t, testenv.WaitMedium, "Runner "+name+" connects", func() bool {
		var rs []api.RunnerStatus
		s.Do(http.MethodGet, "/api/runners", nil, &rs)
		for _, r := range rs {
			if r.Name == name && r.Connected {
				return true
			}
		}
		return false
	})
}

// kndlProcess is a kndl command run as its own process, as a service
// manager or a person runs it; what it printed is logged if the test fails.
type kndlProcess struct {
	cmd      *exec.Cmd
	out, err *lockedWriter
}

func startKndl(t *testing.T, what, bin string, env []string, args ...string) *kndlProcess {
	t.Helper()
	p := &kndlProcess{cmd: exec.Command(bin, args...), out: &lockedWriter{w: &strings.Builder{}}, err: &lockedWriter{w: &strings.Builder{}}}
	p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = env, p.out, p.err
	if err := tied.Start(p.cmd); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() {
		p.stop(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("%s (kndl %s) printed:\n%s\n%s", what, strings.Join(args, " "), p.stdout(), p.stderr())
		}
	})
	return p
}

// stop sends sig and waits for the process to end; once stopped, it does
// nothing.
func (p *kndlProcess) stop(sig syscall.Signal) {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(sig)
	p.cmd.Wait()
}

func (p *kndlProcess) stdout() string { return p.out.String() }
func (p *kndlProcess) stderr() string { return p.err.String() }

// String is what was written so far, to a lockedWriter over a
// strings.Builder.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.(*strings.Builder).String()
}

// runKndl runs a kndl command to its end and returns what it printed.
func runKndl(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kndl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// releaseBinary is kndl built at commit from this clone's git history, as
// scripts/build-kndl builds a release (static, -trimpath, naming its
// version, commit and date), kept in the test cache under the full commit
// so later runs take it at once. A clone without that commit (a shallow
// one) fails the test under CI=true, saying what it needs, and skips it
// elsewhere.
func releaseBinary(t *testing.T, commit string) string {
	t.Helper()
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).Output()
		return strings.TrimSpace(string(out)), err
	}
	root, err := git("rev-parse", "--show-toplevel")
	var full string
	if err == nil {
		full, err = git("-C", root, "rev-parse", "--verify", "--quiet", commit+"^{commit}")
	}
	if err != nil {
		need := fmt.Sprintf("commit %s (previousRelease, the release this build upgrades from) in this clone's git history, to build it: "+
			"fetch the history (git fetch --unshallow), or run from a full clone", commit)
		if os.Getenv("CI") == "true" {
			t.Fatalf("this test needs %s", need)
		}
		t.Skipf("skipping: needs %s", need)
	}
	path := filepath.Join(testkit.CacheDir(), "kndl-"+full)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		return path
	}
	src := t.TempDir()
	tarball := filepath.Join(t.TempDir(), "src.tar")
	run := func(dir string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("building kndl at %s: %s %s: %v\n%s", commit, name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(root, nil, "git", "archive", "--output="+tarball, full)
	run(src, nil, "tar", "-xf", tarball)
	date := run(root, []string{"TZ=UTC"}, "git", "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", full)
	version := run(root, nil, "git", "describe", "--tags", "--always", full)
	const pkg = "kndl.dev/kndl/internal/buildinfo"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	run(src, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-buildvcs=false", "-o", tmp, "-ldflags",
		fmt.Sprintf("-s -w -X %s.version=%s -X %s.commit=%s -X %s.date=%s -X %s.modified=false", pkg, version, pkg, full, pkg, date, pkg),
		"./cmd/kndl")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}
