// Package e2e tests the whole system with its real parts: a Hub and a
// Runner in this process, talking over their real WebSocket; real crun
// Sandboxes booted from the test image pulled from an in-process registry;
// the pinned Claude Code in real tmux, with its mod and relay; and the
// scripted Anthropic Messages API standing in for Anthropic.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/runner"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// sandboxRuntime is the runtime of the tests' Runner: runsc (the gvisor
// backend, testkit.Runsc) under KNDL_E2E_SANDBOX=gvisor, else crun. CI runs
// the suite on crun and a named set of tests again on gVisor.
func sandboxRuntime(t testing.TB) (runtime, path string) {
	t.Helper()
	switch v := os.Getenv("KNDL_E2E_SANDBOX"); v {
	case "", "crun":
		return "crun", ""
	case "gvisor":
		return "runsc", testkit.Runsc(t)
	default:
		t.Fatalf("KNDL_E2E_SANDBOX=%q: want gvisor or crun", v)
		return "", ""
	}
}

// sandboxEnv is the environment that gives a `kndl runner` or `kndl dev`
// process of the tests the same backend.
func sandboxEnv(t testing.TB) []string {
	if runtime, path := sandboxRuntime(t); runtime == "runsc" {
		return []string{"RUNNER_SANDBOX_BACKEND=gvisor", "RUNNER_RUNSC=" + path}
	}
	return []string{"RUNNER_SANDBOX_BACKEND=crun"}
}

// sandboxOptions are the backend's options for a Runner with home, as the
// Runner itself makes them (daemon's newBackend).
func sandboxOptions(t testing.TB, home string, relayPort int, bin string, maxDiskMiB int, log *slog.Logger) oci.Options {
	runtime, path := sandboxRuntime(t)
	return oci.Options{StateDir: filepath.Join(home, "sandboxes", oci.DirName(runtime)), Runtime: runtime, RuntimePath: path,
		RelayPort: uint16(relayPort), InitPath: bin, MaxDiskMiB: maxDiskMiB, Logger: log}
}

// onRuntime is opts with its Sandboxes on runtime ("crun" or "runsc"),
// whatever KNDL_E2E_SANDBOX says; "" leaves them as they are.
func onRuntime(t testing.TB, opts oci.Options, runtime string) oci.Options {
	switch runtime {
	case "":
		return opts
	case "runsc":
		opts.RuntimePath = testkit.Runsc(t)
	default:
		opts.RuntimePath = ""
	}
	opts.Runtime, opts.StateDir = runtime, filepath.Join(filepath.Dir(opts.StateDir), oci.DirName(runtime))
	return opts
}

func TestMain(m *testing.M) {
	if code, ok := runner.RunHelper(os.Args, nil); ok {
		os.Exit(code)
	}
	oci.ReapTests(context.Background())
	code := m.Run()
	stopChromium()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// claudeToken is the Creator's setup token in these tests; the scripted
// model accepts only it.
const claudeToken = "sk-ant-oat01-e2e-test-token-0123456789abcdef"

// webhookSecret is the fake GitHub App's webhook secret, the Hub's
// GITHUB_WEBHOOK_SECRET.
const webhookSecret = "e2e-webhook-secret"

// System is a Hub and a Runner with one signed-in dev user.
type System struct {
	t       testing.TB
	URL     string
	Store   *store.Store
	Hub     *hub.Hub
	Runner  *runner.Runner
	Backend sandbox.Backend
	Model   *testkit.Anthropic
	Home    string // the Runner's home
	// GitHub is the fake GitHub the Hub signs people in with, when the
	// System was started WithGitHub.
	GitHub *testkit.GitHub
	// Line is the line between the Runner and the Hub, when the System was
	// started WithRunnerLine.
	Line *testkit.Proxy
	// HubDisk is the directory of the tmpfs the Hub's store is on, when the
	// System was started WithHubDisk.
	HubDisk string
	cli     string // the dev user's CLI token
	log     *bytes.Buffer
	logw    *lockedWriter // log's writer, whose lock logText takes
	db      string        // the store's file

	ctx       context.Context
	hubCfg    hub.Config
	hubCancel context.CancelFunc
	hubDone   chan struct{}

	runnerCfg    runner.Config
	runnerID     string
	runnerCancel context.CancelFunc
	runnerDone   chan struct{}
	runnerEnd    error // what the Runner's Run returned, once runnerDone is closed
	log2         *slog.Logger
	runtime      string // WithRuntime's, for RestartRunner
}

func (s *System) startRunner(b sandbox.Backend) {
	s.t.Helper()
	r, err := runner.New(s.runnerCfg, b)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() {
		// Run ends at once, not connecting, if it cannot listen on its relay
		// or egress ports: the log and waitConnected say so.
		err := r.Run(ctx)
		if err != nil {
			s.log2.Error("the Runner's Run ended", "err", err)
		}
		s.runnerEnd = err
		close(done)
	}()
	s.Runner, s.Backend, s.runnerCancel, s.runnerDone = r, b, cancel, done
}

// waitConnected waits for the Runner to be connected and welcomed. Past
// WaitMedium it fails saying why not, from what the test has at hand:
// whether the Runner's Run ended and with what, whether the Hub counts it
// connected, the log's last lines, and where the goroutines of the
// Runner and its backend are (of every System of the process).
func (s *System) waitConnected(what string) {
	s.t.Helper()
	testenv.EventuallyShowing(s.t, testenv.WaitMedium, s.Runner.Connected, func() string { return s.whyNotConnected(what) })
}

// whyNotConnected is waitConnected's failure message.
func (s *System) whyNotConnected(what string) string {
	run := "still running"
	select {
	case <-s.runnerDone:
		run = fmt.Sprintf("ended, returning %v", s.runnerEnd)
	default:
	}
	lines := s.logTail()
	stacks := testenv.Leftover("kndl.dev/kndl/internal/runner", "kndl.dev/kndl/internal/sandbox")
	return fmt.Sprintf("%s\nthe Runner's Run: %s; the Hub counts it connected: %v\nthe log's last %d lines:\n%s\n"+
		"the %d goroutines of the Runner and its backend, every System's:\n\n%s",
		what, run, s.Hub.Connected(s.runnerID), len(lines), strings.Join(lines, "\n"), len(stacks), strings.Join(stacks, "\n\n"))
}

// logTail is the log's last runnerLogTail lines, which a failure or a
// stall about the Runner shows.
func (s *System) logTail() []string {
	lines := strings.Split(strings.TrimSpace(s.logText()), "\n")
	return lines[max(0, len(lines)-runnerLogTail):]
}

// runnerLogTail is how many of the log's last lines logTail keeps.
const runnerLogTail = 40

// RestartRunner stops the Runner process's part (its connection, relay and
// control clients) and starts a new Runner with a new backend over the same
// home, as a Runner process restarting would. Sandboxes keep running.
func (s *System) RestartRunner() {
	s.t.Helper()
	s.runnerCancel()
	<-s.runnerDone
	b, err := oci.New(s.ctx, onRuntime(s.t, sandboxOptions(s.t, s.runnerCfg.Home, s.runnerCfg.RelayPort, s.runnerCfg.Binary, s.runnerCfg.MaxDiskMiB, s.log2), s.runtime))
	if err != nil {
		s.t.Fatal(err)
	}
	s.startRunner(b)
}

// RestartHub stops the Hub, closing every connection, and starts a new one
// on the same address and store, as a Hub process restarting would.
func (s *System) RestartHub() {
	s.t.Helper()
	s.hubCancel()
	<-s.hubDone
	s.Hub.Close()
	ln, err := net.Listen("tcp", s.hubCfg.Listen)
	if err != nil {
		s.t.Fatal(err)
	}
	h, err := hub.New(s.hubCfg, s.Store)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() { h.Serve(ctx, ln); close(done) }()
	s.Hub, s.hubCancel, s.hubDone = h, cancel, done
}

// built holds the binaries the tests build, once per run, by package.
var built = struct {
	sync.Mutex
	dir  string
	bins map[string]*builtBin
}{bins: map[string]*builtBin{}}

type builtBin struct {
	once sync.Once
	path string
	err  error
}

// binary builds a package's static binary once per test run.
func binary(t testing.TB, pkg string) string {
	t.Helper()
	built.Lock()
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "kndl-e2e-bin-")
		if err != nil {
			built.Unlock()
			t.Fatal(err)
		}
		built.dir = dir
	}
	b := built.bins[pkg]
	if b == nil {
		b = &builtBin{}
		built.bins[pkg] = b
	}
	dir := built.dir
	built.Unlock()
	b.once.Do(func() {
		b.path = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// kndlBinary is the kndl binary: the Runner mounts it into Sandboxes, where
// the mod's hooks and the transcript follower run it.
func kndlBinary(t testing.TB) string { return binary(t, "kndl.dev/kndl/cmd/kndl") }

// cached links a directory of the Runner's home to one kept between test
// runs, so images, Builds and Claude Code are fetched once per machine.
func cached(t testing.TB, home, name string) {
	dst := filepath.Join(testkit.CacheDir(), "runner", name)
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dst, filepath.Join(home, name)); err != nil {
		t.Fatal(err)
	}
}

// freePort is a port claimed for the test (testkit.Ports), with the two
// after it: a Runner's relay port, its egress ports next.
func freePort(t testing.TB) int { return testkit.Ports(t, 3) }

// Option changes how Start makes a System.
type Option func(*options)

type options struct {
	github      bool
	reachable   bool // the fake GitHub where Sandboxes reach it
	idle        time.Duration
	archiveKeep time.Duration
	tokenRetry  time.Duration
	line        bool  // the Runner reaches the Hub through System.Line
	hubDisk     int64 // bytes of the tmpfs the Hub's store is on; 0 for the test's own disk
	maxSessions int
	maxDiskMiB  int
	memberSpend float64 // HUB_MEMBER_MAX_SPEND
	claude      claude.Pin
	models      claude.Table
	// claudeTokenInSandbox: the Hub's HUB_CLAUDE_TOKEN=sandbox
	claudeTokenInSandbox bool
	// resolver is the Runner's, for names the test serves
	resolver   outbound.Resolver
	cold       bool   // no image or Build cached for the Runner
	crunBuilds bool   // Builds on a crun backend of their own
	runtime    string // the Sandboxes' runtime, if not KNDL_E2E_SANDBOX's
	// githubCom, the Runner's resolver too, names the fake GitHub
	// github.com (WithGitHubCom)
	githubCom *testkit.Resolver
	warmPool  int           // RUNNER_WARM_POOL
	ping      time.Duration // the Hub's and the Runner's (WithPingEvery)
}

// WithWarmPool sets the Runner's RUNNER_WARM_POOL (0, off, otherwise).
func WithWarmPool(n int) Option { return func(o *options) { o.warmPool = n } }

// WithClaudeTokenInSandbox runs the Hub with HUB_CLAUDE_TOKEN=sandbox:
// Claude Code holds the Creator's token itself, as the spec has it.
func WithClaudeTokenInSandbox() Option { return func(o *options) { o.claudeTokenInSandbox = true } }

// WithColdRunner gives the Runner an empty image store and no Build, as on
// a host's first Session; Claude Code still comes from the test cache.
func WithColdRunner() Option { return func(o *options) { o.cold = true } }

// WithBuildsOnCrun makes the Runner's Builds on crun while its Sessions run
// on KNDL_E2E_SANDBOX's backend, as RUNNER_BUILD_BACKEND=crun does.
func WithBuildsOnCrun() Option { return func(o *options) { o.crunBuilds = true } }

// WithRuntime runs the Runner's Sandboxes on runtime ("crun" or "runsc"),
// whatever KNDL_E2E_SANDBOX says: both sides of a benchmark in one run.
func WithRuntime(runtime string) Option { return func(o *options) { o.runtime = runtime } }

// WithMemberMaxSpend sets the Hub's HUB_MEMBER_MAX_SPEND, in US dollars.
func WithMemberMaxSpend(usd float64) Option { return func(o *options) { o.memberSpend = usd } }

// WithSessionIdle sets the Hub's HUB_SESSION_IDLE.
func WithSessionIdle(d time.Duration) Option { return func(o *options) { o.idle = d } }

// WithGitHub signs people in with a fake GitHub, whose App says who may
// access which Repo: Members besides the dev user can then watch Sessions
// of Repos the fake GitHub serves (System.GitHubRepo).
func WithGitHub() Option { return func(o *options) { o.github = true } }

// WithSandboxGitHub is WithGitHub with the fake GitHub where Sandboxes
// reach it as they would github.com (testkit.ListenForSandboxes), so git in
// a Sandbox pushes to it; retry is the Runner's RUNNER_GITHUB_TOKEN_RETRY.
func WithSandboxGitHub(retry time.Duration) Option {
	return func(o *options) { o.github, o.reachable, o.tokenRetry = true, true, retry }
}

// WithRunnerLine puts a testkit.Proxy (System.Line) between the Runner and
// the Hub, for a test to cut.
func WithRunnerLine() Option { return func(o *options) { o.line = true } }

// WithHubDisk puts the Hub's store on a tmpfs of size bytes of its own
// (System.HubDisk), for a test to fill.
func WithHubDisk(size int64) Option { return func(o *options) { o.hubDisk = size } }

// WithSandboxDisk sets the Runner's RUNNER_SANDBOX_MAX_DISK_MIB.
func WithSandboxDisk(mib int) Option { return func(o *options) { o.maxDiskMiB = mib } }

// WithMaxSessions sets the Runner's RUNNER_MAX_SESSIONS.
func WithMaxSessions(n int) Option { return func(o *options) { o.maxSessions = n } }

// WithClaude has the Runner run another Claude Code than the pinned one:
// a candidate pin's smoke test.
func WithClaude(pin claude.Pin) Option { return func(o *options) { o.claude = pin } }

// WithModels has the Runner offer table instead of the pinned one's.
func WithModels(table claude.Table) Option { return func(o *options) { o.models = table } }

// WithRunnerResolver has the Runner resolve names with r: the names a
// test serves where Sandboxes reach them, with no real DNS asked.
func WithRunnerResolver(r outbound.Resolver) Option { return func(o *options) { o.resolver = r } }

// WithGitHubCom is WithSandboxGitHub with the fake GitHub on port 80 of an
// address Sandboxes reach, named github.com by names, which becomes the
// Runner's resolver: the Hub's GITHUB_URL is http://github.com, so the
// host clone, the Sandbox token's credential helper and git in the
// Sandbox use that name, as with the real one, and an egress allowlist's
// github preset judges them.
func WithGitHubCom(names *testkit.Resolver) Option {
	return func(o *options) {
		o.github, o.reachable, o.githubCom, o.tokenRetry, o.resolver = true, true, names, time.Minute, names
	}
}

// WithPingEvery has the Hub and the Runner ping each other every d, and
// wait as long for the pong, instead of protocol.PingEvery: a test of a
// silent line sees it in seconds. Only there: on a loaded host a short
// period drops a line that is only slow.
func WithPingEvery(d time.Duration) Option { return func(o *options) { o.ping = d } }

// WithArchiveKeep sets the Runner's RUNNER_ARCHIVE_KEEP: how long it keeps
// an archived Session before its purge.
func WithArchiveKeep(d time.Duration) Option { return func(o *options) { o.archiveKeep = d } }

// Start starts a System and stops it, with every Sandbox it made, when the
// test ends.
func Start(t testing.TB, opts ...Option) *System {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun", "tmux", "git")
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	logBuf := &bytes.Buffer{}
	logw := &lockedWriter{w: logBuf}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))

	db := filepath.Join(dir, "hub.db")
	var hubDisk string
	if o.hubDisk > 0 {
		hubDisk = filepath.Join(dir, "hub-disk")
		os.Mkdir(hubDisk, 0o700)
		if err := unix.Mount("tmpfs", hubDisk, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", o.hubDisk)); err != nil {
			t.Fatalf("a tmpfs for the Hub's store: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(hubDisk, unix.MNT_DETACH) })
		db = filepath.Join(hubDisk, "hub.db")
	}
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	// The Hub and Runner reach the test's servers on loopback, as kndl
	// dev's do.
	loopback := outbound.Dialer{Allow: outbound.AllowLoopback}
	hcfg := hub.Config{Listen: ln.Addr().String(), PublicURL: url, SecretsKey: seal.NewKey(), Logger: log, DevLogin: true, SessionIdle: o.idle,
		Outbound: loopback, ClaudeTokenInSandbox: o.claudeTokenInSandbox, MemberMaxSpend: o.memberSpend, PingEvery: o.ping}
	var gh *testkit.GitHub
	if o.github {
		switch {
		case o.githubCom != nil:
			ln := testkit.ListenForSandboxesOn(t, 80)[0]
			o.githubCom.Set("github.com", ln.Addr().(*net.TCPAddr).IP.String())
			gh = testkit.NewGitHubOn(t, ln)
		case o.reachable:
			gh = testkit.NewGitHubOn(t, testkit.ListenForSandboxes(t))
		default:
			gh = testkit.NewGitHub(t)
		}
		hcfg.GitHubURL, hcfg.GitHubAPIURL, hcfg.GitHubClientID, hcfg.GitHubClientSecret = gh.URL, gh.URL, gh.ClientID, gh.ClientSecret
		hcfg.GitHubAppID, hcfg.GitHubAppKey = gh.AppID, string(gh.KeyPEM)
		if o.githubCom != nil {
			hcfg.GitHubURL = "http://github.com"
		}
		hcfg.GitHubWebhookSecret = webhookSecret
		gh.SetWebhook(url+"/github/webhook", webhookSecret)
		// Short, so a test sees a replaced Sandbox token revoked well
		// within the fake's short token lives.
		hcfg.SandboxTokenGrace = time.Second
		// Short, so a later push asks GitHub again within a test's wait.
		hcfg.PullsCheckGap = 2 * time.Second
	}
	h, err := hub.New(hcfg, st)
	if err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	hdone := make(chan struct{})
	go func() { h.Serve(hctx, ln); close(hdone) }()

	dev, _ := st.Members.DevUser(ctx)
	cli, _ := st.Signins.CreateCLIToken(ctx, dev.ID, "e2e")
	if err := h.StoreClaudeToken(ctx, dev.ID, claudeToken); err != nil {
		t.Fatal(err)
	}
	rn, rtoken, err := st.Runners.CreateRunner(ctx, "e2e", dev.ID)
	if err != nil {
		t.Fatal(err)
	}

	model := testkit.NewAnthropic(t, claudeToken)
	home := filepath.Join(dir, "runner")
	os.MkdirAll(home, 0o700)
	cache := []string{"images", "builds", "claude-code"}
	if o.cold {
		cache = []string{"claude-code"}
	}
	for _, name := range cache {
		cached(t, home, name)
	}
	bin := kndlBinary(t)
	hubURL := url
	var line *testkit.Proxy
	if o.line {
		line = testkit.NewProxy(t, ln.Addr().String())
		hubURL = "http://" + line.Addr()
	}
	rcfg := runner.Config{HubURL: hubURL, Token: rtoken, Name: "e2e", Home: home, RelayPort: freePort(t), KeepBuilds: 3,
		Image: testkit.ImageRegistry(t), ModelEndpoint: model.URL, Binary: bin, ArchiveKeep: o.archiveKeep, GitHubTokenRetry: o.tokenRetry, MaxSessions: o.maxSessions, MaxDiskMiB: o.maxDiskMiB, Logger: log,
		Outbound: loopback, Claude: o.claude, Models: o.models, WarmPool: o.warmPool, PingEvery: o.ping}
	rcfg.Outbound.Resolver = o.resolver
	bopts := sandboxOptions(t, home, rcfg.RelayPort, bin, rcfg.MaxDiskMiB, log)
	b, err := oci.New(ctx, onRuntime(t, bopts, o.runtime))
	if err != nil {
		t.Fatal(err)
	}
	if o.crunBuilds {
		if rcfg.Builds, err = oci.New(ctx, onRuntime(t, bopts, "crun")); err != nil {
			t.Fatal(err)
		}
	}
	s := &System{t: t, URL: url, Store: st, Hub: h, Backend: b, Model: model, Home: home, GitHub: gh, Line: line, HubDisk: hubDisk, cli: cli, log: logBuf, logw: logw, db: db,
		hubCfg: hcfg, hubCancel: hcancel, hubDone: hdone, ctx: ctx, runnerCfg: rcfg, runnerID: rn.ID, log2: log, runtime: o.runtime}
	s.startRunner(b)
	t.Cleanup(func() {
		if t.Failed() {
			// Grouped by stack, with the outbox's labels: what a stall waits on.
			var g strings.Builder
			pprof.Lookup("goroutine").WriteTo(&g, 1)
			t.Logf("goroutines of the test process (every System's in it):\n%s", g.String())
			// Last, so that a report showing only the output's tail shows
			// what the Hub and Runner did just before the failure.
			t.Logf("system log:\n%s", logBuf.String())
		}
		// The Runner ends before its Sandboxes go and the test's
		// directories are removed: one still running restarted its
		// helpers in them and wrote in its home as it went (CI: "TempDir
		// RemoveAll cleanup: … directory not empty"). Run waits up to its
		// closeWait for its work.
		cancelled := time.Now()
		s.runnerCancel()
		select {
		case <-s.runnerDone:
			// A slow end passes but is a finding: scripts/testtimes
			// prints a passed test's "stall:" entries.
			if took := time.Since(cancelled); took > runnerSlowEnd {
				lines := s.logTail()
				t.Logf("stall: the Runner's Run returned %v after its context ended; the log's last %d lines:\n%s",
					took.Round(time.Millisecond), len(lines), strings.Join(lines, "\n"))
			}
		case <-time.After(runnerEndWait):
			lines := s.logTail()
			t.Errorf("the Runner's Run had not returned %s after its context ended; the log's last %d lines:\n%s",
				runnerEndWait, len(lines), strings.Join(lines, "\n"))
		}
		cctx := context.Background()
		if all, err := s.Backend.List(cctx); err == nil {
			for _, sb := range all {
				s.Backend.Remove(cctx, sb.ID)
			}
		}
		cancel()
		st.Close()
	})
	s.waitConnected("the Runner connects")
	return s
}

// runnerEndWait bounds how long a System's end waits for its Runner's Run;
// past runnerSlowEnd its end is logged as a stall.
const (
	runnerEndWait = 30 * time.Second
	runnerSlowEnd = 5 * time.Second
)

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// logText is the Hub's and the Runner's log so far.
func (s *System) logText() string {
	s.logw.mu.Lock()
	defer s.logw.mu.Unlock()
	return s.log.String()
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Refusal is the API's answer to a request it refused. Given to Do as out,
// it takes that answer, where any other out fails the test.
type Refusal struct{ Message string }

// Do calls the Hub's API as the dev user and decodes the answer into out;
// it returns the status.
func (s *System) Do(method, path string, in, out any) int {
	s.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.URL+path, body)
	req.Header.Set("Authorization", "Bearer "+s.cli)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if r, ok := out.(*Refusal); ok {
		if resp.StatusCode < 300 {
			s.t.Fatalf("%s %s: %d %s, want a refusal", method, path, resp.StatusCode, raw)
		}
		if err := json.Unmarshal(raw, r); err != nil {
			s.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
		return resp.StatusCode
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	if resp.StatusCode >= 300 && out != nil {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// Repo makes a git repository on the Runner's host with one commit.
func (s *System) Repo() string {
	s.t.Helper()
	dir := filepath.Join(s.t.TempDir(), "repo")
	for _, args := range [][]string{{"init", "-q", "-b", "main", dir}, {"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			s.t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("# test repo\n"), 0o644)
	exec.Command("git", "-C", dir, "add", ".").Run()
	exec.Command("git", "-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "readme").Run()
	return dir
}

// RepoWith is a Repo whose last commit adds files, by path.
func (s *System) RepoWith(files map[string]string) string {
	s.t.Helper()
	dir := s.Repo()
	for p, text := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(text), 0o644)
	}
	for _, args := range [][]string{{"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "files"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			s.t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return dir
}

// NewSession starts a Session on repo with a first prompt.
func (s *System) NewSession(repo, prompt string) api.SessionView {
	s.t.Helper()
	var v api.SessionView
	s.Do(http.MethodPost, "/api/sessions", api.NewSession{Repo: repo, Prompt: prompt}, &v)
	return v
}

// Events returns a Session's Events so far, decoded.
func (s *System) Events(id string) []protocol.Event {
	s.t.Helper()
	var out []protocol.Event
	s.Do(http.MethodGet, "/api/sessions/"+id+"/events", nil, &out)
	return out
}

// WaitEvent waits until a Session has an Event that match accepts, and
// returns it. A start that fails ends the wait at once.
func (s *System) WaitEvent(id string, within time.Duration, what string, match func(protocol.Event) bool) protocol.Event {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		evs := s.Events(id)
		for _, e := range evs {
			if match(e) {
				return e
			}
		}
		var v api.SessionView
		s.Do(http.MethodGet, "/api/sessions/"+id, nil, &v)
		if v.State == api.Failed {
			s.t.Fatalf("waiting for %s: %s\nevents: %s", what, v.StateDetail, dump(evs))
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %s within %v; events:\n%s", what, within, dump(evs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dump(evs []protocol.Event) string {
	var b strings.Builder
	for _, e := range evs {
		j, _ := json.Marshal(e)
		fmt.Fprintf(&b, "  %s\n", j)
	}
	return b.String()
}

func kind(k string) func(protocol.Event) bool {
	return func(e protocol.Event) bool { return e.Kind == k }
}

// Exec runs a command in a Session's Sandbox and returns its output and
// exit code.
func (s *System) Exec(sessionID string, args ...string) (string, int) {
	s.t.Helper()
	out, code, err := s.tryExec(sessionID, args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out, code
}

// tryExec is Exec returning its error: a Sandbox between a stop and a
// start (a restart) runs nothing.
func (s *System) tryExec(sessionID string, args ...string) (string, int, error) {
	var out bytes.Buffer
	p, err := s.Backend.Exec(context.Background(), "s-"+sessionID, sandbox.Cmd{Args: args, Stdout: &out, Stderr: &out,
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
	if err != nil {
		return "", 0, fmt.Errorf("exec %v: %w", args, err)
	}
	// Bounded, so a hung exec fails the test saying so.
	done := time.AfterFunc(testenv.WaitMedium, func() { p.Kill() })
	code, err := p.Wait()
	if !done.Stop() {
		return "", 0, fmt.Errorf("exec %v: still running after %v, killed: %q", args, testenv.WaitMedium, out.String())
	}
	if err != nil {
		return "", 0, fmt.Errorf("exec %v: %w", args, err)
	}
	return out.String(), code, nil
}

// RelayURL is the relay as Sandboxes reach it.
func (s *System) RelayURL() string {
	_, port, _ := net.SplitHostPort(s.Backend.Host().Relay)
	return "http://" + sandbox.RelayHost + ":" + port
}

// Ready starts a Session and waits until its first Turn has ended.
func (s *System) Ready(prompt, answer string) api.SessionView {
	s.t.Helper()
	s.Model.On(testkit.PromptContains(prompt), testkit.Text(answer))
	v := s.NewSession(s.Repo(), prompt)
	s.WaitEvent(v.ID, testenv.WaitBuild, "the first turn's end", kind(protocol.EventTurnEnd))
	return v
}

func jsonOf(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
