package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/protocol"
)

// watcher is one browser tab on a Session view: it follows /live, checks
// each Event's seq follows the last one's (no gap, no repeat), and dials
// again from its last Event when the socket drops, as the page does.
type watcher struct {
	s *sess

	mu         sync.Mutex
	last       int64
	events     int
	prompts    map[int]time.Time // when each prompt's Event came, by number
	err        error
	reconnects int
	// opened is when each socket's first message came: the Hub past
	// the watcher's sign-in, its Session and queue read (the standby's
	// test times every watcher back from it).
	opened []time.Time
}

func (w *watcher) run(ctx context.Context, c *apiclient.Client, first bool) {
	failing := time.Time{} // when dials began to fail
	wait := redialMin
	for ctx.Err() == nil {
		lw, err := c.Live(ctx, w.s.id, w.lastSeq())
		if err != nil {
			if failing.IsZero() {
				failing = time.Now()
			}
			if time.Since(failing) > 30*time.Second {
				w.fail(fmt.Errorf("Session %s: the view's socket could not be opened for 30 s: %w", w.s.id, err))
				return
			}
		} else {
			failing, wait = time.Time{}, redialMin
			w.follow(ctx, c, lw, first)
		}
		pause(ctx, jittered(wait))
		wait = min(2*wait, redialMax)
	}
}

// follow takes the socket's Events until it drops.
func (w *watcher) follow(ctx context.Context, c *apiclient.Client, lw *apiclient.Watch, first bool) {
	defer lw.Close()
	for n := 0; ; n++ {
		m, err := lw.Next(ctx)
		if err == nil && n == 0 {
			w.mu.Lock()
			w.opened = append(w.opened, time.Now())
			w.mu.Unlock()
		}
		if err != nil {
			if ctx.Err() == nil {
				w.mu.Lock()
				w.reconnects++
				w.mu.Unlock()
				if s := websocket.CloseStatus(err); s != websocket.StatusTryAgainLater && s != websocket.StatusGoingAway {
					w.s.r.log.Info("a watcher's socket dropped; dialling again", "session", w.s.id, "err", err)
				}
			}
			return
		}
		if m.Event != nil {
			w.take(ctx, c, m.Event, first)
		}
	}
}

// A watcher dials again as the page does (app.js's live): redialMin after
// its socket closed, twice as long after each dial that failed, up to
// redialMax, each wait a random half shorter so that a Hub's watchers do
// not all dial in the same instant once it is back.
const (
	redialMin = 500 * time.Millisecond
	redialMax = 10 * time.Second
)

// jittered is d less a random part of up to half of it.
func jittered(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2)
}

// take checks and records one Event.
func (w *watcher) take(ctx context.Context, c *apiclient.Client, ev *api.Event, first bool) {
	now := time.Now()
	w.mu.Lock()
	if ev.Seq != w.last+1 && w.err == nil {
		w.err = fmt.Errorf("Session %s: a watcher got Event %d after %d, want %d", w.s.id, ev.Seq, w.last, w.last+1)
	}
	w.last = ev.Seq
	w.events++
	if ev.Kind == protocol.EventPrompt {
		if j, ok := promptNumber(ev.Text); ok {
			if _, seen := w.prompts[j]; seen && w.err == nil {
				w.err = fmt.Errorf("Session %s: a watcher got prompt %d twice", w.s.id, j)
			}
			w.prompts[j] = now
			if want := w.s.prompt(j); ev.Text != want && w.err == nil {
				w.err = fmt.Errorf("Session %s: a watcher got prompt %d as %d bytes, want the %d sent", w.s.id, j, len(ev.Text), len(want))
			}
		}
	}
	w.mu.Unlock()
	if !first {
		return
	}
	switch ev.Kind {
	case protocol.EventTurnEnd:
		w.s.ended <- struct{}{}
	case protocol.EventQuestion:
		go func() {
			err, again := w.s.r.reach(ctx, func() error {
				return c.Answer(ctx, w.s.id, api.Answer{QuestionID: ev.ToolID, Answers: []api.Choice{{Option: 1}}})
			})
			if again && (status(err) == http.StatusConflict || status(err) == http.StatusNotFound) {
				err = nil // the Hub that went had taken the answer
			}
			if err != nil && ctx.Err() == nil {
				w.s.r.fail(fmt.Errorf("Session %s: answer its question: %w", w.s.id, err))
			}
		}()
	}
}

// promptNumber reads the number simrunner.Prompt puts in a prompt.
func promptNumber(text string) (int, bool) {
	rest, ok := strings.CutPrefix(text, "kndl-load p")
	if !ok {
		return 0, false
	}
	n, _, _ := strings.Cut(rest, " ")
	j, err := strconv.Atoi(n)
	return j, err == nil
}

func (w *watcher) lastSeq() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

func (w *watcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
