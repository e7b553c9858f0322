package session

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// Requester is a connected Runner, as the owner asks it things.
type Requester interface {
	Request(ctx context.Context, typ string, body, reply any) error
}

// Runners finds a connected Runner by id; it returns nil for one that is
// not connected.
type Runners interface {
	Runner(id string) Requester
	// Models is the table of models a connected Runner reported in its
	// hello; empty for one not connected.
	Models(id string) claude.Table
}

// Redactor masks a Session's values in its Events and in what the Owner
// writes about it, before they are stored or shown.
type Redactor interface {
	RedactEvents(ctx context.Context, sessionID string, evs []protocol.Event) error
	RedactText(ctx context.Context, sessionID, text string) string
}

// Effects is told what happened to a Session, for what lives outside the
// Owner: each listener ends its own part. Its methods are called once the
// Session moved (moveOn), off its loop.
type Effects interface {
	// Stopped: no Claude Code runs for the Session any more; it went
	// Asleep, Failed or Archived.
	Stopped(sessionID string)
	// LeftActive: the Session left Active, for Frozen too.
	LeftActive(sessionID string)
	// Recorded: the Session's Events, redacted, were stored and sent to
	// its watchers. Called with no Owner lock but the Session's order
	// held, so in the order they were numbered.
	Recorded(sessionID string, evs []protocol.Event)
}

// noEffects is the Effects of an Owner given none.
type noEffects struct{}

func (noEffects) Stopped(string)                    {}
func (noEffects) LeftActive(string)                 {}
func (noEffects) Recorded(string, []protocol.Event) {}

// Sealer seals what the store keeps of a person's words, under
// HUB_SECRETS_KEY, bound to ad (seal.Box is one).
type Sealer interface {
	Seal(plain []byte, ad string) []byte
	Open(sealed []byte, ad string) ([]byte, error)
}

// Environments says what a Session starts on: its Repo's current
// Environment version, recorded as the Session's (environment.Service).
type Environments interface {
	ForStart(ctx context.Context, sessionID, repoID string) (*protocol.Environment, error)
}

// Options configure an Owner. Zero durations take the defaults named.
type Options struct {
	Store    *store.Domains
	Runners  Runners
	Redactor Redactor
	// Environments is nil in tests that need only the Runner's defaults.
	Environments Environments
	// Sealer seals prompts at rest: a person may paste a credential into
	// one, and it must reach Claude exactly.
	Sealer Sealer
	Logger *slog.Logger
	// Idle is how long a Session with no Turn running and nothing queued
	// stays awake without Keep awake. HUB_SESSION_IDLE, default 30 min.
	Idle time.Duration
	// DeliveryDeadline is how long the Runner has to get a prompt taken
	// by Claude Code, typing it again as often as it must, before the
	// prompt goes back to the head of the queue. Default 45 s.
	DeliveryDeadline time.Duration
	// RetryMin and RetryMax bound the backoff between retries of a start
	// that failed for a cause a retry may mend; RetryTries bounds them.
	// Defaults 5 s, 5 min and 8.
	RetryMin, RetryMax time.Duration
	RetryTries         int
	// EventsMax bounds what a Session's Runner's Events cost the Hub's
	// store (budget.go), in all, and a thirty-second of it per minute.
	// HUB_SESSION_EVENTS_MAX, default 1 GiB.
	EventsMax int64
	// Now is the clock of the Event budget's minutes; nil for time.Now.
	// A test turns it to let minutes pass.
	Now func() time.Time
	// Effects is told when a Session stops running or leaves Active, and
	// of the Events it records. Nil: nobody is told.
	Effects Effects
	// MCPServers records, as a run of a Session starts, the Installations
	// it runs with, and returns them for the Runner (the Gateway's
	// Prepare). An error fails the start with its message. Nil: none.
	MCPServers func(ctx context.Context, s store.Session) ([]protocol.MCPServer, error)
	// Metrics counts Turns and times prompt delivery (internal/metrics
	// is one). Nil: nothing is counted.
	Metrics Metrics
	// MemberMaxAwake is how many of a Member's Sessions may be awake at
	// once; a start or wake past it waits in line (limits.go).
	// HUB_MEMBER_MAX_AWAKE, 0 for no limit.
	MemberMaxAwake int
	// MemberMaxSpend is what one Member's Sessions may spend in a day
	// (UTC), in US dollars, as the price table estimates the relay's
	// counts (spend.go). HUB_MEMBER_MAX_SPEND, 0 for no cap.
	MemberMaxSpend float64
	// Limited is told, with the history's words, when a Turn limit put a
	// triggered Session to sleep: for its GitHub thread. Nil: nobody.
	Limited func(sessionID, text string)
	// Faulted is told of each fault the Owner names (alarm.go), after
	// it is logged and counted: a test fails on it. Nil: nobody.
	Faulted func(sessionID, kind, what string)
}

// Metrics is told of the Turns and deliveries the Owner sees.
type Metrics interface {
	TurnStarted()
	TurnEnded()
	// SessionFault counts a fault of kind the Owner named (alarm.go).
	SessionFault(kind string)
	// PromptDelivered is how long a prompt took from queued to taken.
	PromptDelivered(time.Duration)
}

// uncounted is the Metrics of an Owner given none.
type uncounted struct{}

func (uncounted) TurnStarted()                  {}
func (uncounted) TurnEnded()                    {}
func (uncounted) SessionFault(string)           {}
func (uncounted) PromptDelivered(time.Duration) {}

// Owner owns every Session's state; its methods are the package's API,
// safe to call from any goroutine, each handing the call to the part that
// owns what it changes (api.go), or asking the Runner itself (StopTurn,
// Answer, StopSubagent, Egress) and the loop (Activity). The parts hold their own state and
// share only deps: life (life.go, move.go, act.go) the Session's life,
// whose moves are steps of its loop; queue (queue.go) the prompts and their delivery;
// limits (limits.go, spend.go) the caps and the Member's line; budgets
// (budget.go) the Event budget; reports (runner.go) what a Runner says;
// sweep (idle.go, alarm.go) the idle sleep and the alarm; stream
// (stream.go) the watchers and each Session's order; runs (loop.go) each
// awake Session's loop, which alone holds its run state.
type Owner struct {
	opts    Options
	store   stores
	g       *group
	runs    *runs
	stream  *stream
	life    *life
	queue   *queue
	limits  *limits
	reports *reports
}

// deps are what every part of the Owner shares, set once by New.
type deps struct {
	opts  Options
	store stores
	log   *slog.Logger
	*group
	*stream
	runs  *runs
	moves *moves // a Session's life moves, as steps of its loop
}

// stores are the parts of the store the Owner uses: its domain types,
// not every domain of store.Domains.
type stores struct {
	Sessions *store.Sessions
	Prompts  *store.Prompts
	Limits   *store.Limits
	Repos    *store.Repos
	Runners  *store.Runners
	Usage    *store.UsageLog
}

// storesOf picks from st what the Owner uses; none for a nil st (a test
// of the loop alone).
func storesOf(st *store.Domains) stores {
	if st == nil {
		return stores{}
	}
	return stores{Sessions: st.Sessions, Prompts: st.Prompts, Limits: st.Limits, Repos: st.Repos, Runners: st.Runners, Usage: st.Usage}
}

// group is the goroutines and timers of an Owner, which Close ends and
// waits for.
type group struct {
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wgMu   sync.Mutex // no goroutine is added once Close has begun
	wg     sync.WaitGroup
	timers map[*time.Timer]struct{} // armed by after and not yet fired, under wgMu
}

// run is what the Hub knows of a Session while it has a loop: where
// Claude Code is in its Turns, which prompt is on its way, which move of
// its life waits on the Runner. It is never stored: after a Hub restart
// the Session's Runner reports it again. Only its loop (loop.go) reads or
// writes it; it is made afresh when the Session stops being awake (reset).
type run struct {
	// phase is what its Claude Code is doing (phase.go); asked is the id
	// of the question its Creator may answer through the Hub while it is
	// asking.
	phase phase
	asked string
	// before is the phase a move waiting on the Runner left, for an
	// answer that refuses it (act.go's ask).
	before phase
	// pending are the moves of its life asked while one waits on the
	// Runner, in order (act.go).
	pending []queuedMove
	// launched is the start on its way to the Runner (life.launch): the
	// answer of an older one moves nothing.
	launched uint64
	// trail is the last moves of the run and its delivery, for a fault.
	trail trail
	// delivery is where the prompt on its way is (delivery.go).
	delivery delivery
	// since is the idle clock: when the Hub last sent the Session a
	// prompt, queued one, woke it, or heard the Turn of a prompt it sent
	// end (once a prompt: owed is set while that Turn is not heard to
	// end). Nothing the Sandbox says moves it otherwise (limits.go).
	since time.Time
	owed  bool
	// typed is set when the Creator types in the terminal, until a Turn
	// begins: a Turn typed there keeps the Session awake as one the Hub
	// sent a prompt for does (Typed).
	typed bool
	// counted is the last prompt counted as a Turn, so one typed again
	// is not counted twice.
	counted string
	// awakeAt is when this run's time toward its Hours began counting;
	// cut is armed to stop a triggered Session where they run out
	// (limits.go).
	awakeAt time.Time
	cut     *time.Timer
	// resync is set while a Turn taken back from a Runner may have ended
	// unheard: the transcript's next turn_end ends it.
	resync bool
	// budget is its Event accounting (budget.go).
	budget budget
	// agents are the subagents the transcript says run, by agent id.
	agents map[string]*subagent
	// turnAt is when the Turn that runs began, as the Hub heard, and
	// busyBy who told it; heard is when the Hub last recorded an Event of
	// the Session. The alarm (alarm.go) last looked at its queue at
	// looked, and raised is set once it has named this Turn's fault.
	turnAt        time.Time
	busyBy        string
	heard, looked time.Time
	raised        bool
}

// reset makes the run afresh for a Session that stops being awake,
// keeping its phase, its trail and the moves that wait.
func (r *run) reset() {
	*r = run{phase: r.phase, trail: r.trail, pending: r.pending, since: time.Now()}
}

// settled reports whether Claude Code is up with no question open, nothing
// on its way and no sleep under way.
func (r *run) settled() bool {
	return (r.phase == idle || r.phase == turn) && !r.delivery.onItsWay()
}

// waitsForPrompt reports whether the run is settled between Turns: the
// next prompt may go, and with none queued the Session is idle.
func (r *run) waitsForPrompt() bool { return r.phase == idle && !r.delivery.onItsWay() }

// began marks a Turn begun, as src told first, and reports whether it
// began now (a Turn already running, or no Claude Code up, moves
// nothing).
func (r *run) began(src string) bool {
	if r.phase == turn {
		return false
	}
	was := r.phase
	if !r.to(turn, "begun, as "+src+" told") {
		return false
	}
	if was == idle {
		r.busyBy, r.raised, r.turnAt = src, false, time.Now()
		return true
	}
	return false // an answer: the same Turn runs on
}

// idle reports whether the run may count as idle: Claude Code up, no sleep
// under way, nothing on its way, and no prompt the Hub sent whose Turn is
// still to end. A Turn or a question the Sandbox alone tells of keeps no
// Session awake.
func (r *run) idle() bool {
	return r.up() && !r.delivery.onItsWay() && !r.owed
}

// Update is one message of a Session's live stream: a new Event, or word
// that the Session, its queue or what it is doing changed (read them
// again).
type Update struct {
	ID      string // the Session's
	Event   *store.Event
	Changed bool
}

// All is the id to Subscribe to for every Session's changes (not their
// Events): the Sessions list.
const All = "*"

// New makes an Owner. Call Recover once the store is open and before any
// Runner connects, and Close when done.
func New(opts Options) *Owner {
	if opts.Idle <= 0 {
		opts.Idle = 30 * time.Minute
	}
	if opts.EventsMax <= 0 {
		opts.EventsMax = 1 << 30
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DeliveryDeadline <= 0 {
		opts.DeliveryDeadline = 45 * time.Second
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = 5 * time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 5 * time.Minute
	}
	if opts.RetryTries <= 0 {
		opts.RetryTries = 8
	}
	if opts.Effects == nil {
		opts.Effects = noEffects{}
	}
	if opts.Metrics == nil {
		opts.Metrics = uncounted{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &group{ctx: ctx, cancel: cancel, timers: map[*time.Timer]struct{}{}}
	log := opts.Logger.With("component", "session")
	rs := &runs{g: g, log: log, metrics: opts.Metrics, faulted: opts.Faulted, loops: map[string]*loop{}}
	sts := storesOf(opts.Store)
	st := &stream{events: sts.Sessions, redactor: opts.Redactor, effects: opts.Effects, log: log, heard: rs.heard,
		subs: map[string]map[chan Update]struct{}{}, order: map[string]seqLock{}}
	d := deps{opts: opts, store: sts, log: log, group: g, stream: st, runs: rs,
		moves: &moves{group: g, runs: rs, sessions: sts.Sessions, stream: st}}
	li := &limits{deps: d}
	lf := &life{deps: d, limits: li}
	q := &queue{deps: d, life: lf, limits: li}
	lf.queue, li.life = q, lf
	o := &Owner{opts: opts, store: sts, g: g, runs: rs, stream: st, life: lf, queue: q, limits: li,
		reports: &reports{deps: d, life: lf, queue: q, limits: li, budgets: &budgets{d}}}
	g.spawn((&sweep{deps: d, life: lf}).sweepIdle)
	return o
}

// Close stops every timer and waits for every goroutine the Owner
// started. A timer still armed (a prompt's or a start's retry, which may
// be minutes off) is stopped, not waited for.
func (o *Owner) Close() {
	// The time awake so far counts toward each Session's hours: the next
	// Hub counts on from its Runner's hello.
	for _, id := range o.runs.ids() {
		var d time.Duration
		o.runs.on(id, func(r *run) { d, _ = r.awakeDone() }) // its cut is stopped with the other timers
		o.limits.addTurnTime(o.g.ctx, id, d, nil)
	}
	o.g.close()
}

// close ends the group's context, stops its timers and waits for its
// goroutines.
func (o *group) close() {
	o.wgMu.Lock()
	o.cancel()
	armed := o.timers
	o.timers = map[*time.Timer]struct{}{}
	o.wgMu.Unlock()
	for t := range armed {
		if t.Stop() {
			o.wg.Done()
		}
	}
	o.wg.Wait()
}

// spawn runs f on a goroutine that Close waits for, and reports whether
// it did (not once Close has begun).
func (o *group) spawn(f func(ctx context.Context)) bool {
	if !o.add() {
		return false
	}
	go func() {
		defer o.wg.Done()
		f(o.ctx)
	}()
	return true
}

// add counts a goroutine Close waits for, which the caller starts and ends
// with wg.Done, and reports whether it may (not once Close has begun).
func (o *group) add() bool {
	o.wgMu.Lock()
	defer o.wgMu.Unlock()
	if o.ctx.Err() != nil {
		return false
	}
	o.wg.Add(1)
	return true
}

// after runs f after d on a goroutine Close waits for (or never, once
// closed: then it returns nil).
func (o *group) after(d time.Duration, f func(ctx context.Context)) *time.Timer {
	o.wgMu.Lock()
	defer o.wgMu.Unlock()
	if o.ctx.Err() != nil {
		return nil
	}
	o.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer o.wg.Done()
		o.wgMu.Lock() // held by after until t is set
		delete(o.timers, t)
		o.wgMu.Unlock()
		if o.ctx.Err() == nil {
			f(o.ctx)
		}
	})
	o.timers[t] = struct{}{}
	return t
}

// stopTimer stops a timer from after, releasing what Close waits for if
// it had not fired.
func (o *group) stopTimer(t *time.Timer) {
	if t == nil {
		return
	}
	o.wgMu.Lock()
	delete(o.timers, t)
	o.wgMu.Unlock()
	if t.Stop() {
		o.wg.Done()
	}
}

// Activity says what an awake Session is doing: "turn" while a Turn runs,
// "question" while Claude waits on a person, "" otherwise.
func (o *Owner) Activity(id string) string {
	var a string
	o.runs.on(id, func(r *run) { a = r.activity() })
	return a
}

// activity is Activity's answer.
func (r *run) activity() string {
	switch r.phase {
	case asking:
		return "question"
	case turn:
		return "turn"
	}
	return ""
}
