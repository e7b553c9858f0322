// Package loadtest is kndl loadtest: it loads a running Hub with simulated
// Runners (internal/testkit/simrunner) paired the ordinary way with the
// Owner's token, many Sessions on them, watchers on each Session's view
// and a steady stream of prompts, keeping a fraction of the Sessions awake
// and waking the others with prompts; then it reports prompt to first
// Event at a watcher, Events/s, the Hub's CPU and memory per Session and
// every error found. internal/cli runs it; its own test runs it small.
package loadtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/testkit/simrunner"
)

// Options are one load test's knobs.
type Options struct {
	HubURL string
	Token  string // the Owner's CLI token
	Repo   string // the Repo every Session is on
	// Runners, Sessions and Watchers (per Session) are the run's size.
	Runners, Sessions, Watchers int
	// PromptsPerMinute is each awake Session's pace.
	PromptsPerMinute float64
	// Duration is how long prompts go, after every Session started.
	Duration time.Duration
	// AwakeFraction of the Sessions are awake at any time; a prompt wakes
	// an asleep one, and one that had its prompts is put to sleep.
	AwakeFraction float64
	// Burst starts the Sessions Burst a minute; 0, as fast as the Hub
	// answers, 8 at a time.
	Burst int
	// PromptBytes is each prompt's size.
	PromptBytes int
	Script      simrunner.Script
	// AllowRemote lets the load go to a Hub not on loopback.
	AllowRemote bool
	// HubPID is the Hub's process, for its CPU and memory; 0 finds it by
	// the port it listens on when it is on this machine.
	HubPID int
	// StoreSize, if set, is the store's size now.
	StoreSize func(ctx context.Context) (int64, error)
	// During, if set, is called on a goroutine of its own half way
	// through the prompts' phase: the standby's test kills the Hub there.
	During func(ctx context.Context)
	// Progress gets a line every 10 s.
	Progress io.Writer
	Log      *slog.Logger
}

// PromptsPerWake is how many prompts an awake Session takes before it is
// put to sleep, and another woken in its place.
const PromptsPerWake = 2

// Check says what is wrong with o, naming the way out.
func (o Options) Check() error {
	switch {
	case o.Runners < 1 || o.Sessions < 1 || o.Watchers < 0:
		return errors.New("--runners and --sessions must be at least 1, --watchers at least 0")
	case o.PromptsPerMinute <= 0 || o.Duration <= 0:
		return errors.New("--prompts-per-minute and --duration must be above 0")
	case o.AwakeFraction <= 0 || o.AwakeFraction > 1:
		return fmt.Errorf("--awake-fraction %g: give a fraction above 0 and at most 1, such as 0.1", o.AwakeFraction)
	case o.Burst < 0:
		return errors.New("--burst must be 0 (as fast as the Hub answers) or a count of starts a minute")
	}
	u, err := url.Parse(o.HubURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("the Hub's URL %q is not an http(s) URL: sign in with kndl login HUB_URL", o.HubURL)
	}
	if !o.AllowRemote && !loopback(u.Hostname()) {
		return fmt.Errorf("the Hub at %s is not on this machine's loopback, and a load test sends it a flood of traffic: run it against a Hub on 127.0.0.1, or pass --allow-remote if that Hub is yours to load", o.HubURL)
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Report is what a load test found.
type Report struct {
	Runners, Sessions, Watchers, Awake int
	Prompts                            int // sent in the prompts' phase
	// Latency is prompt to its Event at each watcher, over every watcher
	// of every prompt of the prompts' phase; Create the Hub's answer to
	// each Session's start.
	Latency, Create Quantiles
	// EventsPerSecond is Events the watchers received in the prompts'
	// phase, a second.
	EventsPerSecond float64
	Elapsed         time.Duration
	// The Hub's, when its process is on this machine (HubMeasured):
	// CPU in cores (millicores below) and resident memory per Session.
	HubMeasured                 bool
	CPUPerAwake, CPUPerAsleep   float64 // cores
	RSSPerAwake, RSSPerAsleep   int64   // bytes
	HubRSS                      int64
	StoreMeasured               bool
	StorePerSession             int64
	Reconnects, RunnerReconnect int
	// Unanswered is requests the Hub left unanswered (it went) and that
	// were made again, or found done, once a Hub answered.
	Unanswered int
	Errors     []string
	// Opened is, for each watcher, when each of its sockets' first
	// message came.
	Opened [][]time.Time
}

// Quantiles are a latency's p50, p99 and max over N samples.
type Quantiles struct {
	N             int
	P50, P99, Max time.Duration
}

func quantiles(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		return ds[max(0, min(len(ds)-1, int(math.Ceil(q*float64(len(ds))))-1))].Round(time.Millisecond)
	}
	return Quantiles{N: len(ds), P50: at(0.5), P99: at(0.99), Max: ds[len(ds)-1].Round(time.Millisecond)}
}

func (q Quantiles) String() string {
	return fmt.Sprintf("p50 %v, p99 %v, max %v (%d samples)", q.P50, q.P99, q.Max, q.N)
}

// Write prints the report for a person.
func (r Report) Write(w io.Writer) {
	fmt.Fprintf(w, "kndl loadtest: %d Sessions on %d simulated Runners, %d watchers each, %d awake at a time; %d prompts in %v\n",
		r.Sessions, r.Runners, r.Watchers, r.Awake, r.Prompts, r.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "  prompt to first Event at a watcher: %s\n", r.Latency)
	fmt.Fprintf(w, "  a Session's start answered: %s\n", r.Create)
	fmt.Fprintf(w, "  Events to watchers: %.0f/s; watchers' sockets dialled again: %d; Runners' connections dialled again: %d; requests unanswered, then settled: %d\n",
		r.EventsPerSecond, r.Reconnects, r.RunnerReconnect, r.Unanswered)
	if r.HubMeasured {
		fmt.Fprintf(w, "  the Hub: CPU %.1f millicores per awake Session, %.2f per asleep; resident memory %.2f MiB per awake Session, %.3f per asleep (%.0f MiB in all)\n",
			1000*r.CPUPerAwake, 1000*r.CPUPerAsleep, mib(r.RSSPerAwake), mib(r.RSSPerAsleep), mib(r.HubRSS))
	} else {
		fmt.Fprintln(w, "  the Hub's CPU and memory: not measured (its process is not on this machine, or not readable: run as its user or root; or it ended during the run)")
	}
	if r.StoreMeasured {
		fmt.Fprintf(w, "  the store: %.1f KiB per Session\n", float64(r.StorePerSession)/1024)
	}
	fmt.Fprintf(w, "  errors: %d\n", len(r.Errors))
	for _, e := range r.Errors {
		fmt.Fprintf(w, "    %s\n", e)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// run is one load test under way.
type run struct {
	o   Options
	c   *apiclient.Client
	log *slog.Logger
	pid int

	mu       sync.Mutex
	errs     []string
	sessions []*sess
	runners  []*simrunner.Runner
	lat      []time.Duration
	creates  []time.Duration
	prompts  int
	awake    int
	// unanswered counts requests the Hub left unanswered (Report's).
	unanswered int
}

// sess is one Session of the run.
type sess struct {
	r        *run
	id       string
	runner   *simrunner.Runner
	watchers []*watcher
	ended    chan struct{} // each turn_end, as its first watcher sees it

	mu   sync.Mutex
	sent []string // every prompt sent, in order
}

func (s *sess) prompt(j int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j < len(s.sent) {
		return s.sent[j]
	}
	return ""
}

func (r *run) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 1000 {
		r.errs = append(r.errs, err.Error())
	}
	r.log.Warn("load test error", "err", err)
}

// Run runs a load test and reports it. Its error is one that stopped it;
// what it found wrong is in the Report's Errors.
func Run(ctx context.Context, o Options) (Report, error) {
	if err := o.Check(); err != nil {
		return Report{}, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.PromptBytes == 0 {
		o.PromptBytes = 200
	}
	if o.Script.Events == 0 {
		o.Script = simrunner.DefaultScript
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	r := &run{o: o, log: o.Log, c: &apiclient.Client{BaseURL: o.HubURL, Token: o.Token, HTTP: hc}, pid: o.HubPID}
	if r.pid == 0 {
		if u, _ := url.Parse(o.HubURL); loopback(u.Hostname()) {
			r.pid = listenerPID(port(u))
		}
	}
	if err := r.owner(ctx); err != nil {
		return Report{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Last, the Runners revoked once they and the watchers stopped.
	defer r.unpair(ctx)
	defer wg.Wait()
	defer cancel()
	if err := r.pair(ctx, &wg); err != nil {
		return Report{}, err
	}
	u0, measured := r.usage()
	store0 := r.storeSize(ctx)
	start := time.Now()
	stopProgress := r.progress(ctx, start)
	defer stopProgress()
	if err := r.start(ctx, &wg); err != nil {
		return Report{}, err
	}
	// All asleep: what the Hub holds and spends for them, over a window
	// (a measuring interval, not a wait).
	u1, _ := r.usage()
	pause(ctx, 5*time.Second)
	u2, _ := r.usage()
	awake := max(1, int(math.Round(o.AwakeFraction*float64(o.Sessions))))
	r.mu.Lock()
	r.awake = awake
	r.mu.Unlock()
	phase := time.Now()
	events0 := r.events()
	during := r.during(ctx, o.Duration/2)
	r.prompt(ctx, awake, phase.Add(o.Duration))
	<-during
	dur := time.Since(phase)
	events1 := r.events()
	u3, alive := r.usage()
	r.check(ctx)

	rep := Report{Runners: o.Runners, Sessions: o.Sessions, Watchers: o.Watchers, Awake: awake, Elapsed: time.Since(start)}
	r.mu.Lock()
	rep.Prompts, rep.Errors, rep.Unanswered = r.prompts, append([]string(nil), r.errs...), r.unanswered
	rep.Latency, rep.Create = quantiles(r.lat), quantiles(r.creates)
	r.mu.Unlock()
	rep.EventsPerSecond = float64(events1-events0) / dur.Seconds()
	for _, s := range r.sessions {
		for _, w := range s.watchers {
			w.mu.Lock()
			rep.Reconnects += w.reconnects
			rep.Opened = append(rep.Opened, w.opened)
			w.mu.Unlock()
		}
	}
	for _, rn := range r.runners {
		rep.RunnerReconnect += rn.Stats().Welcomes - 1
		for _, err := range rn.Errors() {
			rep.Errors = append(rep.Errors, err.Error())
		}
	}
	if measured && alive { // not across a Hub killed and taken over
		n := float64(o.Sessions)
		rep.HubMeasured = true
		rep.CPUPerAsleep = (u2.cpu - u1.cpu).Seconds() / 5 / n
		// The prompts' CPU is the awake Sessions' (the asleep ones' is
		// a rounding error beside it).
		rep.CPUPerAwake = (u3.cpu - u2.cpu).Seconds() / dur.Seconds() / float64(awake)
		rep.RSSPerAsleep = (u2.rss - u0.rss) / int64(o.Sessions)
		rep.RSSPerAwake = (u3.rss - u2.rss) / int64(awake)
		rep.HubRSS = u3.rss
	}
	if o.StoreSize != nil {
		rep.StoreMeasured = true
		rep.StorePerSession = (r.storeSize(ctx) - store0) / int64(o.Sessions)
	}
	return rep, nil
}

// owner refuses a token not the Hub's Owner's: a load test floods the
// Hub, which only its Owner may decide.
func (r *run) owner(ctx context.Context) error {
	a, err := r.c.Account(ctx)
	if err != nil {
		return err
	}
	ms, err := r.c.Members(ctx)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.ID == a.ID && (m.IsOwner || m.IsDev) {
			return nil
		}
	}
	return fmt.Errorf("%s is not the Hub's Owner, and only the Owner may load-test it: sign in as the Owner (kndl login)", a.Name)
}

func port(u *url.URL) int {
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

func (r *run) usage() (usage, bool) {
	if r.pid == 0 {
		return usage{}, false
	}
	u, err := procUsage(r.pid)
	return u, err == nil
}

func (r *run) storeSize(ctx context.Context) int64 {
	if r.o.StoreSize == nil {
		return 0
	}
	n, err := r.o.StoreSize(ctx)
	if err != nil {
		r.fail(fmt.Errorf("the store's size: %w", err))
	}
	return n
}

// pair pairs the simulated Runners with the Owner's token, starts them,
// and waits until the Hub lists each connected.
func (r *run) pair(ctx context.Context, wg *sync.WaitGroup) error {
	tag := rand.Text()[:6]
	names := map[string]bool{}
	for i := range r.o.Runners {
		name := fmt.Sprintf("load-%s-%d", tag, i)
		cr, err := r.c.PairRunner(ctx, name)
		if err != nil {
			return fmt.Errorf("pair a simulated Runner with the Owner's token: %w", err)
		}
		names[name] = true
		sr := simrunner.New(simrunner.Config{HubURL: r.o.HubURL, Token: cr.Token, Name: name,
			Capacity: r.o.Sessions, Script: r.o.Script, Log: r.log})
		r.runners = append(r.runners, sr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sr.Run(ctx); err != nil {
				r.fail(fmt.Errorf("simulated Runner %s: %w", name, err))
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs, err := r.c.Runners(ctx)
		if err != nil {
			return err
		}
		up := 0
		for _, rn := range rs {
			if names[rn.Name] && rn.Connected {
				up++
			}
		}
		if up == len(names) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of the %d simulated Runners connected in 30 s", up, len(names))
		}
		pause(ctx, 100*time.Millisecond)
	}
}

// unpair revokes the simulated Runners, which puts their Sessions to
// sleep.
func (r *run) unpair(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rs, err := r.c.Runners(ctx)
	if err != nil {
		r.log.Warn("list the Runners to revoke the simulated ones", "err", err)
		return
	}
	for _, rn := range rs {
		for _, sr := range r.runners {
			if sr.Name() == rn.Name {
				if err := r.c.RevokeRunner(ctx, rn.ID); err != nil {
					r.log.Warn("revoke a simulated Runner", "runner", rn.Name, "err", err)
				}
			}
		}
	}
}

// start starts every Session with its first prompt, Burst a minute or as
// fast as the Hub answers, opens its watchers, and puts it to sleep once
// its first Turn ended.
func (r *run) start(ctx context.Context, wg *sync.WaitGroup) error {
	sem := make(chan struct{}, 8)
	var every time.Duration
	if r.o.Burst > 0 {
		every = time.Minute / time.Duration(r.o.Burst)
	}
	var started sync.WaitGroup
	t0 := time.Now()
	for i := range r.o.Sessions {
		if every > 0 {
			pause(ctx, time.Until(t0.Add(time.Duration(i)*every)))
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		started.Add(1)
		go func() {
			defer started.Done()
			s := r.open(ctx, wg, i)
			<-sem
			// Asleep once its first Turn ended: the run keeps only its
			// awake fraction awake, the starts too.
			if s != nil && r.turnEnd(ctx, s, 0) {
				r.sleep(ctx, s)
			}
		}()
	}
	started.Wait()
	return ctx.Err()
}

// open starts Session i with its first prompt and opens its watchers; nil
// if the Hub refused it.
func (r *run) open(ctx context.Context, wg *sync.WaitGroup, i int) *sess {
	s := &sess{r: r, runner: r.runners[i%len(r.runners)], ended: make(chan struct{}, 4)}
	s.sent = []string{simrunner.Prompt(0, r.o.PromptBytes)}
	at := time.Now()
	v, err := r.c.NewSession(ctx, api.NewSession{Repo: r.o.Repo, Prompt: s.sent[0], Runner: s.runner.Name()})
	if err != nil {
		r.fail(fmt.Errorf("start Session %d: %w", i, err))
		return nil
	}
	s.id = v.ID
	r.mu.Lock()
	r.creates = append(r.creates, time.Since(at))
	r.sessions = append(r.sessions, s)
	r.mu.Unlock()
	for k := range max(1, r.o.Watchers) {
		w := &watcher{s: s, prompts: map[int]time.Time{}}
		if k < r.o.Watchers {
			s.watchers = append(s.watchers, w)
		} // else: no watcher of the run's; this one only tells of the Turns' ends
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx, r.c, k == 0)
		}()
	}
	return s
}

// turnEnd waits for a Session's Turn to end, saying so when it does not in
// time.
func (r *run) turnEnd(ctx context.Context, s *sess, j int) bool {
	select {
	case <-s.ended:
		return true
	case <-ctx.Done():
		return false
	case <-time.After(2 * time.Minute):
		r.fail(fmt.Errorf("Session %s: prompt %d's Turn did not end within 2 minutes", s.id, j))
		return false
	}
}

func (r *run) sleep(ctx context.Context, s *sess) {
	err, again := r.reach(ctx, func() error { return r.c.Act(ctx, s.id, apiclient.Sleep) })
	if again && status(err) == http.StatusConflict {
		err = nil // not awake: the Hub that went had put it to sleep
	}
	if err != nil && ctx.Err() == nil {
		r.fail(fmt.Errorf("Session %s: put it to sleep: %w", s.id, err))
	}
}

// status is the Hub's answer's HTTP status in err, 0 for none.
func status(err error) int {
	var e *apiclient.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// takeover is how long a request waits for the Hub to answer again: a
// standby takes over within 10 s of the Hub's end.
const takeover = 30 * time.Second

// reach calls f until the Hub answers it, for up to takeover, and says
// whether f went unanswered before: then the Hub that went may have done
// it already.
func (r *run) reach(ctx context.Context, f func() error) (err error, again bool) {
	deadline := time.Now().Add(takeover)
	for {
		err = f()
		if err == nil || status(err) != 0 || ctx.Err() != nil || time.Now().After(deadline) {
			return err, again
		}
		if !again {
			r.unanswered1()
		}
		again = true
		pause(ctx, 200*time.Millisecond)
	}
}

func (r *run) unanswered1() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unanswered++
}

// during calls Options.During after d, and closes what it returns once it
// has returned.
func (r *run) during(ctx context.Context, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r.o.During == nil {
			return
		}
		if pause(ctx, d); ctx.Err() == nil {
			r.o.During(ctx)
		}
	}()
	return done
}

// prompt keeps awake Sessions busy until end: each of awake slots takes
// the next asleep Session, wakes it with a prompt, gives it
// PromptsPerWake prompts PromptsPerMinute apart, and puts it to sleep.
func (r *run) prompt(ctx context.Context, awake int, end time.Time) {
	queue := make(chan *sess, len(r.sessions))
	for _, s := range r.sessions {
		queue <- s
	}
	every := time.Duration(float64(time.Minute) / r.o.PromptsPerMinute)
	var wg sync.WaitGroup
	for slot := range awake {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now().Add(time.Duration(slot) * every / time.Duration(awake))
			for {
				var s *sess
				select {
				case s = <-queue:
				case <-ctx.Done():
					return
				}
				woken := false
				for range PromptsPerWake {
					pause(ctx, time.Until(next)) // the pace, not a wait for a condition
					if ctx.Err() != nil || time.Now().After(end) {
						break
					}
					next = next.Add(every)
					woken = true
					if !r.send(ctx, s) {
						break
					}
				}
				if woken {
					r.sleep(ctx, s)
				}
				queue <- s
				if ctx.Err() != nil || time.Now().After(end) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// send sends a Session its next prompt and waits for its Turn's end,
// then records each watcher's prompt to first Event.
func (r *run) send(ctx context.Context, s *sess) bool {
	s.mu.Lock()
	j := len(s.sent)
	text := simrunner.Prompt(j, r.o.PromptBytes)
	s.sent = append(s.sent, text)
	s.mu.Unlock()
	at := time.Now()
	if err := r.queue(ctx, s, text); err != nil {
		if ctx.Err() == nil {
			r.fail(fmt.Errorf("Session %s: prompt %d: %w", s.id, j, err))
		}
		return false
	}
	r.mu.Lock()
	r.prompts++
	r.mu.Unlock()
	if !r.turnEnd(ctx, s, j) {
		return false
	}
	for _, w := range s.watchers {
		w.mu.Lock()
		got, ok := w.prompts[j]
		w.mu.Unlock()
		if ok {
			r.mu.Lock()
			r.lat = append(r.lat, got.Sub(at))
			r.mu.Unlock()
		} else {
			// Not yet there: the check at the end says whether it came.
			r.log.Debug("a watcher has not yet got a prompt whose Turn ended", "session", s.id, "prompt", j)
		}
	}
	return true
}

// queue queues a prompt. When the Hub went without an answer, it asks
// the Hub that answers next whether the prompt was accepted, and sends it
// again only if not, so each is accepted once: accepted, it is in the
// Session's queue until its Runner took it (delivering included), so one
// not there, and not taken before that look, never was.
func (r *run) queue(ctx context.Context, s *sess, text string) error {
	_, err := r.c.QueuePrompt(ctx, s.id, api.PromptRequest{Text: text})
	if err == nil || status(err) != 0 || ctx.Err() != nil {
		return err
	}
	r.unanswered1()
	var v api.SessionView
	if err, _ := r.reach(ctx, func() (err error) { v, err = r.c.Session(ctx, s.id); return err }); err != nil {
		return err
	}
	// The Runner took it before the Hub moved it out of the queue.
	if slices.ContainsFunc(v.Queue, func(p api.Prompt) bool { return p.Text == text }) || slices.Contains(s.runner.Taken(s.id), text) {
		return nil
	}
	_, err = r.c.QueuePrompt(ctx, s.id, api.PromptRequest{Text: text})
	return err
}

// events is how many Events every watcher got so far.
func (r *run) events() int {
	n := 0
	for _, s := range r.sessions {
		for _, w := range s.watchers {
			w.mu.Lock()
			n += w.events
			w.mu.Unlock()
		}
	}
	return n
}

// check compares what arrived with what was sent: each Session's prompts
// at its Runner, once, in order, byte for byte; each watcher with every
// Event of the store and every prompt.
func (r *run) check(ctx context.Context) {
	for _, s := range r.sessions {
		s.mu.Lock()
		sent := slices.Clone(s.sent)
		s.mu.Unlock()
		if got := s.runner.Taken(s.id); !slices.Equal(got, sent) {
			r.fail(fmt.Errorf("Session %s: its Runner took %d prompts, %d sent, or not the same bytes in the same order (%s)", s.id, len(got), len(sent), r.where(ctx, s)))
		}
		evs, err := r.c.Events(ctx, s.id)
		if err != nil {
			r.fail(fmt.Errorf("Session %s: its Events: %w", s.id, err))
			continue
		}
		var last int64
		if len(evs) > 0 {
			last = evs[len(evs)-1].Seq
		}
		for k, w := range s.watchers {
			deadline := time.Now().Add(10 * time.Second)
			for w.lastSeq() < last && time.Now().Before(deadline) {
				pause(ctx, 50*time.Millisecond)
			}
			w.mu.Lock()
			switch {
			case w.err != nil:
				r.fail(w.err)
			case w.last != last:
				r.fail(fmt.Errorf("Session %s: watcher %d got Events up to %d, the store has %d", s.id, k, w.last, last))
			case len(w.prompts) != len(sent):
				r.fail(fmt.Errorf("Session %s: watcher %d got %d prompts, %d sent", s.id, k, len(w.prompts), len(sent)))
			}
			w.mu.Unlock()
		}
	}
}

// where says where a Session is and what its queue holds, for an error.
func (r *run) where(ctx context.Context, s *sess) string {
	v, err := r.c.Session(ctx, s.id)
	if err != nil {
		return err.Error()
	}
	states := make([]string, len(v.Queue))
	for i, p := range v.Queue {
		states[i] = p.State
	}
	return fmt.Sprintf("the Hub has it %s, its queue %v", v.State, states)
}

// progress writes a line every 10 s until its stop is called.
func (r *run) progress(ctx context.Context, start time.Time) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			r.mu.Lock()
			started, prompts, errs, lat := len(r.sessions), r.prompts, len(r.errs), quantiles(slices.Clone(r.lat))
			r.mu.Unlock()
			awake, turns := 0, 0
			for _, rn := range r.runners {
				st := rn.Stats()
				awake, turns = awake+st.Awake, turns+st.Turns
			}
			fmt.Fprintf(r.o.Progress, "%v: %d Sessions started, %d awake; %d prompts sent, %d Turns ended; prompt to first Event %s; %d errors\n",
				time.Since(start).Round(time.Second), started, awake, prompts, turns, lat, errs)
		}
	}()
	return func() { cancel(); <-done }
}
