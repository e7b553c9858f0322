// Package runner is the Runner: it dials out to the Hub over one WebSocket,
// keeps that connection up with backoff, and runs the Hub's Sessions in
// Sandboxes through a sandbox.Backend: Builds, Workspaces, Claude Code in
// tmux, the mod relay. Only internal/cli imports it.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/build"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/gitrelay"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/relay"
	"kndl.dev/kndl/internal/sandbox"
)

// Runner is one Runner process.
type Runner struct {
	cfg     Config
	log     *slog.Logger
	backend sandbox.Backend
	builder *build.Builder
	relay   *relay.Relay
	// git is the git relay behind relay's /git/, holding each Session's
	// GitHub token (gitrelay.go); gitMu orders the writes of what it
	// serves each Session.
	git   *gitrelay.Relay
	gitMu sync.Mutex
	// egress judges restricted Sandboxes' connections (egress.go).
	egress egressGate
	// archives marks the Sessions archived here and purges them.
	archives *archives
	// clones keeps the host clone's read-only tokens.
	clones cloneTokens
	// warm is the warm pool (warm.go).
	warm *warm

	// life is Run's context: every Session's watchers end with it, and
	// wg counts every goroutine Run waits for before it returns.
	life context.Context
	wg   sync.WaitGroup

	// link is the connection to the Hub.
	link link

	mu       sync.Mutex
	sessions map[string]*session
	// settle holds the starts of the Sessions a hello listed until its
	// welcome settled them (settle.go).
	settle settling

	// out keeps what the Runner tells the Hub until a connection takes
	// it, so a Session's Events survive a dropped connection.
	out outbox
	// unheardWait is how long a prompt typed is waited on once Claude
	// Code's input emptied (deliver.go's unheardWaitDefault).
	unheardWait time.Duration
}

// New makes a Runner that runs Sandboxes with backend.
func New(cfg Config, backend sandbox.Backend) (*Runner, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	log := cfg.Logger.With("component", "runner")
	builds := backend
	if cfg.Builds != nil {
		builds = cfg.Builds
	}
	b, err := build.New(builds, filepath.Join(cfg.Home, "builds"), cfg.KeepBuilds, cfg.Logger)
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, log: log, backend: backend, builder: b,
		archives: &archives{dir: filepath.Join(cfg.Home, "sessions"), keep: cfg.ArchiveKeep, log: log},
		sessions: map[string]*session{}, link: link{hubURL: cfg.HubURL, token: cfg.Token}, unheardWait: unheardWaitDefault}
	// The pool is bounded to a quarter of the memory the Runner offers.
	r.warm = newWarm(r, cfg.WarmPool, backend.Host().MemoryMiB/4)
	r.out = outbox{log: log, conn: r.link.live, spawn: r.spawn, replyWait: replyWaitDefault}
	// The git relay reaches GitHub as the host clone does, through
	// Outbound, and follows no redirect.
	r.git = gitrelay.New(gitrelay.Options{Forge: github.Git{}, Pushed: r.gitPushed, Logger: cfg.Logger,
		Client: &http.Client{Transport: cfg.Outbound.Transport(), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}})
	r.relay, err = relay.New(relay.Options{HubURL: cfg.HubURL, ModelURL: cfg.ModelEndpoint, Hook: r.hook, Counted: r.counted, Git: r.git, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	if cfg.ModelEndpoint != "" {
		log.Warn("RUNNER_MODEL_ENDPOINT is set: every Session's model requests go to it, not to Anthropic", "endpoint", cfg.ModelEndpoint)
	}
	if err := r.installBin(); err != nil {
		return nil, err
	}
	if note, err := roomForInotify(inotifyLimit, cfg.maxSessions(backend.Host())); err != nil {
		log.Warn("Sessions past the host's inotify limit poll their transcripts, and their Claude Code can't watch files", "err", err)
	} else if note != "" {
		log.Info(note)
	}
	return r, nil
}

// installBin puts the kndl binary and the editor script in the home's
// bin/, which every Sandbox mounts read-only: the mod's hooks and the
// transcript follower run kndl there, and Claude Code the editor.
func (r *Runner) installBin() error {
	src := r.cfg.Binary
	if src == "" {
		var err error
		if src, err = os.Executable(); err != nil {
			return err
		}
	}
	dir := filepath.Join(r.cfg.Home, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("the kndl binary to mount in Sandboxes: %w", err)
	}
	defer in.Close()
	if err := installExecutable(dir, "kndl", in); err != nil {
		return err
	}
	return installExecutable(dir, editorName, strings.NewReader(editorScript))
}

// installExecutable writes what r reads as dir/name, executable by all,
// through a temporary file renamed over it: a running hook's binary, or
// the editor Claude Code runs now, stays untouched.
func installExecutable(dir, name string, r io.Reader) error {
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// Backoff bounds between connection attempts; each wait is jittered.
const (
	backoffMin = 250 * time.Millisecond
	backoffMax = 30 * time.Second
)

// Run serves the relay and keeps the Runner connected to the Hub until ctx
// is done. It returns an error when the Hub refuses the Runner's token, or
// the relay cannot listen, since retrying cannot help then.
func (r *Runner) Run(ctx context.Context) error {
	addr := r.backend.Host().Relay
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("the mod relay cannot listen on %s: %w (is another Runner on this host using RUNNER_RELAY_PORT?)", addr, err)
	}
	r.life = ctx
	defer r.waitGoroutines()
	if err := r.serveEgress(ctx); err != nil {
		ln.Close()
		return err
	}
	r.spawn(func() { r.relay.Serve(ctx, ln) })
	r.out.start(ctx)
	r.spawn(func() { r.archives.run(ctx) })
	// Claude Code keeps running while the Runner restarts: take its
	// Sessions back before saying hello.
	r.adopt(ctx)
	r.warm.sweepPool()
	if r.warm.on {
		r.spawn(func() { r.warm.fillPool(ctx) })
	}
	wait := backoffMin
	for {
		welcomed, err := r.connect(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errdefs.ErrUnauthorized) {
			return fmt.Errorf("the Hub at %s refused this Runner's token (revoked, or for another Hub): pair the Runner again with kndl runner token create", r.cfg.HubURL)
		}
		if welcomed {
			wait = backoffMin
		}
		// Jitter in [wait/2, wait) spreads a fleet's reconnects after a Hub restart.
		d := wait/2 + time.Duration(rand.Int64N(int64(wait/2)))
		if websocket.CloseStatus(err) == websocket.StatusGoingAway {
			// A Hub stopping (an upgrade, a restart) says so: not a fault.
			r.log.Info("the Hub is stopping; reconnecting", "in", d.Round(time.Millisecond))
		} else {
			r.log.Warn("hub connection lost; reconnecting", "err", err, "in", d.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
		wait = min(wait*2, backoffMax)
	}
}

// spawn runs f on a goroutine Run waits for.
func (r *Runner) spawn(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// waitGoroutines waits for what the Runner started, once Run's context is
// done: Claude Code runs on in its Sandbox, but nothing of this process
// does. A goroutine still running after closeWait is logged, not waited
// for forever.
func (r *Runner) waitGoroutines() {
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
		// Every goroutine's stack names what the work waits on.
		stacks := make([]byte, 256<<10)
		stacks = stacks[:runtime.Stack(stacks, true)]
		r.log.Warn("some of the Runner's work did not end in time", "waited", closeWait, "goroutines", string(stacks))
	}
}

// closeWait bounds how long Run waits for its goroutines to end.
const closeWait = 10 * time.Second

// connect runs one connection until it ends and reports whether the Hub
// welcomed it.
func (r *Runner) connect(ctx context.Context) (bool, error) {
	u := strings.Replace(strings.TrimSuffix(r.cfg.HubURL, "/"), "http", "ws", 1) + "/runner/connect"
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	ws, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": []string{"Bearer " + r.cfg.Token}},
	})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return false, fmt.Errorf("dial %s: %w", u, errdefs.ErrUnauthorized)
		}
		return false, fmt.Errorf("dial %s: %w", u, err)
	}
	conn := protocol.NewConn(ws, r.log)
	// Its handlers run on past its end (a prompt being typed is recorded
	// as taken) while the Runner dials again; Run's end waits for them.
	defer r.spawn(conn.Wait)
	conn.SetPingEvery(r.cfg.PingEvery)
	r.handle(conn)
	served := make(chan error, 1)
	go func() { served <- conn.Serve(ctx) }()

	host := r.backend.Host()
	running := r.running()
	r.settle.hold(running)
	var welcome protocol.Welcome
	err = conn.Request(ctx, protocol.TypeHello, protocol.Hello{
		MinVersion: protocol.MinVersion, MaxVersion: protocol.Version, Name: r.cfg.Name,
		Host: protocol.HostInfo{Backend: r.backend.Name(), Limits: host.Limits, Notes: host.Notes,
			MaxCPUs: host.MaxCPUs, MaxMemoryMiB: host.MaxMemoryMiB,
			Capacity: protocol.Amount{Sessions: r.cfg.maxSessions(host), CPUs: host.CPUs, MemoryMiB: host.MemoryMiB}},
		Sessions: running, Clock: time.Now(), Models: r.cfg.models(), Build: protocol.ThisBuild(),
	}, &welcome)
	if err != nil {
		r.settle.settledAll()
		conn.Close(websocket.StatusNormalClosure, "hello failed")
		<-served
		return false, fmt.Errorf("hello: %w", err)
	}
	r.log.Info("connected to hub", "url", r.cfg.HubURL, "protocol", welcome.Version, "runner_id", welcome.RunnerID)
	r.link.set(conn)
	r.warm.reportPool()
	r.resume(ctx, running, welcome)
	r.settle.settledAll()
	r.resendPorts()
	err = <-served
	r.link.set(nil)
	return true, err
}

// handle registers what the Hub may ask of this Runner.
func (r *Runner) handle(conn *protocol.Conn) {
	conn.Handle(protocol.TypeSessionStart, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var req protocol.SessionStart
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("session.start: %v: %w", err, errdefs.ErrInvalid)
		}
		return nil, r.startSession(ctx, req)
	})
	handleRunning(conn, r, protocol.TypeSessionDeliver, func(ctx context.Context, s *session, req protocol.SessionDeliver) (any, error) {
		return s.deliverOnce(ctx, req)
	})
	conn.Handle(protocol.TypeSessionStop, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var req protocol.SessionRef
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("session.stop: %v: %w", err, errdefs.ErrInvalid)
		}
		return nil, r.stopSession(ctx, req.SessionID)
	})
	handleRunning(conn, r, protocol.TypeSessionStopTurn, func(ctx context.Context, s *session, req protocol.SessionRef) (any, error) {
		return nil, s.stopTurn(ctx)
	})
	handleRunning(conn, r, protocol.TypeSessionCheck, func(ctx context.Context, s *session, req protocol.SessionCheck) (any, error) {
		// The check gets the Session's Variables afresh from the Hub, as at
		// its start, and the Runner keeps them in memory alone.
		var creds protocol.SessionCredentials
		if err := r.link.request(ctx, protocol.TypeSessionCredentials, protocol.SessionRef{SessionID: s.id}, &creds); err != nil {
			return nil, fmt.Errorf("the Hub gave no Variables for the check: %w", err)
		}
		return s.check(ctx, req, creds.Variables)
	})
	handleRunning(conn, r, protocol.TypeSessionAnswer, func(ctx context.Context, s *session, req protocol.SessionAnswer) (any, error) {
		return nil, s.questions.answer(req)
	})
	handleRunning(conn, r, protocol.TypeSessionStopSubagent, func(ctx context.Context, s *session, req protocol.SessionSubagent) (any, error) {
		s.subagents.askStop(req.AgentID)
		return nil, nil
	})
	handleAs(conn, protocol.TypeSessionArchive, func(ctx context.Context, req protocol.SessionRef) (any, error) {
		return nil, r.archiveSession(ctx, req.SessionID)
	})
	handleAs(conn, protocol.TypeSessionFork, func(ctx context.Context, req protocol.SessionFork) (any, error) {
		return newForker(r).fork(ctx, req)
	})
	handleAs(conn, protocol.TypeEnvTest, func(ctx context.Context, req protocol.EnvTest) (any, error) {
		return nil, r.testBuild(ctx, req)
	})
	handleAs(conn, protocol.TypeSessionEgress, func(ctx context.Context, req protocol.SessionEgress) (any, error) {
		return nil, r.swapEgress(req)
	})
	handleAs(conn, protocol.TypeSessionCapped, func(ctx context.Context, req protocol.SessionCapped) (any, error) {
		return nil, r.relay.Cap(req.SessionID, req.Why)
	})
	handleAs(conn, protocol.TypeSessionRestore, func(ctx context.Context, req protocol.SessionRef) (any, error) {
		return nil, r.restoreSession(req.SessionID)
	})
	r.handleLive(conn)
}

// Connected reports whether the Runner is connected to the Hub and welcomed.
func (r *Runner) Connected() bool { return r.link.current() != nil }

// notify queues a message about session ("" for none) to the Hub; the
// outbox sends it, in order with the Session's others, once connected.
func (r *Runner) notify(session, typ string, body any) {
	r.out.add(session, typ, body)
}

// relayPort is the relay's port, as Sandboxes reach it.
func relayPort(h sandbox.HostInfo) string {
	_, port, _ := net.SplitHostPort(h.Relay)
	return port
}
