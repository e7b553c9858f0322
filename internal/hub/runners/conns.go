// Package runners holds the Runners connected to the Hub: one protocol
// connection each, its hello and version, the newest connection of a
// Runner winning over an older one, and the streams a Runner dials back for
// a forwarded port or a file. Conns is the Session Owner's session.Runners.
// What a Runner may send is registered on each connection by the Hub
// (internal/hub), the one importer, which wires it.
package runners

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// Conn is a connected Runner.
type Conn struct {
	Conn    *protocol.Conn
	Runner  store.Runner
	Hello   protocol.Hello
	Version int
	Since   time.Time
	// Warning says why it is older than the Hub supports
	// (VersionWarning), "" when it is not.
	Warning string
	// Pool is what its warm pool held when it last said (runner.pool);
	// nil until it does.
	Pool atomic.Pointer[protocol.RunnerPool]
	// Addr is the address it connected from, as the Hub sees a request's
	// (signin.ClientAddr): the approval page of a kndl login compares a
	// login's with it.
	Addr string
	// left is closed once the Hub no longer counts the connection.
	left chan struct{}
}

// Toucher records that a Runner was heard from (store.Runners).
type Toucher interface {
	TouchRunner(ctx context.Context, id string) error
}

// Options configure Conns.
type Options struct {
	Store Toucher
	Log   *slog.Logger
	// PingEvery is each connection's ping period (Conn.SetPingEvery);
	// zero is protocol.PingEvery.
	PingEvery time.Duration
	// Life is the Hub's: what is recorded of a connection after its
	// request ended, and the streams, run under it.
	Life context.Context
	// Back answers a Runner's hello with the Sessions it runs that the
	// Hub takes back (session.Owner.RunnerBack).
	Back func(ctx context.Context, runnerID string, running []string) []protocol.ResumedSession
	// Handle registers what a Runner may send on a new connection; each
	// handler answers only once welcomed is closed, after hello.
	Handle func(rc *Conn, welcomed <-chan struct{})
	// Gone is told a connection ended; current reports whether it was
	// still the Runner's newest.
	Gone func(rc *Conn, current bool)
}

// Conns is every connected Runner.
type Conns struct {
	opts    Options
	streams streams

	mu sync.Mutex
	m  map[string]*Conn // by Runner id, while connected
	// taken is what each Runner's lanes took last, by Runner id, kept
	// across its connections: a message it sends again after a reply
	// lost with its connection is taken once.
	taken map[string]*protocol.Taken
	// refused is each Runner's last hello refused, by Runner id, until
	// one is taken.
	refused map[string]Refusal
	// build is the Hub's own, which a Runner's is compared with.
	build protocol.Build
}

// Refusal is a Runner's hello the Hub refused: too old (or too new) a
// protocol, or no valid models table.
type Refusal struct {
	At    time.Time
	Build protocol.Build
	Why   string
}

// New makes an empty set of connections.
func New(o Options) *Conns {
	return &Conns{opts: o, streams: streams{m: map[string]*pendingStream{}}, m: map[string]*Conn{}, taken: map[string]*protocol.Taken{},
		refused: map[string]Refusal{}, build: protocol.ThisBuild()}
}

// helloTimeout bounds how long a Runner may take to say hello.
const helloTimeout = 10 * time.Second

// Serve serves the Runner rn's connection on its request, until it ends.
func (cs *Conns) Serve(w http.ResponseWriter, r *http.Request, rn store.Runner) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered
	}
	log := cs.opts.Log.With("runner", rn.Name)
	conn := protocol.NewConn(ws, log)
	conn.Remember(cs.takenBy(rn.ID))
	conn.SetPingEvery(cs.opts.PingEvery)
	rc := &Conn{Conn: conn, Runner: rn, Since: time.Now(), Addr: signin.ClientAddr(r), left: make(chan struct{})}
	hello := make(chan struct{})
	conn.Handle(protocol.TypeHello, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		select {
		case <-hello:
			return nil, fmt.Errorf("hello sent twice: %w", errdefs.ErrInvalid)
		default:
		}
		var hm protocol.Hello
		if err := json.Unmarshal(body, &hm); err != nil {
			return nil, fmt.Errorf("hello: %v: %w", err, errdefs.ErrInvalid)
		}
		v, err := protocol.Negotiate(hm)
		if err == nil {
			if err = hm.Models.Check(); err != nil {
				err = fmt.Errorf("hello: the Runner's models: %w; upgrade the Runner", err)
			}
		}
		if err != nil {
			cs.refuse(rn.ID, Refusal{At: time.Now(), Build: hm.Build, Why: err.Error()})
			log.Warn("runner refused", "build", BuildText(hm.Build), "err", err)
			return nil, err
		}
		if note := clockNote(hm.Clock, time.Now()); note != "" {
			log.Warn(note)
			hm.Host.Notes = append(hm.Host.Notes, note)
		}
		rc.Hello, rc.Version, rc.Warning = hm, v, VersionWarning(v, hm.Build, cs.build)
		close(hello)
		cs.attach(rc)
		return protocol.Welcome{Version: v, RunnerID: rn.ID, Sessions: cs.opts.Back(ctx, rn.ID, hm.Sessions)}, nil
	})
	cs.opts.Handle(rc, hello)

	ctx := r.Context()
	go func() {
		select {
		case <-hello:
		case <-conn.Done():
		case <-time.After(helloTimeout):
			conn.Close(websocket.StatusPolicyViolation, "no hello within 10s")
		}
	}()
	err = conn.Serve(ctx)
	if conn.Dropped() && ctx.Err() == nil {
		// Neither side closed it: the error names why (the TCP connection
		// ended or was reset, no pong, a pong not written), and how long
		// the Runner had been silent tells a dead line from a busy Hub.
		log.Warn("runner connection lost", "err", err, "connected_for", time.Since(rc.Since).Round(time.Millisecond),
			"last_frame_read", conn.SinceRead().Round(time.Millisecond))
	}
	conn.Wait() // a hello handled late attaches before the detach, not after
	cs.detach(rc)
	close(rc.left)
	log.Info("runner disconnected", "err", err)
}

// maxClockSkew is how far apart a Runner's clock and the Hub's may be
// before the Hub says so. Nothing kndl does breaks further off: each side
// reads times on its own clock (a GitHub token's life comes as seconds
// left, protocol.GitHubToken.Expiry; an Event's time and a Session's
// order come from the Runner's and the Hub's own). But Event times from
// that Runner are off by as much.
const maxClockSkew = time.Minute

// clockNote says how far the Runner's clock at its hello is from the Hub's
// now, when it is further than maxClockSkew; "" otherwise, or when the
// Runner did not say.
func clockNote(runner, now time.Time) string {
	if runner.IsZero() {
		return ""
	}
	skew := runner.Sub(now)
	way := "ahead of"
	if skew < 0 {
		skew, way = -skew, "behind"
	}
	if skew <= maxClockSkew {
		return ""
	}
	return fmt.Sprintf("Its clock is %s %s the Hub's: Sessions run, but the times of its Events are off by as much; set up time sync (NTP) on its machine.",
		skew.Round(time.Second), way)
}

// takenBy returns what the Runner's lanes took, kept across its
// connections.
func (cs *Conns) takenBy(runnerID string) *protocol.Taken {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	t := cs.taken[runnerID]
	if t == nil {
		t = &protocol.Taken{}
		cs.taken[runnerID] = t
	}
	return t
}

// attach records a connected Runner, closing an older connection of the
// same Runner: the newest wins.
func (cs *Conns) attach(rc *Conn) {
	cs.mu.Lock()
	old := cs.m[rc.Runner.ID]
	cs.m[rc.Runner.ID] = rc
	delete(cs.refused, rc.Runner.ID)
	cs.mu.Unlock()
	if old != nil {
		old.Conn.Close(websocket.StatusPolicyViolation, "replaced by a newer connection of this runner")
	}
	if err := cs.opts.Store.TouchRunner(cs.opts.Life, rc.Runner.ID); err != nil {
		cs.opts.Log.Error("record a runner seen", "runner", rc.Runner.Name, "err", err)
	}
	cs.opts.Log.Info("runner connected", "runner", rc.Runner.Name, "version", rc.Version, "build", BuildText(rc.Hello.Build),
		"backend", rc.Hello.Host.Backend, "limits", rc.Hello.Host.Limits)
	if rc.Warning != "" {
		cs.opts.Log.Warn("runner older than the hub supports: "+rc.Warning, "runner", rc.Runner.Name, "hub_build", BuildText(cs.build))
	}
}

func (cs *Conns) refuse(runnerID string, r Refusal) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.refused[runnerID] = r
}

// Refused returns a Runner's last hello the Hub refused, if none was
// taken since.
func (cs *Conns) Refused(runnerID string) (Refusal, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	r, ok := cs.refused[runnerID]
	return r, ok
}

func (cs *Conns) detach(rc *Conn) {
	cs.mu.Lock()
	gone := cs.m[rc.Runner.ID] == rc
	if gone {
		delete(cs.m, rc.Runner.ID)
	}
	cs.mu.Unlock()
	cs.opts.Gone(rc, gone)
	// Its request ended with its connection: what the Hub records of
	// it runs for the Hub's life.
	if err := cs.opts.Store.TouchRunner(cs.opts.Life, rc.Runner.ID); err != nil {
		cs.opts.Log.Error("record a runner seen", "runner", rc.Runner.Name, "err", err)
	}
}

// leaveWait bounds how long Disconnect waits for a closed connection to
// be let go of.
const leaveWait = 10 * time.Second

// Disconnect closes a Runner's connection, if it has one, and returns
// once the Hub no longer counts it (or after leaveWait), so that what a
// revoke answers and the Runners list that follows agree.
func (cs *Conns) Disconnect(id, why string) {
	rc := cs.Get(id)
	if rc == nil {
		return
	}
	rc.Conn.Close(websocket.StatusPolicyViolation, why)
	select {
	case <-rc.left:
	case <-time.After(leaveWait):
		cs.opts.Log.Warn("a closed runner connection was not let go of in time", "runner", rc.Runner.Name, "waited", leaveWait)
	}
}

// CloseAll closes every Runner's connection.
func (cs *Conns) CloseAll(why string) {
	for _, rc := range cs.All() {
		rc.Conn.Close(websocket.StatusGoingAway, why)
	}
}

// Get returns the Runner's connection, or nil if it is not connected.
func (cs *Conns) Get(id string) *Conn {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.m[id]
}

// All returns the connected Runners, by Runner id, at one instant.
func (cs *Conns) All() map[string]*Conn {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return maps.Clone(cs.m)
}

// Connected reports whether the Runner with that id is connected.
func (cs *Conns) Connected(id string) bool { return cs.Get(id) != nil }

// Runner returns a connected Runner for the Session Owner, or nil.
func (cs *Conns) Runner(id string) session.Requester {
	if rc := cs.Get(id); rc != nil {
		return rc.Conn
	}
	return nil
}

// Models is the table of models a connected Runner reported in its
// hello; empty for one not connected.
func (cs *Conns) Models(id string) claude.Table {
	if rc := cs.Get(id); rc != nil {
		return rc.Hello.Models
	}
	return claude.Table{}
}

var _ session.Runners = (*Conns)(nil)
