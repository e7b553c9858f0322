package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/testenv"
)

// pageLog keeps what a Browser's tab did that a failed wait should name:
// each WebSocket (opened, frames in, closed) and the last of its scripts'
// exceptions and errors, failed loads and crashes. A wait on a page that
// never changes says whether its socket was up and fed, or the page threw.
type pageLog struct {
	mu      sync.Mutex
	start   time.Time
	sockets map[network.RequestID]*socketSeen
	order   []network.RequestID
	notes   []string // the last keptNotes
}

// socketSeen is one WebSocket of the tab.
type socketSeen struct {
	url            string
	opened, closed time.Duration
	frames         int
	last           time.Duration
	err            string
}

// keptNotes and keptSockets bound what a failure prints.
const keptNotes, keptSockets = 6, 4

func newPageLog() *pageLog {
	return &pageLog{start: time.Now(), sockets: map[network.RequestID]*socketSeen{}}
}

// see takes an event of the tab (chromedp.WithListener): it runs on the
// tab's reader, so it only notes.
func (l *pageLog) see(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := time.Since(l.start).Round(time.Millisecond)
	switch e := ev.(type) {
	case *network.EventWebSocketCreated:
		l.sockets[e.RequestID] = &socketSeen{url: e.URL, opened: at, closed: -1}
		l.order = append(l.order, e.RequestID)
	case *network.EventWebSocketFrameReceived:
		if s := l.sockets[e.RequestID]; s != nil {
			s.frames++
			s.last = at
		}
	case *network.EventWebSocketFrameError:
		if s := l.sockets[e.RequestID]; s != nil {
			s.err = e.ErrorMessage
		}
	case *network.EventWebSocketClosed:
		if s := l.sockets[e.RequestID]; s != nil {
			s.closed = at
		}
	case *network.EventLoadingFailed:
		if !e.Canceled {
			l.note(at, "a %s failed to load: %s", e.Type, e.ErrorText)
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		text := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			text, _, _ = strings.Cut(d.Exception.Description, "\n")
		}
		l.note(at, "exception at %s:%d: %s", d.URL, d.LineNumber, text)
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
			var args []string
			for _, a := range e.Args {
				args = append(args, strings.Trim(string(a.Value), `"`)+a.Description)
			}
			l.note(at, "console.%s: %s", e.Type, strings.Join(args, " "))
		}
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError {
			l.note(at, "browser log: %s", e.Entry.Text)
		}
	case *inspector.EventTargetCrashed:
		l.note(at, "the tab crashed")
	}
}

func (l *pageLog) note(at time.Duration, format string, args ...any) {
	n := fmt.Sprintf("%s: "+format, append([]any{at}, args...)...)
	if r := []rune(n); len(r) > 200 {
		n = string(r[:200]) + "…"
	}
	l.notes = append(l.notes, n)
	if len(l.notes) > keptNotes {
		l.notes = slices.Delete(l.notes, 0, len(l.notes)-keptNotes)
	}
}

// String is the tab's last sockets and notes, a line each, times from the
// Browser's start; it ends in a newline when not empty.
func (l *pageLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Since(l.start).Round(time.Millisecond)
	var b strings.Builder
	ids := l.order[max(0, len(l.order)-keptSockets):]
	for _, id := range ids {
		s := l.sockets[id]
		path := s.url
		if i := strings.Index(path, "/api/"); i >= 0 {
			path = path[i:]
		}
		state := "open"
		if s.closed >= 0 {
			state = fmt.Sprintf("closed at %s", s.closed)
		}
		fmt.Fprintf(&b, "socket %s: opened at %s, %d frames in (last at %s), %s", path, s.opened, s.frames, s.last, state)
		if s.err != "" {
			fmt.Fprintf(&b, ", error %q", s.err)
		}
		b.WriteString("\n")
	}
	for _, n := range l.notes {
		b.WriteString(n + "\n")
	}
	if b.Len() > 0 {
		fmt.Fprintf(&b, "(now %s)\n", now)
	}
	return b.String()
}

// TestAFailedBrowserWaitNamesThePagesSocketsAndErrors: what a failed wait
// prints of a page names its WebSocket with the frames it took and whether
// it closed, and the page's uncaught exception and console error.
func TestAFailedBrowserWaitNamesThePagesSocketsAndErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/feed" {
			ws, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			for _, m := range []string{"one", "two", "three"} {
				ws.Write(r.Context(), websocket.MessageText, []byte(m))
			}
			ws.Close(websocket.StatusNormalClosure, "done")
			return
		}
		fmt.Fprint(w, `<!doctype html><body><p>a page</p><script>
			const s = new WebSocket("ws://" + location.host + "/api/feed");
			let n = 0;
			s.onmessage = () => { if (++n === 3) { console.error("all three in"); setTimeout(() => { throw new Error("the page broke") }) } };
		</script></body>`)
	}))
	defer srv.Close()
	b := NewBrowser(t)
	b.Go(srv.URL, "p")
	var seen string
	testenv.EventuallyShowing(t, testenv.WaitMedium, func() bool {
		// The socket's close and the exception come as two events in
		// either order (CI saw the exception first): both are waited for.
		seen = b.seen()
		return strings.Contains(seen, "the page broke") && strings.Contains(seen, "), closed at ")
	}, func() string { return seen })
	for _, want := range []string{
		"the page showed " + srv.URL + "/ (complete)\n",
		"socket /api/feed: opened at ",
		", 3 frames in (last at ",
		"), closed at ",
		"console.error: all three in\n",
		"exception at " + srv.URL + "/:",
		"Error: the page broke\n",
		"text: a page",
	} {
		if !strings.Contains(seen, want) {
			t.Errorf("what the page showed lacks %q:\n%s", want, seen)
		}
	}
}
