package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kndl.dev/kndl/internal/build"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/mod"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/tmux"
)

// Paths inside every Sandbox.
const (
	workspaceDir = claude.Workdir
	modDir       = "/opt/kndl/mod"
	binDir       = "/opt/kndl/bin"
	kndlBin      = binDir + "/kndl"
	runDir       = "/run/kndl"
	tmuxSocket   = runDir + "/tmux.sock"
	cacheDir     = "/var/cache/kndl"
	paneTarget   = "claude"
	// The pane's size until a terminal tab sets it.
	paneCols, paneRows = 120, 40
)

// cacheEnv points package caches at the Sandbox's package-cache disk.
var cacheEnv = []string{
	"XDG_CACHE_HOME=" + cacheDir + "/xdg",
	"BUN_INSTALL_CACHE_DIR=" + cacheDir + "/bun",
	"npm_config_cache=" + cacheDir + "/npm",
}

// session is the supervisor of one Session this Runner runs: it owns the
// Session's run here (its pane and the prompts typed into it, the
// transcript follower, its stream of Events and what waits in it, the
// terminal mirror, its ports and its Sandbox token), and holds of the
// Runner only what it uses: the backend, the outbox and the link to the
// Hub, and the Runner's goroutine group.
type session struct {
	id      string
	sandbox string
	// conversation is its Claude Code's conversation id: id, or the pool
	// id of the warm pool Sandbox it took (warm.go).
	conversation string
	// dir is the Session's directory on the Runner's host.
	dir     string
	log     *slog.Logger
	backend sandbox.Backend
	// out takes what the Session tells the Hub, in order; link asks the
	// Hub and dials streams back; spawn runs a goroutine the Runner's Run
	// waits for; life is Run's context.
	out   *outbox
	link  *link
	spawn func(func())
	life  context.Context
	// git holds the Session's GitHub token for its git relay.
	git gitTokens
	// release takes it off the Runner once its Claude Code exits.
	release func(*session)
	// tokenRetry is RUNNER_GITHUB_TOKEN_RETRY.
	tokenRetry time.Duration
	// unheardWait is how long a prompt typed is waited on once Claude
	// Code's input emptied (deliver.go's unheardWaitDefault).
	unheardWait time.Duration
	ctl         *tmux.Control
	// paneOutput, if set, takes the pane's output in place of the mirror:
	// a warm pool Sandbox's, until a Session takes it (paneSink).
	paneOutput func(pane string, data []byte)
	// user is whom its Claude Code and tmux run as: the Build's user, nil
	// for root.
	user *build.User
	// stopping is set when the Runner ends Claude Code itself, so its exit
	// is not reported as Claude Code exiting on its own.
	stopping atomic.Bool
	// following is set once the transcript follower and the exit watcher
	// run.
	following atomic.Bool
	// ctx lives as long as the Session runs here; cancel ends its control
	// client, follower and watchers.
	ctx    context.Context
	cancel context.CancelFunc
	// typing serialises deliveries and stop-turns on the pane; escaped,
	// under it, is when stopTurn last sent Escape.
	typing  sync.Mutex
	escaped time.Time
	// sent is the prompt on its way, kept until Claude Code's
	// UserPromptSubmit says what it took (deliver.go).
	sent atomic.Pointer[onItsWay]
	// takenPrompts are the prompts Claude Code took, so one the Hub sends
	// again is not typed again (once.go).
	takenPrompts takenPrompts
	// launched is when this Runner started the Session's Claude Code (zero
	// for one it adopted after a restart); set before the follower runs.
	launched time.Time
	// inTurn is set while the transcript says a Turn runs: from a prompt's
	// turn_start to its turn_end, which Claude Code writes once the Turn is
	// over, after its Stop hook.
	inTurn atomic.Bool
	// diskLimited says its Sandbox has a disk limit, and diskFull is set
	// once the Session was told it is full, until it is not (disk.go).
	diskLimited, diskFull atomic.Bool
	// mirror relays the pane to the Hub's terminal tabs; ports is the last
	// list of listening ports sent.
	mirror mirror
	ports  portList
	// stream merges its hooks and transcript into one stream (stream.go);
	// questions wait for their answers (questions.go); subagents pairs each
	// subagent with its Agent call and holds the stops asked
	// (subagents.go).
	stream    stream
	questions questions
	subagents subagents
	// tokenFailing is set while the Sandbox token cannot be had, so the
	// failure is logged once; tokenKept once its refresh runs.
	tokenFailing atomic.Bool
	tokenKept    atomic.Bool
	// firstDelivered is closed once the Hub's first delivery has ended.
	firstDelivered chan struct{}
	firstOnce      sync.Once
}

// gitTokens is the git relay as a Session's supervisor uses it.
type gitTokens interface {
	SetToken(sessionID, token string) error
}

// newSession makes the supervisor of Session id, not yet running.
func (r *Runner) newSession(id string) *session {
	s := &session{id: id, sandbox: sandboxOf(r.sessionDir(id), id), conversation: conversationOf(r.sessionDir(id), id), dir: r.sessionDir(id), log: r.log, backend: r.backend,
		out: &r.out, link: &r.link, spawn: r.spawn, life: r.life, release: r.release, tokenRetry: r.cfg.GitHubTokenRetry, unheardWait: r.unheardWait,
		firstDelivered: make(chan struct{})}
	if r.git != nil {
		s.git = r.git
	}
	s.stream.id, s.stream.out = id, &r.out
	s.questions.stream = &s.stream
	s.subagents.stream = &s.stream
	return s
}

// release takes a Session that no longer runs here off the Runner: out of
// its map (if s is the one there), and its relay token, git relay and
// egress policy gone.
func (r *Runner) release(s *session) {
	r.mu.Lock()
	if r.sessions[s.id] == s {
		delete(r.sessions, s.id)
	}
	r.mu.Unlock()
	r.relay.Revoke(s.id)
	r.git.Close(s.id)
	r.egress.forget(s.id)
}

// sandboxID names a Session's Sandbox.
func sandboxID(sessionID string) string { return "s-" + sessionID }

// sessionDir is the Session's directory on the Runner's host.
func (r *Runner) sessionDir(id string) string { return filepath.Join(r.cfg.Home, "sessions", id) }

// startSession starts (or wakes) a Session's Claude Code, reporting each
// slow step in the Session's start log, and returns once Claude Code waits
// for its first prompt.
func (r *Runner) startSession(ctx context.Context, req protocol.SessionStart) error {
	if !protocol.ValidSessionID(req.SessionID) {
		return fmt.Errorf("session id %q: %w", req.SessionID, errdefs.ErrInvalid)
	}
	// One the hello listed may be stopping, the Hub having not taken it
	// back (settle.go).
	if err := r.settle.await(ctx, req.SessionID); err != nil {
		return err
	}
	r.mu.Lock()
	if r.sessions[req.SessionID] != nil {
		r.mu.Unlock()
		return fmt.Errorf("session %s is already running here: %w", req.SessionID, errdefs.ErrConflict)
	}
	s := r.newSession(req.SessionID)
	r.sessions[s.id] = s
	r.mu.Unlock()
	// A fill waits for the start, and for its first prompt taken: one
	// beside it took the CPU the prompt's typing and Claude Code's taking
	// of it wanted (BenchmarkWarmPoolStart).
	r.warm.starts.Add(1)
	err := forgetTaken(s.dir)
	defer func() {
		if err != nil {
			r.warm.startDone()
			return
		}
		r.spawn(func() { s.awaitFirstDelivery(firstDeliveryWait); r.warm.startDone() })
	}()
	if err == nil {
		err = r.launch(ctx, s, req)
	}
	if err == nil {
		// What the Runner told of the Session before this start (the last
		// hooks of a Claude Code stopped since) reaches the Hub before the
		// Session is Active there, so the Hub takes none of it as this
		// run's: a UserPromptSubmit taken so would hold the queue for a
		// Turn that never runs.
		r.out.flushed(ctx, s.id, startFlushWait)
	}
	if err != nil {
		r.release(s)
		if s.cancel != nil {
			s.stopping.Store(true)
			s.cancel()
		}
	}
	return err
}

// firstDeliveryWait bounds how long a started Session holds the warm
// pool's fills back while no first prompt comes.
const firstDeliveryWait = 10 * time.Second

// awaitFirstDelivery waits until the Hub's first delivery to s has ended
// (its prompt taken or not), s stops, or d passes.
func (s *session) awaitFirstDelivery(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	var stopped, ends <-chan struct{}
	if s.ctx != nil {
		stopped = s.ctx.Done()
	}
	if s.life != nil {
		ends = s.life.Done()
	}
	select {
	case <-s.firstDelivered:
	case <-stopped:
	case <-ends:
	case <-t.C:
	}
}

// startFlushWait bounds how long a start's answer waits for the Hub to
// take the Session's earlier messages: the Hub answers in milliseconds, and
// one that can't store them must not hold the start up.
const startFlushWait = 10 * time.Second

func (r *Runner) launch(ctx context.Context, s *session, req protocol.SessionStart) error {
	logf := func(format string, args ...any) { s.logLine(fmt.Sprintf(format, args...)) }
	// The Creator's token and the Variables, fetched as the Session starts
	// and kept in memory: they reach processes in the Sandbox through
	// their environment alone.
	var creds protocol.SessionCredentials
	if err := r.link.request(ctx, protocol.TypeSessionCredentials, protocol.SessionRef{SessionID: s.id}, &creds); err != nil {
		return fmt.Errorf("the Hub gave no credentials for this Session: %w", err)
	}
	if warm, err := r.warm.fromPool(ctx, s, req, creds, logf); err != nil || warm {
		if err == nil {
			r.warm.seedPool(req, creds)
			s.following.Store(true)
			s.watch(req.Offsets)
		}
		return err
	}
	var env []string
	for _, v := range creds.Variables {
		env = append(env, v.Name+"="+v.Value)
	}
	dir := r.sessionDir(s.id)
	// Readable inside by the user Claude Code may run as; it holds no
	// secret, and the Session's directory around it is root's alone.
	if err := os.MkdirAll(filepath.Join(dir, "mod"), 0o755); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(dir, "mod"), 0o755); err != nil { // one made 0700 before
		return err
	}
	sayForked(dir, logf)
	// A cold start's slow steps run at once where one does not need
	// another, each with its own lines in the log: the Workspace's clone
	// beside the image's pull and Build, and Claude Code's download from
	// the moment the pull shows the image's C library.
	clone := make(chan error, 1)
	cloneCtx, stopClone := context.WithCancel(ctx)
	defer stopClone()
	go func() {
		ws := filepath.Join(dir, "workspace")
		if cloned(ws) { // a wake finds it there
			clone <- nil
			return
		}
		tok, err := r.clones.get(cloneCtx, &r.link, s.id, req.RepoURL)
		if err == nil {
			err = cloneWorkspace(cloneCtx, &r.cfg.Outbound, req.RepoURL, tok, ws, func(line string) { logf("%s", line) })
		}
		clone <- err
	}()
	fetch := claudeFetch{r: r, logf: logf}
	bd, err := r.buildFor(ctx, req.RepoURL, req.Environment, creds.Variables, logf, func(rootfs string) { fetch.start(ctx, muslRootfs(rootfs)) })
	var bin claude.Binary
	if err == nil {
		bin, err = fetch.result(ctx, bd.Musl)
	} else {
		fetch.stop()
		stopClone()
	}
	if cerr := <-clone; err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	created, err := r.ensureSandbox(ctx, s, bd, bin, dir, req.Environment, logf)
	if err != nil {
		return err
	}
	st, err := r.backend.Status(ctx, s.sandbox)
	if err != nil {
		return err
	}
	if created {
		// Where the backend gave less than the Environment asked.
		for _, n := range st.Notes {
			logf("%s", n)
		}
	}
	s.diskLimited.Store(st.Resources.DiskMiB > 0)
	if line := diskLine(st); line != "" {
		logf("%s", line)
	}
	if created {
		login, err := runStart(ctx, r.backend, s.sandbox, req.Environment, bd, append(append(append([]string(nil), bd.LoginEnv...), cacheEnv...), env...), logf)
		if err != nil {
			return err
		}
		raw, _ := json.Marshal(login)
		if err := writeAtomic(filepath.Join(dir, loginEnvFile), raw); err != nil {
			return err
		}
	}
	login := bd.LoginEnv
	if raw, err := os.ReadFile(filepath.Join(dir, loginEnvFile)); err == nil {
		json.Unmarshal(raw, &login) // its Sandbox's, probed after the Start script
	}
	// Its watchers outlive this start's request, and end with the Runner.
	sctx, cancel := context.WithCancel(r.life)
	s.ctx, s.cancel = sctx, cancel
	// The git relay serves the Session's Repo, and the Sandbox's git goes
	// through it. Its GitHub token is asked for while Claude Code starts,
	// and waited for before the start is reported, so the first Turn can
	// push; the Session starts without one all the same.
	if err := r.openGit(ctx, s, req.RepoURL, req.Environment); err != nil {
		return err
	}
	firstToken := make(chan struct{})
	s.keepToken(firstToken)
	// A fresh copy of the mod for this start: an update never changes the
	// mod under a running Turn.
	copyName := fmt.Sprintf("%d", time.Now().UnixNano())
	if err := freshMod(filepath.Join(dir, "mod"), copyName); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "mod", copyName, bashEnvFile), []byte(claude.BashEnvScript), 0o644); err != nil {
		return fmt.Errorf("write Claude Code's Bash environment: %w", err)
	}
	var installations []string
	for _, m := range req.MCPServers {
		installations = append(installations, m.Installation)
	}
	if len(installations) > 0 {
		if err := mod.WriteGateway(filepath.Join(dir, "mod", copyName), installations); err != nil {
			return err
		}
	}
	// Claude Code runs as the Build's user, if it has one, in folders
	// made its own.
	if err := keepUser(dir, bd.User); err != nil {
		return err
	}
	if s.user = bd.User; s.user != nil {
		if err := ownFolders(ctx, r.backend, s.sandbox, *s.user, logf); err != nil {
			return err
		}
	}
	// Claude Code's config is seeded while tmux starts: two processes
	// started in the Sandbox at once, not one after the other (startClaude
	// waits for it before it starts Claude Code). On gVisor each costs a
	// `runsc exec` and a process start in the Sentry.
	seeded := make(chan error, 1)
	r.spawn(func() {
		_, err := sandbox.Output(ctx, r.backend, s.sandbox, sandbox.Cmd{Args: []string{kndlBin, "claude", "seed", claude.ConfigDir, workspaceDir}, User: s.runAs()})
		if err != nil {
			err = fmt.Errorf("seed Claude Code's config: %w", err)
		}
		seeded <- err
	})
	token := r.relay.Issue(s.id, st.Addr)
	if err := r.relay.SetModToken(s.id, req.ModToken); err != nil {
		return err
	}
	relayURL := "http://" + sandbox.RelayHost + ":" + relayPort(r.backend.Host())
	launch := claude.Launch{
		Binary:       claude.MountDir + "/claude",
		Conversation: s.conversation,
		Resume:       req.Resume,
		Model:        req.Model,
		Effort:       req.Effort,
		// The Environment's Variables over the login environment, and over
		// them the package caches and VISUAL, the editor prompts come
		// through.
		Base:         append(append([]string(nil), login...), env...),
		Own:          append(append(append([]string(nil), cacheEnv...), editorEnv), ghEnv(req.RepoURL, token)...),
		SessionID:    s.id,
		ConfigDir:    claude.ConfigDir,
		TZ:           claude.LocalTimeZone(),
		RelayURL:     relayURL,
		SessionToken: token,
		BashEnv:      modDir + "/" + copyName + "/" + bashEnvFile,
	}
	// The relay holds the Creator's token while the Session is awake, and
	// carries Claude Code's model calls, whatever Claude Code holds.
	if err := modelRoute(r.relay, &launch, s.id, token, relayURL, creds); err != nil {
		return err
	}
	for _, p := range mod.Plugins {
		launch.PluginDirs = append(launch.PluginDirs, modDir+"/"+copyName+"/"+p)
	}
	if len(installations) > 0 {
		launch.PluginDirs = append(launch.PluginDirs, modDir+"/"+copyName+"/"+mod.GatewayPlugin)
	}
	argv, env, err := launch.Command()
	if err != nil {
		return err
	}
	if err := s.startClaude(sctx, argv, env, seeded); err != nil {
		return err
	}
	logf("waiting for Claude Code")
	if err := s.waitReady(ctx); err != nil {
		return err
	}
	select {
	case <-firstToken:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.warm.seedPool(req, creds)
	s.following.Store(true)
	s.watch(req.Offsets)
	return nil
}

// claudeFetch is Claude Code's install for a Session's start, begun beside
// the Build for the C library the pulled image shows; the Build's own probe
// has the last word (result).
type claudeFetch struct {
	r      *Runner
	logf   func(string, ...any)
	musl   bool
	cancel context.CancelFunc
	done   chan struct{} // nil until start
	bin    claude.Binary
	err    error
}

func (f *claudeFetch) start(ctx context.Context, musl bool) {
	ctx, f.cancel = context.WithCancel(ctx)
	f.musl, f.done = musl, make(chan struct{})
	go func() {
		defer close(f.done)
		f.bin, f.err = f.install(ctx, musl)
	}()
}

// result is Claude Code for an image that is musl or not: the one begun,
// or, if the image's files misled the guess, the other, installed now.
func (f *claudeFetch) result(ctx context.Context, musl bool) (claude.Binary, error) {
	if f.done != nil {
		<-f.done
		f.cancel()
		if f.musl == musl {
			return f.bin, f.err
		}
	}
	return f.install(ctx, musl)
}

// stop ends a download begun, for a start that failed.
func (f *claudeFetch) stop() {
	if f.done != nil {
		f.cancel()
		<-f.done
	}
}

func (f *claudeFetch) install(ctx context.Context, musl bool) (claude.Binary, error) {
	variant := claude.Glibc
	if musl {
		variant = claude.Musl
	}
	return claude.Install(ctx, filepath.Join(f.r.cfg.Home, "claude-code"), variant, claude.InstallOptions{
		Registry: f.r.cfg.NPMRegistry, Pin: f.r.cfg.Claude, Progress: func(line string) { f.logf("%s", line) },
	})
}

// muslRootfs says whether an unpacked image's C library looks like musl,
// from its dynamic loader's name, as the Build's probe asks inside.
func muslRootfs(rootfs string) bool {
	m, _ := filepath.Glob(filepath.Join(rootfs, "lib", "ld-musl-*"))
	return len(m) > 0
}

// ensureSandbox makes and boots the Session's Sandbox, or boots the one it
// has (a wake keeps its disks), its dependency folders bound afresh at
// each boot. A Session restored since it was archived has no Sandbox but
// its kept disks, which the new one takes back. It reports whether the
// Sandbox is new.
func (r *Runner) ensureSandbox(ctx context.Context, s *session, bd build.Build, bin claude.Binary, dir string, env *protocol.Environment, logf func(string, ...any)) (bool, error) {
	res := resources(env)
	st, err := r.backend.Status(ctx, s.sandbox)
	made := fmt.Sprintf("%s %g %d %s", bd.Key, res.CPUs, res.MemoryMiB, depsDisk)
	if err == nil && st.State != sandbox.StateRunning && stale(dir, made, wantsDeps(env)) {
		// A newer Environment version changed its Build or resources, or
		// brought the first dependency disk: a new Sandbox on them, with
		// this one's disks.
		if err := r.backend.RemoveKeepingDisks(ctx, s.sandbox, filepath.Join(dir, "disks")); err != nil {
			return false, fmt.Errorf("replace the Sandbox for the new Environment version: %w", err)
		}
		st, err = sandbox.Status{}, sandbox.ErrNotFound
	}
	created := errors.Is(err, sandbox.ErrNotFound)
	if created {
		err = r.backend.Create(ctx, sandbox.Spec{
			ID:     s.sandbox,
			Layers: bd.Layers,
			Disks: keptDisks(dir, withDockerDisk(env, []sandbox.Disk{
				// Apart: Claude Code's transcript goes on being written
				// when the Session has filled its disk limit.
				{Name: "claude", Target: claude.ConfigDir, Apart: true},
				{Name: "cache", Target: cacheDir},
				{Name: depsDisk, Target: depsDir},
			})),
			Binds: []sandbox.Bind{
				{Source: filepath.Join(dir, "workspace"), Target: workspaceDir},
				{Source: bin.Dir, Target: claude.MountDir, ReadOnly: true},
				{Source: filepath.Join(r.cfg.Home, "bin"), Target: binDir, ReadOnly: true},
				{Source: filepath.Join(dir, "mod"), Target: modDir, ReadOnly: true},
			},
			Tmpfs:          []sandbox.Tmpfs{{Target: runDir, Mode: 0o700}},
			Resources:      res,
			Docker:         docker(env),
			RestrictEgress: envEgress(env).Restricted(),
		})
		if err != nil {
			return false, fmt.Errorf("create the Sandbox: %w", err)
		}
		os.Remove(filepath.Join(dir, "disks")) // emptied by the Create, if there were kept disks
		if err := os.WriteFile(filepath.Join(dir, sandboxMade), []byte(made), 0o600); err != nil {
			return false, err
		}
		st.State = sandbox.StateCreated
	} else if err != nil {
		return false, err
	}
	if st.State == sandbox.StateRunning {
		return created, r.judgeEgress(ctx, s, dir, env, false)
	}
	// The egress policy is not the Build's: a wake takes the
	// Environment's as it is now.
	if err := r.backend.SetEgress(ctx, s.sandbox, envEgress(env).Restricted()); err != nil {
		return false, err
	}
	pruneDependencies(ctx, r.backend, r.log, s.sandbox, dir, env, logf)
	if err := bindDependencies(ctx, r.backend, s.sandbox, filepath.Join(dir, "workspace"), env, logf); err != nil {
		return false, err
	}
	if err := r.backend.Start(ctx, s.sandbox); err != nil {
		return false, fmt.Errorf("start the Sandbox: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, hookDoorFile), nil, 0o600); err != nil {
		return false, err
	}
	if err := r.judgeEgress(ctx, s, dir, env, true); err != nil {
		return false, err
	}
	if err := startDocker(ctx, r.backend, s.sandbox, env, logf); err != nil {
		return false, err
	}
	return created, nil
}

// bashEnvFile is the file of a mod copy Claude Code sources ahead of each
// Bash command (claude.Launch.BashEnv).
const bashEnvFile = "bash-env"

// loginEnvFile is the file of a Session's directory that holds its
// Sandbox's login environment, probed after the Start script (no Variable
// is in it).
const loginEnvFile = "login-env.json"

// sandboxMade is the file of a Session's directory that says what its
// Sandbox was made from: its Build's key, its resources, and the
// dependency disk's name once it has one.
const sandboxMade = "sandbox-made"

// stale reports a Sandbox made from other than made. One made before the
// file was kept is taken as it is; so is one made before dependency
// disks, unless the Environment now has dependency folders, which need
// a new Sandbox with the disk.
func stale(dir, made string, wantsDeps bool) bool {
	b, err := os.ReadFile(filepath.Join(dir, sandboxMade))
	if err != nil {
		return wantsDeps
	}
	was := string(b)
	if !wantsDeps && !strings.HasSuffix(was, " "+depsDisk) {
		was += " " + depsDisk
	}
	return was != made
}

// hookDoorFile, in a Session's directory, says that its Sandbox was last
// booted by a Runner whose Sandboxes' init serves the mod's hook door
// (mod.DoorAddr). A Sandbox an earlier Runner booted, still running, has
// none: a Claude Code started there keeps the command hooks.
const hookDoorFile = "hookdoor"

// freshMod writes a new copy of the mod into dir (a Session's mod
// directory) and removes older ones: the Claude Code that used them has
// exited by now. Its hooks post to the hook door where the Sandbox's init
// serves one.
func freshMod(dir, name string) error {
	old, _ := os.ReadDir(dir)
	for _, e := range old {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
	if err := mod.WriteCopy(filepath.Join(dir, name)); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), hookDoorFile)); err != nil {
		return nil
	}
	return mod.UseDoor(filepath.Join(dir, name), mod.DoorURL)
}

// startClaude starts the Session's tmux with a control client, then Claude
// Code in its pane. The environment goes over the control client's stdin
// (respawn-pane -e), so no value sits on a command line, and the tmux server
// itself holds none: Claude Code's process gets exactly env. Claude Code
// starts once seeded has said its config is written.
func (s *session) startClaude(ctx context.Context, argv, env []string, seeded <-chan error) error {
	home := "/root"
	if s.user != nil {
		home = s.user.Home
	}
	s.mirror.cols, s.mirror.rows = paneCols, paneRows
	output := s.mirror.output
	if s.paneOutput != nil {
		output = s.paneOutput
	}
	// The tmux server runs as the Session's user, and so the pane it
	// spawns; a root client (a Runner taking it back) may still attach.
	ctl, err := controlClient(ctx, s.backend, s.sandbox, sandbox.Cmd{
		Args: []string{"tmux", "-S", tmuxSocket, "-f", "/dev/null", "-C", "new-session", "-A", "-s", paneTarget,
			"-x", strconv.Itoa(paneCols), "-y", strconv.Itoa(paneRows), "-c", workspaceDir, "sleep", "infinity"},
		Env:  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home, "LANG=C.UTF-8", "TERM=xterm-256color"},
		Dir:  workspaceDir,
		User: s.runAs(),
	}, output)
	if err != nil {
		return fmt.Errorf("start tmux: %w", err)
	}
	s.ctl = ctl
	for _, opt := range [][]string{{"focus-events", "on"}, {"history-limit", "10000"}, {"exit-empty", "on"}} {
		if _, err := ctl.Run(ctx, tmux.Command("set", append([]string{"-g"}, opt...)...)); err != nil {
			return fmt.Errorf("tmux: %w", err)
		}
	}
	if err := <-seeded; err != nil {
		return err
	}
	args := []string{"-k", "-t", paneTarget, "-c", workspaceDir}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	args = append(append(args, "--"), argv...)
	s.launched = time.Now()
	if _, err := ctl.Run(ctx, tmux.Command("respawn-pane", args...)); err != nil {
		return fmt.Errorf("start Claude Code: %w", err)
	}
	return nil
}

// runAs is the Sandbox user its Claude Code runs as, by name, so with its
// groups; "" for root.
func (s *session) runAs() string {
	if s.user == nil {
		return ""
	}
	return s.user.Name
}

// userFile is the file of a Session's directory that names the user its
// Claude Code runs as, for a Runner that takes the Session back; none for
// root.
const userFile = "user.json"

// keepUser records u in the Session's directory dir, or that it runs as
// root when u is nil.
func keepUser(dir string, u *build.User) error {
	if u == nil {
		if err := os.Remove(filepath.Join(dir, userFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	raw, _ := json.Marshal(u)
	return writeAtomic(filepath.Join(dir, userFile), raw)
}

// keptUser is the user keepUser recorded in dir, nil for root.
func keptUser(dir string) *build.User {
	raw, err := os.ReadFile(filepath.Join(dir, userFile))
	if err != nil {
		return nil
	}
	var u build.User
	if json.Unmarshal(raw, &u) != nil {
		return nil
	}
	return &u
}

// ownFolders gives user the folders Claude Code writes, as root, before
// it starts as that user: its config, the Workspace (cloned on the host),
// the package caches, the dependency disk and the tmux socket's folder.
// Only what another owns is changed, so a wake changes little.
func ownFolders(ctx context.Context, b sandbox.Backend, id string, u build.User, logf func(string, ...any)) error {
	start := time.Now()
	_, err := sandbox.Output(ctx, b, id, sandbox.Cmd{Args: []string{"sh", "-c", ownScript, "own", strconv.Itoa(u.UID), strconv.Itoa(u.GID),
		claude.ConfigDir, workspaceDir, cacheDir, depsDir, runDir}})
	if err != nil {
		return fmt.Errorf("remoteUser, containerUser: give the user %s (uid %d) the folders Claude Code writes: %w", u.Name, u.UID, err)
	}
	logf("Claude Code runs as %s (uid %d); its folders are its own (%s)", u.Name, u.UID, time.Since(start).Round(time.Millisecond))
	return nil
}

// ownScript chowns each folder after $1 (uid) and $2 (gid) that exists,
// on its own file system, where another owns it.
const ownScript = `set -e
uid=$1 gid=$2
shift 2
for d; do
	[ -d "$d" ] || continue
	find "$d" -xdev \( ! -user "$uid" -o ! -group "$gid" \) -exec chown -h "$uid:$gid" {} +
done
`

// readyTimeout bounds Claude Code's start to its prompt.
const readyTimeout = 90 * time.Second

// readyMark is drawn last as Claude Code comes up in bypass-permissions
// mode: its prompt is ready (measured on 2.1.328).
const readyMark = "shift+tab to cycle"

func (s *session) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	var screen string
	for time.Now().Before(deadline) {
		select {
		case <-s.ctl.Done():
			return fmt.Errorf("Claude Code exited as it started; its screen showed:\n%s", strings.TrimSpace(screen))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
		screen = s.screen(ctx)
		if strings.Contains(screen, readyMark) {
			return nil
		}
	}
	return fmt.Errorf("Claude Code did not show its prompt within %s; its screen showed:\n%s", readyTimeout, strings.TrimSpace(screen))
}

// screen is the pane's visible text.
func (s *session) screen(ctx context.Context) string {
	lines, _ := s.ctl.Run(ctx, tmux.Command("capture-pane", "-p", "-J", "-t", paneTarget))
	return strings.Join(lines, "\n")
}

func (r *Runner) session(id string) (*session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sessions[id]
	if s == nil || s.ctl == nil {
		return nil, fmt.Errorf("session %s is not running on this Runner: %w", id, errdefs.ErrNotFound)
	}
	return s, nil
}

// watch starts a running Session's watchers: its transcript follower from
// offsets, its ports watcher, its exit watcher, and the refresh of its
// Sandbox token.
func (s *session) watch(offsets map[string]int64) {
	s.spawn(func() {
		// One process start in the Sandbox for both (execHelpers); each
		// starts again on its own.
		follower, ports := s.execHelpers(s.ctx, s.followArgs(offsets), portsWatchArgs)
		s.spawn(func() { s.watchPorts(s.ctx, ports) })
		s.follow(s.ctx, offsets, follower)
	})
	s.keepToken(nil)
	s.spawn(s.watchExit)
}

// controlClient runs cmd, a tmux control client, in Sandbox id and
// connects to it until ctx ends. Its pipes are the host's, not io.Pipes,
// so that its output ends when the last process holding it does, the
// Sandbox's end included (its PID 1 killed, every process with it):
// through an io.Pipe nothing closed it, and the Session showed as up for
// good.
func controlClient(ctx context.Context, backend sandbox.Backend, id string, cmd sandbox.Cmd, output func(pane string, data []byte)) (*tmux.Control, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
	_, err = backend.Exec(ctx, id, cmd)
	inR.Close() // the client's ends now
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	context.AfterFunc(ctx, func() { inW.Close(); outR.Close() })
	return tmux.NewControl(inW, outR, output)
}

// watchExit reports Claude Code exiting on its own: its pane closes, the
// tmux session with it, and the control client ends; release takes it off
// the Runner.
func (s *session) watchExit() {
	<-s.ctl.Done()
	if s.life.Err() != nil {
		return // the Runner stops; Claude Code runs on, and the next Runner takes it back
	}
	s.mirror.close()
	s.release(s)
	if s.stopping.Load() {
		return
	}
	s.cancel()
	detail := "it exited on its own"
	st, err := s.backend.Status(s.life, s.sandbox)
	switch {
	case err == nil && st.OOMKills > 0:
		detail = fmt.Sprintf("its Sandbox ran out of memory (%d MiB) and the kernel killed %d of its processes, Claude Code with them; "+
			"a prompt wakes it, and the Repo's Environment can give it more memory", st.Resources.MemoryMiB, st.OOMKills)
	case err == nil && st.State != sandbox.StateRunning:
		detail = "its Sandbox stopped under it (its first process ended, and every other with it); a prompt wakes it"
	}
	s.log.Info("claude code exited", "session", s.id, "why", detail)
	s.out.add(s.id, protocol.TypeSessionExited, protocol.SessionExited{SessionID: s.id, Detail: detail})
}

// logLine adds a line to the Session's start log.
func (s *session) logLine(line string) {
	s.out.add(s.id, protocol.TypeSessionEvents, protocol.SessionEvents{SessionID: s.id, Events: []protocol.Event{{At: time.Now(), Kind: protocol.EventLog, Text: line}}})
}

// current reports whether ev, read from the transcript, may be the Claude
// Code now running's: a line stamped before this Runner started it is an
// earlier one's, which a wake reads first (the last lines before a sleep).
// Its prompt says nothing of the prompt being typed, even one of the same
// text (the prompt of a Turn the sleep cut, typed again), and its
// turn_start no Turn that runs. Claude Code stamps each line with the
// host's clock (in gVisor too), seconds after its start.
func (s *session) current(ev protocol.Event) bool {
	return s.launched.IsZero() || ev.At.IsZero() || !ev.At.Before(s.launched)
}
