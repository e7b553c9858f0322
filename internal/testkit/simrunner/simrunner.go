// Package simrunner is a simulated Runner for load tests: it pairs and
// connects as a Runner does (a Runner token, /runner/connect, the hello of
// protocol.Version) and runs many Sessions at once on internal/protocol's
// Conn, each a small script in place of a Sandbox and Claude Code: it
// takes a prompt, streams a Turn's Events at a set size and rate, now and
// then asks a question and waits for its answer, ends the Turn, and sleeps
// when told. It checks every prompt arrives once, in order and byte for
// byte (Prompt makes them). internal/loadtest and its tests import it.
package simrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// Script is the shape of every Turn a simulated Session runs.
type Script struct {
	// Events is how many Events a Turn streams between its turn_start and
	// its turn_end: text, a tool call and its result, in turn.
	Events int
	// EventBytes is the size of each one's text.
	EventBytes int
	// Every is the time between two of them: a model streaming.
	Every time.Duration
	// AskEvery makes every AskEvery-th Turn of a Session ask a question
	// half way and wait for its answer; 0 never asks.
	AskEvery int
}

// DefaultScript is a short Turn of a working Session: 12 Events of 600
// bytes, 80 ms apart (about a second), a question every fifth Turn.
var DefaultScript = Script{Events: 12, EventBytes: 600, Every: 80 * time.Millisecond, AskEvery: 5}

// Config is one simulated Runner.
type Config struct {
	HubURL string // the Hub's base URL, http://host:port
	Token  string // the Runner's token from the ordinary pairing (kndlr_…)
	Name   string
	// Capacity is how many Sessions it offers the Hub.
	Capacity int
	Script   Script
	Log      *slog.Logger
}

// Runner is a simulated Runner. Its zero value is not usable: use New.
type Runner struct {
	cfg  Config
	life context.Context // Run's
	// handling counts the connections whose handlers still run after
	// their end (a deliver sends its hook on the next one); Run's end
	// waits for them.
	handling sync.WaitGroup

	mu       sync.Mutex
	conn     *protocol.Conn
	awake    map[string]*session
	taken    map[string][]string // every prompt each Session took, in order, across wakes
	offsets  map[string]int64    // how far each Session's transcript was written
	errs     []error
	welcomes int
	turns    int
}

// New returns a Runner that Run connects.
func New(cfg Config) *Runner {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, awake: map[string]*session{}, taken: map[string][]string{}, offsets: map[string]int64{}}
}

// ErrRefused is Run's error when the Hub refuses the Runner's token.
var ErrRefused = errors.New("the Hub refused the Runner's token")

// Run keeps the Runner connected until ctx is done, dialling again after
// a lost connection as a Runner does, and returns nil then; or ErrRefused.
func (r *Runner) Run(ctx context.Context) error {
	r.life = ctx
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		welcomed, err := r.connect(ctx)
		if errors.Is(err, ErrRefused) {
			return err
		}
		if welcomed {
			wait = 100 * time.Millisecond
		}
		if ctx.Err() == nil {
			// A connection that was up ending is a Warn, as the Runner's,
			// with why (a Hub killed, a reset): a dial refused an Info.
			level := slog.LevelInfo
			if welcomed {
				level = slog.LevelWarn
			}
			r.cfg.Log.Log(ctx, level, "simulated runner: connection lost; dialling again", "runner", r.cfg.Name, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
	r.mu.Lock()
	for _, s := range r.awake {
		s.stop()
	}
	r.mu.Unlock()
	r.handling.Wait()
	return nil
}

// connect runs one connection until it ends, and reports whether the Hub
// welcomed it.
func (r *Runner) connect(ctx context.Context) (bool, error) {
	u := strings.Replace(strings.TrimSuffix(r.cfg.HubURL, "/"), "http", "ws", 1) + "/runner/connect"
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	ws, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + r.cfg.Token}}})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return false, fmt.Errorf("%w: pair it again", ErrRefused)
		}
		return false, err
	}
	c := protocol.NewConn(ws, r.cfg.Log)
	defer r.handling.Go(c.Wait) // its handlers may outlive it
	r.handle(c)
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx) }()
	var w protocol.Welcome
	reported := r.running()
	err = c.Request(ctx, protocol.TypeHello, protocol.Hello{
		MinVersion: protocol.Version, MaxVersion: protocol.Version, Name: r.cfg.Name,
		Host:     protocol.HostInfo{Backend: "simulated", Capacity: protocol.Amount{Sessions: r.cfg.Capacity}},
		Sessions: reported, Clock: time.Now(), Models: claude.Models(), Build: protocol.ThisBuild(),
	}, &w)
	if err != nil {
		c.Close(websocket.StatusNormalClosure, "hello failed")
		<-served
		return false, fmt.Errorf("hello: %w", err)
	}
	r.mu.Lock()
	r.conn = c
	r.welcomes++
	back := map[string]bool{}
	for _, s := range w.Sessions {
		back[s.SessionID] = true
	}
	// Those reported that the Hub did not take back stop, as a Runner's
	// do; not one the Hub started since the hello (a prompt woke it),
	// which the Hub runs.
	for _, id := range reported {
		if s := r.awake[id]; s != nil && !back[id] {
			s.stop()
			delete(r.awake, id)
		}
	}
	r.mu.Unlock()
	err = <-served
	r.mu.Lock()
	if r.conn == c {
		r.conn = nil
	}
	r.mu.Unlock()
	return true, err
}

func (r *Runner) running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.awake {
		ids = append(ids, id)
	}
	return ids
}

// handle registers what the Hub may ask.
func (r *Runner) handle(c *protocol.Conn) {
	c.Handle(protocol.TypeSessionStart, false, decoded(func(ctx context.Context, req protocol.SessionStart) (any, error) {
		return nil, r.start(ctx, c, req)
	}))
	c.Handle(protocol.TypeSessionDeliver, false, decoded(func(ctx context.Context, req protocol.SessionDeliver) (any, error) {
		s := r.session(req.SessionID)
		if s == nil {
			return nil, fmt.Errorf("session %s is not running here: %w", req.SessionID, errdefs.ErrNotFound)
		}
		return s.deliver(ctx, req)
	}))
	c.Handle(protocol.TypeSessionAnswer, false, decoded(func(ctx context.Context, req protocol.SessionAnswer) (any, error) {
		s := r.session(req.SessionID)
		if s == nil {
			return nil, fmt.Errorf("session %s is not running here: %w", req.SessionID, errdefs.ErrNotFound)
		}
		return nil, s.answer(req)
	}))
	c.Handle(protocol.TypeSessionStop, false, decoded(func(ctx context.Context, req protocol.SessionRef) (any, error) {
		r.mu.Lock()
		s := r.awake[req.SessionID]
		delete(r.awake, req.SessionID)
		r.mu.Unlock()
		if s != nil {
			s.stop()
		}
		return nil, nil
	}))
	for _, typ := range []string{protocol.TypeSessionStopTurn, protocol.TypeSessionArchive, protocol.TypeSessionRestore,
		protocol.TypeSessionCapped, protocol.TypeSessionStopSubagent, protocol.TypeSessionEgress} {
		c.Handle(typ, false, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	}
}

// decoded is a Handler that decodes its request's body into T first.
func decoded[T any](h func(ctx context.Context, req T) (any, error)) protocol.Handler {
	return func(ctx context.Context, body json.RawMessage) (any, error) {
		var req T
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("%v: %w", err, errdefs.ErrInvalid)
		}
		return h(ctx, req)
	}
}

func (r *Runner) session(id string) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.awake[id]
}

// start starts (or wakes) a Session: it asks for its credentials as a
// Runner does, tells the Hub it is ready, and answers once the Hub took
// that.
func (r *Runner) start(ctx context.Context, c *protocol.Conn, req protocol.SessionStart) error {
	if !protocol.ValidSessionID(req.SessionID) {
		return fmt.Errorf("session id %q: %w", req.SessionID, errdefs.ErrInvalid)
	}
	var creds protocol.SessionCredentials
	if err := c.Request(ctx, protocol.TypeSessionCredentials, protocol.SessionRef{SessionID: req.SessionID}, &creds); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	r.mu.Lock()
	if old := r.awake[req.SessionID]; old != nil {
		old.stop()
	}
	s := newSession(r, req.SessionID)
	r.awake[req.SessionID] = s
	r.mu.Unlock()
	return s.send(ctx, protocol.SessionEvents{Events: []protocol.Event{{Kind: protocol.EventReady, Text: "simulated"}}})
}

// conn is the connection up now, or nil.
func (r *Runner) current() *protocol.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conn
}

// fail records what the Runner found wrong.
func (r *Runner) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// Errors is what the Runner found wrong so far: a prompt out of order,
// twice or changed, a message the Hub refused.
func (r *Runner) Errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// Taken is every prompt the Session took here, in order, across its
// wakes.
func (r *Runner) Taken(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.taken[id]...)
}

// Stats is what a Runner has done so far.
type Stats struct {
	Awake    int // Sessions running now
	Turns    int // Turns whose turn_end was sent
	Welcomes int // connections the Hub welcomed
}

// Stats says what the Runner has done so far.
func (r *Runner) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{Awake: len(r.awake), Turns: r.turns, Welcomes: r.welcomes}
}

// Prompt is the j-th prompt (from 0, the Session's first) of a load
// test's Session, about size bytes: its number and its body's checksum
// lead, so the Runner that takes it checks it came whole and in its turn.
func Prompt(j, size int) string {
	unit := fmt.Sprintf("prompt %d of a simulated Session, ", j)
	body := strings.Repeat(unit, max(1, size/len(unit)))
	return fmt.Sprintf("kndl-load p%d crc%08x %s", j, crc32.ChecksumIEEE([]byte(body)), body)
}

// checkPrompt says what is wrong with text as the Session's next prompt,
// having taken n before it.
func checkPrompt(text string, n int) error {
	f := strings.SplitN(text, " ", 4)
	if len(f) != 4 || f[0] != "kndl-load" {
		return fmt.Errorf("prompt %q is not one of the load test's", trunc(text))
	}
	j, err := strconv.Atoi(strings.TrimPrefix(f[1], "p"))
	if err != nil {
		return fmt.Errorf("prompt %q has no number", trunc(text))
	}
	if got := fmt.Sprintf("crc%08x", crc32.ChecksumIEEE([]byte(f[3]))); got != f[2] {
		return fmt.Errorf("prompt %d arrived changed: got checksum %s, want %s", j, got, f[2])
	}
	if j != n {
		return fmt.Errorf("got prompt %d, want prompt %d (taken %d before it)", j, n, n)
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Name is the name the Runner was paired under.
func (r *Runner) Name() string { return r.cfg.Name }
