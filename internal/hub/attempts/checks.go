package attempts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/lifetime"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// Requester is a Runner's connection as the checks use it.
type Requester interface {
	Request(ctx context.Context, typ string, body, reply any) error
}

// CheckStore is the parts of the Hub's store the checks use: the attempt
// a Session is in, its last Turn, the checks kept, and the Session.
type CheckStore struct {
	Attempts interface {
		AttemptSetOf(ctx context.Context, sessionID string) (string, error)
		LastTurnStart(ctx context.Context, sessionID string) (int64, error)
		RecordTurnCheck(ctx context.Context, c store.TurnCheck) error
		AttemptReady(ctx context.Context, sessionID string) (setID string, ready bool, err error)
	}
	Sessions interface {
		SessionByID(ctx context.Context, id string) (store.Session, error)
	}
}

// CheckOptions configure Checks.
type CheckOptions struct {
	Store CheckStore
	// Command is the check of the Environment version Session s runs on,
	// "" when it names none (environment.Service.CheckOf).
	Command func(ctx context.Context, s store.Session) (string, error)
	// Runner is a Runner's connection and protocol version; nil when it
	// is not connected.
	Runner func(runnerID string) (Requester, int)
	// Mask masks a Session's text as its Events are (masks.Sets.WatcherMask).
	Mask func(ctx context.Context, sessionID string) (func(string) string, error)
	// Ready is told, once per set, that every attempt of set setID ended
	// its first Turn and that Turn's check (store.Attempts.AttemptReady).
	Ready func(ctx context.Context, setID string)
	// Timeout bounds one check's run in the Sandbox. Default 20 min.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Checks runs the Environment's check in an attempt's Sandbox after each
// of its Turns, one at a time per Session, and keeps what the Runner saw
// with that Turn.
type Checks struct {
	opts CheckOptions
	life *lifetime.Group
	mu   sync.Mutex
	busy map[string]*sessionLock
}

type sessionLock struct {
	sync.Mutex
	users int
}

// NewChecks makes Checks; Close ends the checks under way.
func NewChecks(o CheckOptions) *Checks {
	if o.Timeout == 0 {
		o.Timeout = 20 * time.Minute
	}
	return &Checks{opts: o, life: lifetime.New(), busy: map[string]*sessionLock{}}
}

// Close stops waiting on the checks under way and waits for their goroutines.
func (c *Checks) Close() { c.life.Close() }

// TurnEnded is told a top-level Turn of Session sessionID ended. An
// attempt's check runs in the background, kept with that Turn (the seq of
// its turn_start, as its usage is).
func (c *Checks) TurnEnded(sessionID string) {
	c.life.Go(func(ctx context.Context) {
		if err := c.run(ctx, sessionID); err != nil && ctx.Err() == nil {
			c.opts.Logger.Error("an attempt's check", "session", sessionID, "err", err)
		}
	})
}

func (c *Checks) run(ctx context.Context, sessionID string) error {
	if _, err := c.opts.Store.Attempts.AttemptSetOf(ctx, sessionID); errors.Is(err, errdefs.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	// Read first: the next Turn may start while an earlier check runs.
	turn, err := c.opts.Store.Attempts.LastTurnStart(ctx, sessionID)
	if err != nil {
		return err
	}
	s, err := c.opts.Store.Sessions.SessionByID(ctx, sessionID)
	if err != nil {
		return err
	}
	command, err := c.opts.Command(ctx, s)
	if err != nil {
		return err
	}
	if command == "" {
		return c.ready(ctx, sessionID)
	}
	unlock := c.lock(sessionID)
	defer unlock()
	mask, err := c.opts.Mask(ctx, sessionID)
	if err != nil {
		return err // nothing the Sandbox printed is kept unmasked
	}
	kept := store.TurnCheck{SessionID: sessionID, Turn: turn, ExitCode: -1}
	rc, version := c.opts.Runner(s.RunnerID)
	switch {
	case rc == nil:
		kept.Error = "its Runner was not connected when the Turn ended"
	case version < protocol.CheckVersion:
		kept.Error = fmt.Sprintf("its Runner speaks protocol %d, which runs no check; update it to a kndl of protocol %d", version, protocol.CheckVersion)
	default:
		var res protocol.SessionCheckResult
		rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout+30*time.Second)
		err := rc.Request(rctx, protocol.TypeSessionCheck, protocol.SessionCheck{SessionID: sessionID, Command: command,
			TimeoutMS: c.opts.Timeout.Milliseconds()}, &res)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		kept.ExitCode, kept.Duration, kept.TimedOut = res.ExitCode, time.Duration(res.DurationMS)*time.Millisecond, res.TimedOut
		kept.Output = Tail(mask(strings.ToValidUTF8(res.Output, "\uFFFD")), protocol.CheckKeep)
		if err != nil {
			kept.ExitCode, kept.Error = -1, mask(err.Error())
		}
	}
	kept.At = time.Now()
	if err := c.opts.Store.Attempts.RecordTurnCheck(ctx, kept); err != nil {
		return err
	}
	return c.ready(ctx, sessionID)
}

// Stopped is told Session sessionID stopped for good (failed, not to be
// retried): an attempt that did, with or without a first Turn, holds its
// set back no longer, and may have been the last it waited for.
func (c *Checks) Stopped(sessionID string) {
	c.life.Go(func(ctx context.Context) {
		if err := c.ready(ctx, sessionID); err != nil && !errors.Is(err, errdefs.ErrNotFound) && ctx.Err() == nil {
			c.opts.Logger.Error("an attempt stopped", "session", sessionID, "err", err)
		}
	})
}

// ready marks the attempt ready after a Turn and its check ended, and
// tells Ready if that made its set ready.
func (c *Checks) ready(ctx context.Context, sessionID string) error {
	setID, ready, err := c.opts.Store.Attempts.AttemptReady(ctx, sessionID)
	if err == nil && ready && c.opts.Ready != nil {
		c.opts.Ready(ctx, setID)
	}
	return err
}

// lock takes Session id's check lock, returning its release: a Turn's
// check waits for the one before it in the same Sandbox.
func (c *Checks) lock(id string) func() {
	c.mu.Lock()
	l := c.busy[id]
	if l == nil {
		l = &sessionLock{}
		c.busy[id] = l
	}
	l.users++
	c.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		c.mu.Lock()
		if l.users--; l.users == 0 {
			delete(c.busy, id)
		}
		c.mu.Unlock()
	}
}

// Tail is the last max bytes of s, starting on a whole character. It is
// taken after masking: a Sensitive value cut by the Runner's window
// (protocol.CheckTailMax) lies in what it drops.
func Tail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := len(s) - max
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
