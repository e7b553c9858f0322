package loadtest

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
	"kndl.dev/kndl/internal/tied"
)

// hubChild, set, makes this test binary a Hub over the store it names
// (startHub), so the Hub's CPU and memory are its process's alone.
const hubChild = "KNDL_LOADTEST_HUB_STORE"

func TestMain(m *testing.M) {
	if src := os.Getenv(hubChild); src != "" {
		if err := serveHub(src); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(testenv.PostgresMain(m))
}

// The Hub's child's address and secrets key, when set (the standby's
// test gives both Hubs the same); else a free loopback port and a new key.
const (
	hubChildListen = "KNDL_LOADTEST_HUB_LISTEN"
	hubChildKey    = "KNDL_LOADTEST_HUB_KEY"
)

// serveHub runs a Hub over the store at src on a loopback port, prints its
// URL and the dev user's fresh CLI token (a Claude token stored), and
// serves until its stdin closes. As kndl hub does, it first takes the
// store's lease, waiting as a standby (it prints "standby") while another
// Hub holds it.
func serveHub(src string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	phase := phases()
	lease, err := store.WaitLease(ctx, src, fmt.Sprintf("loadtest hub, pid %d", os.Getpid()), func(string) { fmt.Println("standby") })
	if err != nil {
		return err
	}
	defer lease.Release()
	phase("took the lease")
	if path := os.Getenv("KNDL_LOAD_HUB_CPUPROFILE"); path != "" {
		// From the lease on, a standby's takeover in it too; a Hub killed
		// before writes nothing past what the standby's Create truncates.
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
		// KNDL_LOAD_HUB_CPUPROFILE_SECONDS=N ends it N s after the lease:
		// a standby's takeover alone.
		if n, _ := strconv.Atoi(os.Getenv("KNDL_LOAD_HUB_CPUPROFILE_SECONDS")); n > 0 {
			time.AfterFunc(time.Duration(n)*time.Second, pprof.StopCPUProfile)
		}
	}
	st, err := store.Open(ctx, src)
	if err != nil {
		return err
	}
	defer st.Close()
	phase("opened the store")
	key, addr := cmp.Or(os.Getenv(hubChildKey), seal.NewKey()), cmp.Or(os.Getenv(hubChildListen), "127.0.0.1:0")
	// Its warnings and errors (a Runner's connection lost and why, a
	// request failed, its detail) go to the test's output.
	level := slog.LevelWarn
	if os.Getenv("KNDL_LOAD_HUB_DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	h, err := hub.New(hub.Config{Listen: addr, SecretsKey: key, Logger: log}, st)
	if err != nil {
		return err
	}
	defer h.Close()
	phase("made the Hub, its Sessions taken back")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	phase("listening")
	dev, err := st.Members.DevUser(ctx)
	if err != nil {
		return err
	}
	if err := h.StoreClaudeToken(ctx, dev.ID, testkit.FakeToken); err != nil {
		return err
	}
	tok, err := st.Signins.CreateCLIToken(ctx, dev.ID, "loadtest")
	if err != nil {
		return err
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	phase("serving")
	fmt.Printf("http://%s %s\n", ln.Addr(), tok)
	return h.Serve(ctx, ln)
}

// phases is serveHub's clock: each call writes to stderr (the test's
// output) the phase just done, the wall time, and the time since the one
// before and since the lease, which is how a standby's takeover splits.
func phases() func(done string) {
	start := time.Now()
	var lease, last time.Time
	return func(done string) {
		now := time.Now()
		if lease.IsZero() {
			lease, last = now, start
		}
		fmt.Fprintf(os.Stderr, "loadtest hub, pid %d: %s at %s (+%v; %v since the lease)\n", os.Getpid(), done,
			now.UTC().Format("15:04:05.000"), now.Sub(last).Round(time.Millisecond), now.Sub(lease).Round(time.Millisecond))
		last = now
	}
}

// startHub starts a Hub in a child process over src, and returns its URL,
// the Owner's token and its process id.
func startHub(t *testing.T, src string) (url, token string, pid int) {
	t.Helper()
	c := startHubChild(t, src)
	url, token = c.serving(t)
	return url, token, c.cmd.Process.Pid
}

// hubProcess is a Hub in a child process (serveHub).
type hubProcess struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

// startHubChild starts a Hub in a child process over src, with env added
// to its environment, stopped when the test ends.
func startHubChild(t *testing.T, src string, env ...string) *hubProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), hubChild+"="+src), env...)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := tied.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return &hubProcess{cmd: cmd, out: bufio.NewReader(out)}
}

// line is the child's next line of output, its fields.
func (c *hubProcess) line(t *testing.T) []string {
	t.Helper()
	line, err := c.out.ReadString('\n')
	if err != nil {
		t.Fatalf("the Hub's child said %q, then %v", line, err)
	}
	return strings.Fields(line)
}

// serving waits for the child to serve, and returns its URL and the
// Owner's token.
func (c *hubProcess) serving(t *testing.T) (url, token string) {
	t.Helper()
	f := c.line(t)
	if len(f) != 2 {
		t.Fatalf("the Hub's child said %q, want its URL and a token", f)
	}
	return f[0], f[1]
}

// withKnobs is o, its defaults overridden by the KNDL_LOAD_* knobs set,
// with the test's Repo, progress and log.
func withKnobs(t *testing.T, o Options) Options {
	o.Repo = "https://github.com/acme/app.git"
	o.Runners = envInt(t, "KNDL_LOAD_RUNNERS", o.Runners)
	o.Sessions = envInt(t, "KNDL_LOAD_SESSIONS", o.Sessions)
	o.Watchers = envInt(t, "KNDL_LOAD_WATCHERS", o.Watchers)
	o.PromptsPerMinute = envFloat(t, "KNDL_LOAD_PPM", o.PromptsPerMinute)
	o.Duration = time.Duration(envInt(t, "KNDL_LOAD_SECONDS", int(o.Duration/time.Second))) * time.Second
	o.AwakeFraction = envFloat(t, "KNDL_LOAD_AWAKE", o.AwakeFraction)
	o.Burst = envInt(t, "KNDL_LOAD_BURST", o.Burst)
	o.Progress = tWriter{t}
	o.Log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return o
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

func envFloat(t *testing.T, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("%s=%q: want a number", name, v)
	}
	return f
}

// TestALoadOfSimulatedRunnersLosesNothing runs kndl loadtest's load, at CI
// size (2 Runners, 50 Sessions, 2 watchers each, 10% awake, prompts for
// 35 s) against a Hub in a child process on SQLite, or on PostgreSQL with
// KNDL_LOAD_STORE=postgres. Every prompt must reach its simulated Runner
// once, in order, byte for byte, every watcher must see every Event once
// and in order, and no error may be found. The size's knobs
// (KNDL_LOAD_RUNNERS, _SESSIONS, _WATCHERS, _PPM, _SECONDS, _BURST) make
// the runs of docs/performance.md ("The Hub alone"); KNDL_LOAD_P99_MS
// asserts the latency target; KNDL_LOAD_HUB_CPUPROFILE=FILE profiles the
// Hub.
func TestALoadOfSimulatedRunnersLosesNothing(t *testing.T) {
	src := filepath.Join(t.TempDir(), "hub.db")
	var size func(context.Context) (int64, error)
	if os.Getenv("KNDL_LOAD_STORE") == "postgres" {
		src = testenv.Postgres(t)
		size = pgSize(t, src)
	} else {
		size = func(context.Context) (int64, error) { return SQLiteSize(src) }
	}
	url, token, pid := startHub(t, src)
	o := withKnobs(t, Options{HubURL: url, Token: token, Runners: 2, Sessions: 50, Watchers: 2,
		PromptsPerMinute: 6, Duration: 35 * time.Second, AwakeFraction: 0.1, HubPID: pid, StoreSize: size})
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	t.Logf("load average %s\n%s", loadAverage(), b.String())
	if len(rep.Errors) > 0 {
		t.Errorf("got %d errors, want none", len(rep.Errors))
	}
	if want := o.Sessions; rep.Create.N != want {
		t.Errorf("got %d Sessions started, want %d", rep.Create.N, want)
	}
	if rep.Prompts == 0 || rep.Latency.N != rep.Prompts*o.Watchers {
		t.Errorf("got %d latency samples for %d prompts, want one per prompt and watcher", rep.Latency.N, rep.Prompts)
	}
	if ms := envInt(t, "KNDL_LOAD_P99_MS", 0); ms > 0 && rep.Latency.P99 >= time.Duration(ms)*time.Millisecond {
		t.Errorf("got p99 prompt to first Event %v, want under %d ms", rep.Latency.P99, ms)
	}
}

func pgSize(t *testing.T, src string) func(context.Context) (int64, error) {
	cfg, err := pgx.ParseConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	return func(ctx context.Context) (int64, error) {
		var n int64
		err := db.QueryRowContext(ctx, "SELECT pg_database_size(current_database())").Scan(&n)
		return n, err
	}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
