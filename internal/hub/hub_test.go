package hub

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

type fixture struct {
	dbPath string
	hub    *Hub
	store  *store.Store
	srv    *httptest.Server
	cli    string // a dev user's CLI token
	runner store.Runner
	rtoken string
}

// newFixture starts a Hub over a real store, with tune changing its
// Config, and serves it.
func newFixture(t *testing.T, tune ...func(*Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "hub.db")
	st, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := Config{Listen: "127.0.0.1:0", SecretsKey: seal.NewKey(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tn := range tune {
		tn(&cfg)
	}
	h, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	u, _ := st.Members.DevUser(ctx)
	cli, _ := st.Signins.CreateCLIToken(ctx, u.ID, "test")
	rn, rtoken, err := st.Runners.CreateRunner(ctx, "r1", u.ID)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dbPath: dbPath, hub: h, store: st, srv: srv, cli: cli, runner: rn, rtoken: rtoken}
}

// withGitHub signs people in with the fake GitHub gh, whose App says who
// may access which Repo, its answers trusted for ttl.
func withGitHub(gh *testkit.GitHub, ttl time.Duration) func(*Config) {
	return func(c *Config) {
		c.GitHubURL, c.GitHubAPIURL, c.GitHubClientID, c.GitHubClientSecret = gh.URL, gh.URL, gh.ClientID, gh.ClientSecret
		c.GitHubAppID, c.GitHubAppKey, c.RepoAccessTTL = gh.AppID, string(gh.KeyPEM), ttl
	}
}

// The route enumeration, every route with every kind of credential, is
// tests/security's TestEveryRouteNeedsItsCredential.

func TestRouteWithoutCredentialDoesNotRegister(t *testing.T) {
	f := newFixture(t)
	rt := route{pattern: "GET /oops", handle: opsAPI{healthz: f.hub.healthz}.health}
	h := &Hub{core: core{log: f.hub.log, store: f.store.Domains}}
	if _, err := h.muxOf([]route{rt}); err == nil {
		t.Fatal("a route with no credential registered")
	}
}

func dialRunner(t *testing.T, f *fixture, token string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitShort)
	defer cancel()
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/runner/connect",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
}

// connectRunner opens a Runner's connection with token, serving handle,
// without saying hello.
func connectRunner(t *testing.T, f *fixture, token string, handle ...func(*protocol.Conn)) *protocol.Conn {
	t.Helper()
	ws, _, err := dialRunner(t, f, token)
	if err != nil {
		t.Fatal(err)
	}
	c := protocol.NewConn(ws, f.hub.log)
	for _, h := range handle {
		h(c)
	}
	go c.Serve(context.Background())
	t.Cleanup(func() { c.Close(websocket.StatusNormalClosure, "test over") })
	return c
}

// hello connects as the fixture's Runner, with handle registering what it
// answers, and says hello.
func hello(t *testing.T, f *fixture, handle ...func(*protocol.Conn)) (*protocol.Conn, protocol.Welcome) {
	t.Helper()
	return helloWith(t, f, f.rtoken, nil, handle...)
}

// helloWith connects with a Runner token, naming the Sessions it runs.
func helloWith(t *testing.T, f *fixture, token string, running []string, handle ...func(*protocol.Conn)) (*protocol.Conn, protocol.Welcome) {
	t.Helper()
	c := connectRunner(t, f, token, handle...)
	var w protocol.Welcome
	err := c.Request(context.Background(), protocol.TypeHello, protocol.Hello{MinVersion: 1, MaxVersion: protocol.Version, Models: claude.Models(), Name: "r1", Sessions: running}, &w)
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	return c, w
}

func TestRunnerConnectsAndRevokeClosesAtOnce(t *testing.T) {
	f := newFixture(t)
	c, w := hello(t, f)
	if w.RunnerID != f.runner.ID || w.Version != protocol.Version {
		t.Fatalf("welcome = %+v", w)
	}
	testenv.Eventually(t, testenv.WaitShort, "hub sees the runner", func() bool { return f.hub.Connected(f.runner.ID) })

	req, _ := http.NewRequest(http.MethodDelete, f.srv.URL+"/api/runners/"+f.runner.ID, nil)
	req.Header.Set("Authorization", "Bearer "+f.cli)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %v %v", resp.Status, err)
	}
	// Once the revoke has answered, the Hub lists the Runner as gone.
	if f.hub.Connected(f.runner.ID) {
		t.Fatal("hub still lists a revoked runner as connected after the revoke answered")
	}
	select {
	case <-c.Done():
	case <-time.After(testenv.WaitShort):
		t.Fatal("revoking the runner token did not close its connection")
	}
	if _, resp, err := dialRunner(t, f, f.rtoken); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked token dialled again: err %v", err)
	}
}

func TestHelloWithNoCommonVersionIsRefused(t *testing.T) {
	f := newFixture(t)
	c := connectRunner(t, f, f.rtoken)
	err := c.Request(context.Background(), protocol.TypeHello, protocol.Hello{MinVersion: 99, MaxVersion: 100}, nil)
	if err == nil || !strings.Contains(err.Error(), "no common protocol version") {
		t.Fatalf("err = %v, want no common protocol version", err)
	}
	if f.hub.Connected(f.runner.ID) {
		t.Fatal("a runner without a common version counts as connected")
	}
}

func TestCreateRunnerAPIShowsTokenOnce(t *testing.T) {
	f := newFixture(t)
	post := func(body string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/api/runners", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.cli)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}
	resp, m := post(`{"name":"box2"}`)
	tok, _ := m["token"].(string)
	if resp.StatusCode != http.StatusCreated || auth.KindOf(tok) != auth.Runner {
		t.Fatalf("create: %d %v", resp.StatusCode, m)
	}
	if _, err := f.store.Runners.RunnerByToken(context.Background(), tok); err != nil {
		t.Fatalf("the token shown does not authenticate: %v", err)
	}
	tests := []struct {
		body string
		want int
	}{
		{`{"name":"box2"}`, http.StatusConflict},
		{`{"name":"bad name"}`, http.StatusBadRequest},
		{`{"name":"x","extra":1}`, http.StatusBadRequest},
		{`not json`, http.StatusBadRequest},
		{`{"name":"` + strings.Repeat("a", maxBody) + `"}`, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		resp, m := post(tt.body)
		if resp.StatusCode != tt.want || m["message"] == "" {
			t.Errorf("POST %.40s: %d %v, want %d with a message", tt.body, resp.StatusCode, m["message"], tt.want)
		}
	}
	rs, _ := f.store.Runners.List(context.Background())
	if len(rs) != 2 {
		t.Fatalf("bad requests changed the store: %d runners, want 2", len(rs))
	}
}

// bareStore opens a store of its own, closed once the test ends, with a
// Config for Hubs over it that the test starts and closes itself.
func bareStore(t *testing.T) (*store.Store, Config) {
	t.Helper()
	st := storetest.Open(t)
	return st, Config{Listen: "127.0.0.1:0", SecretsKey: seal.NewKey(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestAHubClosedLeavesNoGoroutine: a Hub started and closed 100 times
// leaves nothing running.
func TestAHubClosedLeavesNoGoroutine(t *testing.T) {
	st, cfg := bareStore(t)
	start := func() {
		h, err := New(cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
	start() // first use of the store and the logger starts what lasts
	before := runtime.NumGoroutine()
	for range 100 {
		start()
	}
	testenv.Eventually(t, testenv.WaitShort, "no goroutine left", func() bool { return runtime.NumGoroutine() <= before })
}

// background are the packages whose goroutines a Hub starts: Close ends
// every one of them.
var background = []string{"kndl.dev/kndl/internal/hub", "kndl.dev/kndl/internal/environment", "kndl.dev/kndl/internal/lifetime"}

// TestAHubClosedMidTestBuildLeavesNoGoroutineOfItsOwn: Close returns at
// once while a Runner holds an Environment's Test build unanswered (the
// Hub would wait 30 minutes for it), records the build failed as stopped,
// and leaves no goroutine of the Hub's running, though the Runner is
// still connected.
func TestAHubClosedMidTestBuildLeavesNoGoroutineOfItsOwn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	asked := make(chan struct{})
	hello(t, f, func(c *protocol.Conn) {
		c.Handle(protocol.TypeEnvTest, false, func(ctx context.Context, _ json.RawMessage) (any, error) {
			close(asked)
			<-ctx.Done() // never answers while connected
			return nil, ctx.Err()
		})
	})
	testenv.Eventually(t, testenv.WaitShort, "the Hub sees the Runner", func() bool { return f.hub.Connected(f.runner.ID) })
	repo, _ := f.store.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	if _, err := f.hub.envs.Edit(ctx, repo.ID, environment.Config{Bootstrap: "make\n"}, f.runner.CreatedBy); err != nil {
		t.Fatal(err)
	}
	tb, err := f.hub.envs.Test(ctx, repo, f.runner.CreatedBy)
	if err != nil {
		t.Fatal(err)
	}
	<-asked

	closed := make(chan struct{})
	go func() { f.hub.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(testenv.WaitShort):
		t.Fatalf("Close still waits after %v:\n\n%s", testenv.WaitShort, strings.Join(testenv.Leftover(background...), "\n\n"))
	}
	if left := testenv.Leftover(background...); len(left) > 0 {
		t.Fatalf("%d goroutines of the Hub run after Close:\n\n%s", len(left), strings.Join(left, "\n\n"))
	}
	got, _ := f.store.Environments.TestBuild(ctx, repo.ID, tb.ID)
	if got.State != store.TestFailed || !strings.Contains(got.Detail, "Hub stopped") {
		t.Fatalf("the Test build after Close: %s %q, want failed, saying the Hub stopped", got.State, got.Detail)
	}
}

// TestAHubThatFailsToStartLeavesNoGoroutine: New failing at its last step
// (a route table the mux refuses) or at sign-in's (a GitHub App key that
// doesn't parse) closes what it started before, every time.
func TestAHubThatFailsToStartLeavesNoGoroutine(t *testing.T) {
	st, cfg := bareStore(t)
	badKey := cfg
	badKey.GitHubClientID, badKey.GitHubClientSecret, badKey.GitHubAppID, badKey.GitHubAppKey = "id", "secret", 1, "not a key"
	tests := []struct {
		name   string
		cfg    Config
		routes func(*Hub) []route
	}{
		{"a route without a credential", cfg, func(h *Hub) []route {
			return append(h.routes(), route{pattern: "GET /oops", handle: opsAPI{healthz: h.healthz}.health})
		}},
		{"a GitHub App key that doesn't parse", badKey, (*Hub).routes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 10 {
				if h, err := newHub(tt.cfg, st, tt.routes); err == nil {
					h.Close()
					t.Fatal("New did not fail")
				}
			}
			testenv.NoLeftover(t, testenv.WaitShort, background...)
		})
	}
}

// TestServeClosesIdleAndSlowConnectionsButNotWebSockets: Serve closes a
// keep-alive connection idle after its answer once the idle timeout
// passes, and one whose request body never comes once the read timeout
// does, while a WebSocket open for longer than both still answers.
func TestServeClosesIdleAndSlowConnectionsButNotWebSockets(t *testing.T) {
	f := newFixture(t)
	f.hub.readTimeout, f.hub.idleTimeout = 100*time.Millisecond, 100*time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { f.hub.Serve(ctx, ln); close(served) }()
	t.Cleanup(func() { cancel(); <-served })
	addr := ln.Addr().String()

	dctx, dcancel := context.WithTimeout(ctx, testenv.WaitShort)
	defer dcancel()
	ws, _, err := websocket.Dial(dctx, "ws://"+addr+"/api/sessions/live",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + f.cli}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	go func() {
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	}()

	dial := func(req string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, req)
		return c
	}
	idle := dial("GET /health HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")
	idle.SetReadDeadline(time.Now().Add(testenv.WaitShort))
	if line, _ := bufio.NewReader(idle).ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("GET /health: %q", line)
	}
	if !testenv.ClosedWithin(idle, testenv.WaitShort) {
		t.Error("a keep-alive connection idle after its answer was kept")
	}
	slow := dial("POST /api/cli/login/poll HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	if !testenv.ClosedWithin(slow, testenv.WaitShort) {
		t.Error("a request whose body never came was kept")
	}
	pctx, pcancel := context.WithTimeout(ctx, testenv.WaitShort)
	defer pcancel()
	if err := ws.Ping(pctx); err != nil {
		t.Errorf("a WebSocket open past both timeouts: %v", err)
	}
}

// TestARunnersClockFarFromTheHubsIsNoted: a Runner whose hello says its
// clock is 10 minutes ahead connects all the same, and its Host notes say
// how far off it is and what to do; one 20 s off gets no note.
func TestARunnersClockFarFromTheHubsIsNoted(t *testing.T) {
	for _, tt := range []struct {
		off  time.Duration
		note string
	}{{10 * time.Minute, "Its clock is 10m0s ahead of the Hub's"}, {-10 * time.Minute, "Its clock is 10m0s behind the Hub's"}, {20 * time.Second, ""}} {
		f := newFixture(t)
		c := connectRunner(t, f, f.rtoken)
		var w protocol.Welcome
		if err := c.Request(context.Background(), protocol.TypeHello, protocol.Hello{MinVersion: 1, MaxVersion: protocol.Version, Models: claude.Models(), Name: "r1",
			Clock: time.Now().Add(tt.off)}, &w); err != nil {
			t.Fatalf("hello with a clock %s off: %v", tt.off, err)
		}
		_, body := f.call(t, http.MethodGet, "/api/runners", "")
		var rs []api.RunnerStatus
		json.Unmarshal([]byte(body), &rs)
		if len(rs) != 1 || rs[0].Host == nil {
			t.Fatalf("GET /api/runners: %s", body)
		}
		notes := strings.Join(rs[0].Host.Notes, "\n")
		if tt.note == "" && strings.Contains(notes, "clock") || tt.note != "" && (!strings.Contains(notes, tt.note) || !strings.Contains(notes, "NTP")) {
			t.Errorf("a clock %s off: notes %q, want %q", tt.off, notes, tt.note)
		}
	}
}
