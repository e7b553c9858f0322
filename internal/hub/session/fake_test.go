package session

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
	"kndl.dev/kndl/internal/testenv"
)

// fakeRunner is a Runner on the real protocol over a real WebSocket: it
// answers session.start, session.deliver, session.stop,
// session.stop_turn, session.answer, session.stop_subagent,
// session.archive and session.restore as scripted, and reports each
// request on calls.
type fakeRunner struct {
	t     *testing.T
	calls chan call
	// startErr, if set, is what each session.start answers.
	mu       sync.Mutex
	startErr error
	// deliverWith answers each session.deliver; nil: taken at once.
	deliverWith func(ctx context.Context) (protocol.SessionDelivered, error)
	// kept are the archived Sessions whose disks and Workspace the Runner
	// still has: until purge.
	kept map[string]bool
	// held are the requests, by type, answered only once released (hold).
	held map[string]chan struct{}

	hubSide *protocol.Conn // the Hub's end, which the Owner asks
	srv     *pipeServer
}

type call struct {
	typ     string
	deliver protocol.SessionDeliver
	start   protocol.SessionStart
	answer  protocol.SessionAnswer
	agent   string // session.stop_subagent's
	why     string // session.capped's
	id      string
}

func newFakeRunner(t *testing.T) *fakeRunner {
	f := &fakeRunner{t: t, calls: make(chan call, 64), kept: map[string]bool{}, held: map[string]chan struct{}{}}
	f.connect()
	return f
}

// connect opens a fresh connection, as a Runner coming back does.
func (f *fakeRunner) connect() {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	hubSide := make(chan *protocol.Conn, 1)
	f.srv = newPipeServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := protocol.NewConn(ws, log)
		hubSide <- c
		c.Serve(context.Background())
	}))
	f.t.Cleanup(f.srv.Close)
	ws, _, err := websocket.Dial(context.Background(), "ws://hub/", &websocket.DialOptions{HTTPClient: f.srv.client()})
	if err != nil {
		f.t.Fatal(err)
	}
	rc := protocol.NewConn(ws, log)
	// ref answers a request naming a Session, after then if set.
	ref := func(typ string, then func(id string) error) protocol.Handler {
		return func(ctx context.Context, body json.RawMessage) (any, error) {
			var r protocol.SessionRef
			json.Unmarshal(body, &r)
			f.calls <- call{typ: typ, id: r.SessionID}
			f.mu.Lock()
			gate := f.held[typ]
			f.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if then == nil {
				return nil, nil
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			return nil, then(r.SessionID)
		}
	}
	rc.Handle(protocol.TypeSessionStart, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var r protocol.SessionStart
		json.Unmarshal(body, &r)
		f.calls <- call{typ: protocol.TypeSessionStart, id: r.SessionID, start: r}
		f.mu.Lock()
		defer f.mu.Unlock()
		return nil, f.startErr
	})
	rc.Handle(protocol.TypeSessionDeliver, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var r protocol.SessionDeliver
		json.Unmarshal(body, &r)
		f.calls <- call{typ: protocol.TypeSessionDeliver, id: r.SessionID, deliver: r}
		f.mu.Lock()
		with := f.deliverWith
		f.mu.Unlock()
		if with == nil {
			return protocol.SessionDelivered{Taken: true, Tries: 1}, nil
		}
		return with(ctx)
	})
	rc.Handle(protocol.TypeSessionAnswer, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var r protocol.SessionAnswer
		json.Unmarshal(body, &r)
		f.calls <- call{typ: protocol.TypeSessionAnswer, id: r.SessionID, answer: r}
		return nil, nil
	})
	rc.Handle(protocol.TypeSessionStopSubagent, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var r protocol.SessionSubagent
		json.Unmarshal(body, &r)
		f.calls <- call{typ: protocol.TypeSessionStopSubagent, id: r.SessionID, agent: r.AgentID}
		return nil, nil
	})
	rc.Handle(protocol.TypeSessionCapped, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var r protocol.SessionCapped
		json.Unmarshal(body, &r)
		f.calls <- call{typ: protocol.TypeSessionCapped, id: r.SessionID, why: r.Why}
		return nil, nil
	})
	rc.Handle(protocol.TypeSessionStop, false, ref(protocol.TypeSessionStop, nil))
	rc.Handle(protocol.TypeSessionStopTurn, false, ref(protocol.TypeSessionStopTurn, nil))
	rc.Handle(protocol.TypeSessionArchive, false, ref(protocol.TypeSessionArchive, func(id string) error {
		f.kept[id] = true
		return nil
	}))
	rc.Handle(protocol.TypeSessionRestore, false, ref(protocol.TypeSessionRestore, func(id string) error {
		if !f.kept[id] {
			// What internal/runner answers once it purged the Session.
			return fmt.Errorf("its Workspace is gone: this Runner deleted it, with Claude Code's state, once the Session had been archived for RUNNER_ARCHIVE_KEEP: %w", errdefs.ErrConflict)
		}
		return nil
	}))
	go rc.Serve(context.Background())
	f.t.Cleanup(func() { rc.Close(websocket.StatusNormalClosure, "test over") })
	f.hubSide = <-hubSide
}

// answerDeliveries sets how each session.deliver is answered.
func (f *fakeRunner) answerDeliveries(with func(ctx context.Context) (protocol.SessionDelivered, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deliverWith = with
}

// holdDeliveries answers no session.deliver until the test ends: the
// Runner still typing.
func (f *fakeRunner) holdDeliveries() {
	over := make(chan struct{})
	f.t.Cleanup(func() { close(over) })
	f.answerDeliveries(func(ctx context.Context) (protocol.SessionDelivered, error) {
		select {
		case <-ctx.Done():
		case <-over:
		}
		return protocol.SessionDelivered{}, fmt.Errorf("the test is over: %w", errdefs.ErrUnavailable)
	})
}

// hold answers no request of typ (one naming a Session: a stop, an
// archive, a restore) until release is called, or the test ends.
func (f *fakeRunner) hold(typ string) (release func()) {
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	f.t.Cleanup(release)
	f.mu.Lock()
	f.held[typ] = gate
	f.mu.Unlock()
	return release
}

// gone closes the connection, as a Runner going away does.
func (f *fakeRunner) gone() {
	f.hubSide.Close(websocket.StatusGoingAway, "runner gone")
	f.srv.Close()
}

// purge deletes an archived Session's disks and Workspace, as the Runner
// does RUNNER_ARCHIVE_KEEP after it was archived.
func (f *fakeRunner) purge(id string) {
	f.mu.Lock()
	delete(f.kept, id)
	f.mu.Unlock()
}

func (f *fakeRunner) setStartErr(err error) {
	f.mu.Lock()
	f.startErr = err
	f.mu.Unlock()
}

// next returns the next request of type typ, failing on any other.
func (f *fakeRunner) next(typ string) call {
	f.t.Helper()
	select {
	case c := <-f.calls:
		if c.typ != typ {
			f.t.Fatalf("the Runner was sent %s, want %s", c.typ, typ)
		}
		return c
	case <-time.After(testenv.WaitShort):
		f.t.Fatalf("the Runner was sent no %s", typ)
	}
	return call{}
}

// quiet fails if the Runner is sent anything within d.
func (f *fakeRunner) quiet(d time.Duration) {
	f.t.Helper()
	select {
	case c := <-f.calls:
		f.t.Fatalf("the Runner was sent %s %+v, want nothing", c.typ, c.deliver)
	case <-time.After(d):
	}
}

// runners is the Owner's view of which Runner is connected.
type runners struct {
	mu   sync.Mutex
	conn map[string]*fakeRunner
	// tables are the models a Runner reported, where not the pinned
	// version's.
	tables map[string]claude.Table
}

func (rs *runners) Models(id string) claude.Table {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if t, ok := rs.tables[id]; ok {
		return t
	}
	if rs.conn[id] == nil {
		return claude.Table{}
	}
	return claude.Models()
}

// report makes the Runner id report table as its models.
func (rs *runners) report(id string, table claude.Table) {
	rs.mu.Lock()
	rs.tables[id] = table
	rs.mu.Unlock()
}

func (rs *runners) Runner(id string) Requester {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if f := rs.conn[id]; f != nil {
		return f.hubSide
	}
	return nil
}

func (rs *runners) set(id string, f *fakeRunner) {
	rs.mu.Lock()
	rs.conn[id] = f
	rs.mu.Unlock()
}

// plain masks nothing: these tests are of states, not of redaction
// (internal/hub's tests cover the Hub's redactor).
type plain struct{}

func (plain) RedactEvents(context.Context, string, []protocol.Event) error { return nil }
func (plain) RedactText(_ context.Context, _, text string) string          { return text }

// logTo sends the Owner's log to the test's, shown when it fails.
type logTo struct{ t *testing.T }

func (l logTo) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// fixture is an Owner over a real store with one Runner and one Creator.
type fixture struct {
	t        *testing.T
	o        *Owner
	st       *store.Store
	runners  *runners
	runner   *fakeRunner
	runnerID string
	user     store.User
	repo     store.Repo
	start    protocol.SessionStart // the last start create saw
	// faults are the faults the Owner named, once a test expects them
	// (expectFaults); until then one fails the test.
	faultMu  sync.Mutex
	expected bool
	faults   []string
}

// faulted is the Owner's Faulted in every test: a fault the test did not
// expect fails it.
func (f *fixture) faulted(id, kind, what string) {
	f.faultMu.Lock()
	defer f.faultMu.Unlock()
	if !f.expected {
		f.t.Errorf("the Owner named a fault of Session %s: %s: %s", id, kind, what)
		return
	}
	f.faults = append(f.faults, kind)
}

// expectFaults lets the Owner name faults without failing the test, and
// returns what it named so far.
func (f *fixture) expectFaults() []string {
	f.faultMu.Lock()
	defer f.faultMu.Unlock()
	f.expected = true
	return slices.Clone(f.faults)
}

// fast are the timings the tests run at: milliseconds, not minutes.
func fast(o *Options) {
	o.DeliveryDeadline = 150 * time.Millisecond
	o.RetryMin, o.RetryMax = 50*time.Millisecond, 200*time.Millisecond
}

func newFixture(t *testing.T, tune ...func(*Options)) *fixture {
	t.Helper()
	watched(t)
	ctx := context.Background()
	st := storetest.Open(t)
	u, _ := st.Members.DevUser(ctx)
	rn, _, err := st.Runners.CreateRunner(ctx, "r1", u.ID)
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := st.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	f := &fixture{t: t, st: st, runners: &runners{conn: map[string]*fakeRunner{}, tables: map[string]claude.Table{}}, runnerID: rn.ID, user: u, repo: repo}
	f.runner = newFakeRunner(t)
	f.runners.set(rn.ID, f.runner)
	key, _ := seal.ParseKey(seal.NewKey())
	box, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Store: &st.Domains, Runners: f.runners, Redactor: plain{}, Sealer: box, Logger: slog.New(slog.NewTextHandler(logTo{t}, nil)), Faulted: f.faulted}
	fast(&opts)
	for _, tn := range tune {
		tn(&opts)
	}
	f.o = New(opts)
	t.Cleanup(f.o.Close)
	return f
}

// restartHub closes the Owner and makes a new one over the same store, as
// a Hub restarting does; the Runner dials the new Hub afresh.
func (f *fixture) restartHub() {
	f.t.Helper()
	f.o.Close()
	f.runner.gone()
	f.runner = newFakeRunner(f.t)
	f.runners.set(f.runnerID, f.runner)
	f.o = New(f.o.opts)
	f.t.Cleanup(f.o.Close)
	if err := f.o.Recover(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// create makes a Session with its first prompt; the Runner is sent its
// start.
func (f *fixture) create(text string) store.Session {
	f.t.Helper()
	s, err := f.o.Create(context.Background(), store.Session{RepoID: f.repo.ID, CreatorID: f.user.ID, RunnerID: f.runnerID, Title: "t"},
		store.Prompt{AuthorID: f.user.ID, Text: text})
	if err != nil {
		f.t.Fatal(err)
	}
	f.start = f.runner.next(protocol.TypeSessionStart).start
	return s
}

// active makes a Session that is Active with its first prompt on its
// way.
func (f *fixture) active(text string) (store.Session, call) {
	f.t.Helper()
	s := f.create(text)
	d := f.runner.next(protocol.TypeSessionDeliver)
	f.waitState(s.ID, Active)
	return s, d
}

// archived makes a Session that was Active and is now Archived: put to
// sleep first, then archived on its Runner.
func (f *fixture) archived(text string) store.Session {
	f.t.Helper()
	s, _ := f.active(text)
	if err := f.o.Archive(context.Background(), s.ID, "its Creator archived it"); err != nil {
		f.t.Fatal(err)
	}
	f.runner.next(protocol.TypeSessionStop)
	f.runner.next(protocol.TypeSessionArchive)
	return f.session(s.ID)
}

func (f *fixture) session(id string) store.Session {
	f.t.Helper()
	s, err := f.st.Sessions.SessionByID(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) waitState(id string, want store.SessionState) store.Session {
	f.t.Helper()
	var s store.Session
	testenv.Eventually(f.t, testenv.WaitShort, "the Session "+string(want), func() bool {
		s = f.session(id)
		return s.State == want
	})
	return s
}

// prompts returns the Session's prompts by state.
func (f *fixture) prompts(id string) map[store.PromptState][]string {
	f.t.Helper()
	out := map[store.PromptState][]string{}
	q, err := f.o.Queue(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, p := range q {
		out[p.State] = append(out[p.State], p.Text)
	}
	return out
}

// events returns the text of the Session's Events of kind.
func (f *fixture) events(id, kind string) []string {
	f.t.Helper()
	var out []string
	for _, ev := range f.eventsOf(id, kind) {
		out = append(out, ev.Text)
	}
	return out
}

// eventsOf returns the Session's Events of kind, whole.
func (f *fixture) eventsOf(id, kind string) []protocol.Event {
	f.t.Helper()
	evs, err := f.st.Sessions.Events(context.Background(), id, 0, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []protocol.Event
	for _, e := range evs {
		var ev protocol.Event
		json.Unmarshal(e.Data, &ev)
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}
