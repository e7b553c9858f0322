package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/gitrelay"
	"kndl.dev/kndl/internal/mod"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/relay"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/tmux"
	"kndl.dev/kndl/internal/warmpool"
)

// The warm pool (RUNNER_WARM_POOL): Sandboxes kept ready per Environment
// version used here in the last day, booted, the Repo cloned, the Start
// script run and Claude Code at its prompt, holding a placeholder the
// relay has no Creator's token for. A new Session takes one (fromPool):
// the relay hands it the pool run's token, the git relay opens, the
// Workspace pulls the Repo's head, and the Session token, the Creator's
// token and the model are bound. A pool Sandbox lives in
// $RUNNER_HOME/pool/<id>, its Sandbox named w-<id>; a Session that took
// one has sessions/<its id> link there, which is how its Sandbox and
// conversation are found after (sandboxOf, conversationOf).

// warm is the Runner's pool: the bookkeeping (warmpool), what each ready
// one holds, and the start each Environment version was last used by.
type warm struct {
	// r is the Runner whose Sandboxes, relays and Hub link it uses; on is
	// RUNNER_WARM_POOL above 0.
	r    *Runner
	on   bool
	pool *warmpool.Pool
	// starts counts Session starts under way, each up to its first
	// delivery's end (startSession): a fill waits for none.
	starts atomic.Int32
	kick   chan struct{}

	mu    sync.Mutex
	seeds map[warmpool.Key]seed
	ready map[string]pooled
}

// seed is what a fill of an Environment version starts from: the last new
// Session's start of it, its mod token and offsets left out, and its
// Variables, kept in memory alone.
type seed struct {
	req  protocol.SessionStart
	vars []protocol.Variable
	fit  warmpool.Fit
}

// pooled is what a ready pool Sandbox's Claude Code holds, and the
// control client the fill started it with, kept attached for the take (a
// new one's attach took 25 to 120 ms of a take): output passes its pane's
// output on to the Session that takes it; detach ends it.
type pooled struct {
	token, placeholder string
	addr               netip.Addr
	launched           time.Time
	ctl                *tmux.Control
	output             *paneSink
	detach             context.CancelFunc
}

// paneSink is a pool Sandbox's pane output, counted, and once it is taken
// passed on to the Session's terminal mirror, whose count of outputs goes
// on from it (the mirror's snapshots are placed by the control client's
// count).
type paneSink struct {
	mu sync.Mutex
	n  uint64
	to *mirror
}

func (p *paneSink) output(pane string, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.to != nil {
		p.to.output(pane, data)
	}
}

// handTo passes the output on to m from now.
func (p *paneSink) handTo(m *mirror) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m.mu.Lock()
	m.outputs = p.n
	m.mu.Unlock()
	p.to = m
}

// takeControl gives Session s the pool Sandbox's control client, if it is
// still attached.
func (p pooled) takeControl(s *session) bool {
	if p.ctl == nil {
		return false
	}
	select {
	case <-p.ctl.Done():
		return false
	default:
	}
	p.output.handTo(&s.mirror)
	s.ctl = p.ctl
	s.mirror.cols, s.mirror.rows = paneCols, paneRows
	context.AfterFunc(s.ctx, p.detach)
	return true
}

func newWarm(r *Runner, size, memoryMiB int) *warm {
	return &warm{r: r, on: size > 0, pool: warmpool.New(size, memoryMiB), kick: make(chan struct{}, 1),
		seeds: map[warmpool.Key]seed{}, ready: map[string]pooled{}}
}

// startDone ends a start under way, and wakes the filler.
func (w *warm) startDone() {
	w.starts.Add(-1)
	w.wake()
}

func (w *warm) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// poolKey is the Environment version a start is of.
func poolKey(req protocol.SessionStart) warmpool.Key {
	k := warmpool.Key{Repo: req.RepoURL}
	if req.Environment != nil {
		k.Version = req.Environment.Version
	}
	return k
}

// fitOf digests what a pool Sandbox must share with the Session taking it.
func fitOf(vars []protocol.Variable, mcp []protocol.MCPServer) warmpool.Fit {
	var vs, is []string
	for _, v := range vars {
		vs = append(vs, fmt.Sprintf("%q=%q %v", v.Name, v.Value, v.AtBuild))
	}
	for _, m := range mcp {
		is = append(is, m.Installation)
	}
	slices.Sort(vs)
	slices.Sort(is)
	digest := func(s []string) string {
		h := sha256.Sum256([]byte(strings.Join(s, "\n")))
		return hex.EncodeToString(h[:])
	}
	return warmpool.Fit{Variables: digest(vs), Installations: digest(is)}
}

// poolable says whether a new Session's start may use or seed the pool:
// not one whose Claude Code holds the Creator's token itself
// (HUB_CLAUDE_TOKEN=sandbox), nor one with Installations, whose MCP
// servers Claude Code connects to as it starts, through the Gateway, as
// the Session, nor one whose Environment names a user for Claude Code
// (a pool Sandbox's runs as root).
func poolable(req protocol.SessionStart, creds protocol.SessionCredentials) bool {
	return !req.Resume && !creds.ClaudeTokenInSandbox && len(req.MCPServers) == 0 && (req.Environment == nil || req.Environment.User == "")
}

func (w *warm) poolDir(id string) string { return filepath.Join(w.r.cfg.Home, "pool", id) }

// poolSandbox names a pool Sandbox.
func poolSandbox(id string) string { return "w-" + id }

// pooledAs is the file of a pool Sandbox's directory that names the
// Session it was handed to.
const pooledAs = "session"

// linkedPool returns the pool id a Session's directory links to, if any.
func linkedPool(sessionDir string) (string, bool) {
	target, err := os.Readlink(sessionDir)
	if err != nil {
		return "", false
	}
	return filepath.Base(target), true
}

// sandboxOf names Session id's Sandbox, its directory dir: its own, or
// the pool one it took.
func sandboxOf(dir, id string) string {
	if p, ok := linkedPool(dir); ok {
		return poolSandbox(p)
	}
	return sandboxID(id)
}

// conversationOf is Session id's Claude Code conversation, its directory
// dir: its own id, or the pool id its Claude Code started with.
func conversationOf(dir, id string) string {
	if p, ok := linkedPool(dir); ok {
		return p
	}
	return id
}

// fromPool binds a ready pool Sandbox to a new Session, if one fits: the
// others of its Environment version that don't fit are thrown away. It
// reports whether the Session now runs in one; on false s is as it was.
func (w *warm) fromPool(ctx context.Context, s *session, req protocol.SessionStart, creds protocol.SessionCredentials, logf func(string, ...any)) (bool, error) {
	r := w.r
	if !w.on || req.Resume || creds.ClaudeTokenInSandbox {
		return false, nil
	}
	if _, err := os.Lstat(s.dir); err == nil {
		return false, nil // a start tried before left its directory
	}
	e, stale := w.pool.Take(poolKey(req), fitOf(creds.Variables, req.MCPServers), req.Effort)
	if e != nil || len(stale) > 0 {
		defer w.reportPool()
	}
	for _, x := range stale {
		r.log.Info("a warm pool Sandbox no longer fits its Environment version's Variables or Installations; thrown away", "pool", x.ID)
		r.spawn(func() { w.dropPooled(context.WithoutCancel(ctx), x.ID) })
	}
	if e == nil {
		return false, nil // none, or none whose Fit (Installations among it) matches
	}
	w.mu.Lock()
	p := w.ready[e.ID]
	delete(w.ready, e.ID)
	w.mu.Unlock()
	if err := w.bindPooled(ctx, s, e, p, req, creds, logf); err != nil {
		if p.detach != nil {
			p.detach()
		}
		r.log.Warn("a warm pool Sandbox could not be bound; thrown away, the Session starts cold", "session", s.id, "pool", e.ID, "err", err)
		w.unbindPooled(ctx, s, e.ID)
		return false, nil
	}
	return true, nil
}

// bindPooled hands pool Sandbox e to Session s.
func (w *warm) bindPooled(ctx context.Context, s *session, e *warmpool.Entry, p pooled, req protocol.SessionStart, creds protocol.SessionCredentials, logf func(string, ...any)) error {
	r := w.r
	t := stepTimer{last: time.Now()}
	dir := w.poolDir(e.ID)
	if err := os.WriteFile(filepath.Join(dir, pooledAs), []byte(s.id), 0o600); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.dir), 0o700); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join("..", "pool", e.ID), s.dir); err != nil {
		return err
	}
	s.sandbox, s.conversation, s.launched = poolSandbox(e.ID), e.ID, p.launched
	if err := r.relay.Hand(e.ID, s.id); err != nil {
		return err
	}
	if err := r.relay.SetModToken(s.id, req.ModToken); err != nil {
		return err
	}
	if err := r.relay.Hold(s.id, creds.ClaudeToken, p.placeholder); err != nil {
		return err
	}
	r.egress.forget(e.ID)
	if err := r.judgeEgress(ctx, s, s.dir, req.Environment, true); err != nil {
		return err
	}
	t.step("relay")
	w.weigh(ctx, s.sandbox, sessionWeight)
	t.step("weight")
	s.ctx, s.cancel = context.WithCancel(r.life)
	// The Sandbox's git points at the relay since the fill (pointGit).
	if err := r.serveGit(s, req.RepoURL, req.Environment); err != nil {
		return err
	}
	firstToken := make(chan struct{})
	s.keepToken(firstToken)
	t.step("git relay")
	// The Repo's head is pulled, once the git relay holds the Session's
	// GitHub token, while the Runner attaches to Claude Code's pane and
	// switches its model: the one needs the network, the others the pane.
	pctx, stopPull := context.WithCancel(ctx)
	defer stopPull()
	pulled := make(chan error, 1)
	go func() {
		begun := time.Now()
		select {
		case <-firstToken:
		case <-pctx.Done():
			pulled <- pctx.Err()
			return
		}
		token := time.Since(begun)
		err := w.pullHead(pctx, s, req.RepoURL, p.token)
		t.beside("token", token)
		t.beside("head", time.Since(begun)-token)
		pulled <- err
	}()
	if !p.takeControl(s) {
		if _, err := s.attachPane(ctx); err != nil {
			stopPull()
			<-pulled // it writes in the directory unbindPooled removes
			return err
		}
	}
	t.step("pane")
	if req.Model != e.Model && req.Model != "" {
		got, err := s.deliver(ctx, protocol.SessionDeliver{SessionID: s.id, Text: "/model " + req.Model, Command: true, WithinMS: 15000})
		if err == nil && !got.Taken {
			err = errors.New(got.Why)
		}
		if err != nil {
			stopPull()
			<-pulled
			return fmt.Errorf("switch the model to %s: %w", req.Model, err)
		}
		t.step("model")
	}
	if err := <-pulled; err != nil {
		return err
	}
	t.step("waiting for the head")
	logf("started from the warm pool: Claude Code was waiting at its prompt (bound in %s)", &t)
	return nil
}

// stepTimer times a start's steps, for one line of its start log: those
// run in turn (step) and those run beside them (beside).
type stepTimer struct {
	mu      sync.Mutex
	last    time.Time
	total   time.Duration
	steps   []string
	besides []string
}

// step ends the step called name, begun at the last one's end.
func (t *stepTimer) step(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	d := now.Sub(t.last)
	t.last, t.total = now, t.total+d
	t.steps = append(t.steps, fmt.Sprintf("%s %d", name, d.Milliseconds()))
}

// beside records a step that took d beside the others.
func (t *stepTimer) beside(name string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.besides = append(t.besides, fmt.Sprintf("%s %d", name, d.Milliseconds()))
}

func (t *stepTimer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	line := fmt.Sprintf("%d ms: %s", t.total.Milliseconds(), strings.Join(t.steps, ", "))
	if len(t.besides) > 0 {
		line += "; beside them " + strings.Join(t.besides, ", ")
	}
	return line
}

// pullHead brings a pool Sandbox's Workspace to the Repo's head, in the
// Sandbox, through the git relay as the Session: the host's git never runs
// over what the Sandbox wrote. Where the Changes start from moves with it,
// taken only if it reads as a commit id: the Sandbox could write its own
// Workspace's history anyway. A Repo the git relay does not serve (a path
// on the Runner's host) was cloned at the fill and is taken as it is.
func (w *warm) pullHead(ctx context.Context, s *session, repo, token string) error {
	r := w.r
	if _, ok := gitrelay.RepoPath(repo); !ok {
		return nil
	}
	out, err := sandbox.Output(ctx, r.backend, s.sandbox, sandbox.Cmd{
		Args: []string{"sh", "-c", `git -C "$1" pull --ff-only --quiet && git -C "$1" rev-parse --verify --quiet 'HEAD^{commit}'`, "pull", workspaceDir},
		Env:  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "KNDL_MOD_TOKEN=" + token},
	})
	if err != nil {
		return fmt.Errorf("pull the Repo's head: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n") // git's warnings first, if any
	head := lines[len(lines)-1]
	if !commitID().MatchString(head) {
		return fmt.Errorf("pull the Repo's head: HEAD reads %q, not a commit id", head)
	}
	_, branch, err := readBase(filepath.Join(s.dir, baseFile))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir, baseFile), []byte(head+"\t"+branch+"\n"), 0o600)
}

var commitID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`) })

// unbindPooled undoes a bind that failed, and throws the pool Sandbox
// away: s is a Session about to start cold.
func (w *warm) unbindPooled(ctx context.Context, s *session, id string) {
	r := w.r
	if s.cancel != nil {
		s.cancel()
	}
	r.relay.Revoke(s.id)
	r.git.Close(s.id)
	r.egress.forget(s.id)
	os.Remove(s.dir)
	s.sandbox, s.conversation, s.ctl, s.ctx, s.cancel, s.launched = sandboxID(s.id), s.id, nil, nil, nil, time.Time{}
	s.tokenKept.Store(false)
	w.dropPooled(context.WithoutCancel(ctx), id)
}

// dropPooled removes a pool Sandbox that serves no Session.
func (w *warm) dropPooled(ctx context.Context, id string) {
	r := w.r
	w.mu.Lock()
	p, ok := w.ready[id]
	delete(w.ready, id)
	w.mu.Unlock()
	if ok && p.detach != nil {
		p.detach()
	}
	r.relay.Revoke(id)
	r.egress.forget(id)
	if err := r.backend.Remove(ctx, poolSandbox(id)); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		r.log.Warn("remove a warm pool Sandbox", "pool", id, "err", err)
	}
	os.RemoveAll(w.poolDir(id))
}

// seedPool records a new Session's start as its Environment version's
// latest, for fills, and wakes the filler.
func (w *warm) seedPool(req protocol.SessionStart, creds protocol.SessionCredentials) {
	if !w.on || !poolable(req, creds) {
		return
	}
	k := poolKey(req)
	req.ModToken, req.Offsets = "", nil
	w.mu.Lock()
	w.seeds[k] = seed{req: req, vars: creds.Variables, fit: fitOf(creds.Variables, req.MCPServers)}
	w.mu.Unlock()
	w.pool.Used(k, time.Now())
}

// fillPool keeps the pool full until ctx ends: after each start, once no
// start is under way, and every few minutes as versions age out.
func (w *warm) fillPool(ctx context.Context) {
	r := w.r
	for {
		select {
		case <-ctx.Done():
			for _, e := range w.pool.Drain() {
				r.relay.Revoke(e.ID) // its Sandbox is removed by the next Runner (adoptPool)
			}
			return
		case <-w.kick:
		case <-time.After(fillEvery):
		}
		for w.starts.Load() == 0 && ctx.Err() == nil {
			k, ok := w.pool.Next(time.Now(), w.poolMemory)
			if !ok {
				break
			}
			if err := w.fill(ctx, k); err != nil {
				r.log.Warn("a warm pool fill failed", "repo", k.Repo, "version", k.Version, "err", err)
				break // tried again after the next start, or fillEvery
			}
		}
	}
}

// fillEvery is how often the pool is looked at with no start to wake it.
const fillEvery = 5 * time.Minute

// poolMemory is what one pool Sandbox of k counts against the pool's bound:
// its Environment's memory, else a Session's share of the host's.
func (w *warm) poolMemory(k warmpool.Key) int {
	w.mu.Lock()
	sd := w.seeds[k]
	w.mu.Unlock()
	if m := resources(sd.req.Environment).MemoryMiB; m > 0 {
		return m
	}
	return SessionMemoryMiB
}

// fill makes one pool Sandbox of k from its seed, ending the fill Next
// began.
func (w *warm) fill(ctx context.Context, k warmpool.Key) error {
	r := w.r
	w.mu.Lock()
	sd := w.seeds[k]
	w.mu.Unlock()
	mem := w.poolMemory(k)
	id := uuid.NewString()
	start := time.Now()
	p, err := w.startPooled(ctx, id, sd)
	if err != nil {
		w.pool.Failed(k, mem)
		w.dropPooled(context.WithoutCancel(ctx), id)
		return err
	}
	e := &warmpool.Entry{ID: id, Key: k, Fit: sd.fit, Effort: sd.req.Effort, Model: sd.req.Model, MemoryMiB: mem}
	w.mu.Lock()
	w.ready[id] = p // before Ready: a Take may come at once
	w.mu.Unlock()
	w.pool.Ready(e, mem) // id is new: never one handed out before
	n, m := w.reportPool()
	r.log.Info("a warm pool Sandbox is ready", "repo", k.Repo, "version", k.Version, "in", time.Since(start).Round(time.Millisecond), "ready", n, "memory_mib", m)
	return nil
}

// reportPool tells the Hub what the pool holds now, for its /metrics, and
// returns it.
func (w *warm) reportPool() (ready, memoryMiB int) {
	r := w.r
	if !w.on {
		return 0, 0
	}
	ready, memoryMiB = w.pool.Stats()
	r.notify("", protocol.TypeRunnerPool, protocol.RunnerPool{Ready: ready, MemoryMiB: memoryMiB})
	return ready, memoryMiB
}

// startPooled makes pool Sandbox id as a Session's start would, up to
// Claude Code at its prompt, bound to no Session.
func (w *warm) startPooled(ctx context.Context, id string, sd seed) (pooled, error) {
	r := w.r
	req := sd.req
	dir := w.poolDir(id)
	logf := func(format string, args ...any) { r.log.Debug("warm pool: "+fmt.Sprintf(format, args...), "pool", id) }
	if err := os.MkdirAll(filepath.Join(dir, "mod"), 0o700); err != nil {
		return pooled{}, err
	}
	tok, err := r.clones.get(ctx, &r.link, req.SessionID, req.RepoURL)
	if err != nil {
		return pooled{}, err
	}
	if err := cloneWorkspace(ctx, &r.cfg.Outbound, req.RepoURL, tok, filepath.Join(dir, "workspace"), func(string) {}); err != nil {
		return pooled{}, err
	}
	bd, err := r.buildFor(ctx, req.RepoURL, req.Environment, sd.vars, logf, nil)
	if err != nil {
		return pooled{}, err
	}
	bin, err := (&claudeFetch{r: r, logf: logf}).result(ctx, bd.Musl)
	if err != nil {
		return pooled{}, err
	}
	sink := &paneSink{}
	s := &session{id: id, sandbox: poolSandbox(id), dir: dir, log: r.log, backend: r.backend, spawn: r.spawn, paneOutput: sink.output}
	if _, err := r.ensureSandbox(ctx, s, bd, bin, dir, req.Environment, logf); err != nil {
		return pooled{}, err
	}
	w.weigh(ctx, s.sandbox, poolWeight)
	st, err := r.backend.Status(ctx, s.sandbox)
	if err != nil {
		return pooled{}, err
	}
	var env []string
	for _, v := range sd.vars {
		env = append(env, v.Name+"="+v.Value)
	}
	login, err := runStart(ctx, r.backend, s.sandbox, req.Environment, bd, append(append(append([]string(nil), bd.LoginEnv...), cacheEnv...), env...), logf)
	if err != nil {
		return pooled{}, err
	}
	if err := pointGit(ctx, r.backend, s.sandbox, req.RepoURL); err != nil {
		return pooled{}, err
	}
	raw, _ := json.Marshal(login)
	if err := writeAtomic(filepath.Join(dir, loginEnvFile), raw); err != nil {
		return pooled{}, err
	}
	copyName := fmt.Sprintf("%d", time.Now().UnixNano())
	if err := freshMod(filepath.Join(dir, "mod"), copyName); err != nil {
		return pooled{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "mod", copyName, bashEnvFile), []byte(claude.BashEnvScript), 0o644); err != nil {
		return pooled{}, err
	}
	seeded := make(chan error, 1)
	_, err = sandbox.Output(ctx, r.backend, s.sandbox, sandbox.Cmd{Args: []string{kndlBin, "claude", "seed", claude.ConfigDir, workspaceDir}})
	seeded <- err
	placeholder := relay.Placeholder("")
	token := r.relay.Pool(id, st.Addr, placeholder)
	relayURL := "http://" + sandbox.RelayHost + ":" + relayPort(r.backend.Host())
	launch := claude.Launch{
		Binary: claude.MountDir + "/claude", Conversation: id, Model: req.Model, Effort: req.Effort,
		Base:      append(append([]string(nil), login...), env...),
		Own:       append(append(append([]string(nil), cacheEnv...), editorEnv), ghEnv(req.RepoURL, token)...),
		SessionID: id, ConfigDir: claude.ConfigDir, TZ: claude.LocalTimeZone(), RelayURL: relayURL, SessionToken: token,
		BashEnv: modDir + "/" + copyName + "/" + bashEnvFile, OAuthToken: placeholder, ModelEndpoint: relayURL + "/model/" + token,
	}
	for _, p := range mod.Plugins {
		launch.PluginDirs = append(launch.PluginDirs, modDir+"/"+copyName+"/"+p)
	}
	argv, cenv, err := launch.Command()
	if err != nil {
		return pooled{}, err
	}
	// Its control client stays attached for the Session that takes it.
	cctx, detach := context.WithCancel(ctx)
	kept := false
	defer func() {
		if !kept {
			detach()
		}
	}()
	if err := s.startClaude(cctx, argv, cenv, seeded); err != nil {
		return pooled{}, err
	}
	if err := s.waitReady(ctx); err != nil {
		return pooled{}, err
	}
	kept = true
	return pooled{token: token, placeholder: placeholder, addr: st.Addr, launched: s.launched, ctl: s.ctl, output: sink, detach: detach}, nil
}

// A pool Sandbox runs its Start script, starts Claude Code and waits at a
// tenth of a Session's CPU weight (the default), so a fill never slows a
// Session that runs; the Session that takes one puts it back.
const (
	poolWeight    = 10
	sessionWeight = 100
)

// weigh sets a Sandbox's CPU weight where the backend can.
func (w *warm) weigh(ctx context.Context, id string, weight int) {
	r := w.r
	wb, ok := r.backend.(sandbox.Weigher)
	if !ok {
		return
	}
	if err := wb.SetCPUWeight(ctx, id, weight); err != nil && !errors.Is(err, sandbox.ErrNotSupported) {
		r.log.Warn("set a Sandbox's CPU weight", "sandbox", id, "weight", weight, "err", err)
	}
}

// sweepPool removes what a fill cut short by a crash left: a pool
// directory handed to no Session, whose Sandbox adopt has removed.
func (w *warm) sweepPool() {
	r := w.r
	entries, _ := os.ReadDir(filepath.Join(r.cfg.Home, "pool"))
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(w.poolDir(e.Name()), pooledAs)); errors.Is(err, os.ErrNotExist) {
			os.RemoveAll(w.poolDir(e.Name()))
		}
	}
}

// adoptPool takes a pool Sandbox found running after a restart: one handed
// to a Session is that Session's (adopt attaches it); one never handed is
// removed, since its token died with the Runner that made it.
func (w *warm) adoptPool(ctx context.Context, st sandbox.Status) (sessionID string, ok bool) {
	r := w.r
	id, _ := strings.CutPrefix(st.ID, "w-")
	b, err := os.ReadFile(filepath.Join(w.poolDir(id), pooledAs))
	if sid := string(b); err == nil && protocol.ValidSessionID(sid) {
		if p, linked := linkedPool(r.sessionDir(sid)); linked && p == id {
			return sid, true
		}
	}
	r.log.Info("removing a warm pool Sandbox the Runner before made", "pool", id)
	w.dropPooled(ctx, id)
	return "", false
}
