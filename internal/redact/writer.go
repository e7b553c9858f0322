package redact

import (
	"errors"
	"io"
	"sync"
	"time"
)

// MaxHold is the longest a Writer holds back the end of a piece that could
// start a value, measured from when its oldest held byte arrived.
const MaxHold = 100 * time.Millisecond

// ErrClosed is returned by a Writer's Write after Close.
var ErrClosed = errors.New("redact: write to a closed writer")

// A Writer redacts a stream written to it in pieces, such as a terminal's
// output relayed frame by frame, and writes the result to another writer.
// Each Write passes on at once everything that can't be the start of a value;
// the rest follows with the next Write or, at the latest, MaxHold after it
// arrived. It is safe for concurrent use.
//
// The deadline runs on a timer that holds no goroutine while it waits: the
// underlying writer may be called from the timer's goroutine, never
// concurrently with itself. An error from it is returned by every later call.
type Writer struct {
	mu     sync.Mutex
	s      *Stream
	w      io.Writer
	buf    []byte
	due    time.Time // when the oldest held byte must go
	timer  *time.Timer
	armed  bool
	err    error
	closed bool
}

// NewWriter returns a Writer that redacts with set's values as they are at
// each Write and writes to w.
func NewWriter(set *Set, w io.Writer) *Writer {
	return &Writer{s: set.NewStream(), w: w}
}

// Write redacts p and passes on what it can. It always reads all of p.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, ErrClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	before := w.s.Held()
	w.buf = w.s.Redact(w.buf[:0], p)
	if held := w.s.Held(); held > 0 && (before == 0 || held <= len(p)) {
		// All held bytes arrived now.
		w.due = time.Now().Add(MaxHold)
		w.arm(MaxHold)
	}
	return len(p), w.pass()
}

// Flush passes on what is held back now.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush()
}

// Close flushes and stops the Writer. It does not close the underlying
// writer.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	err := w.flush()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	return err
}

func (w *Writer) flush() error {
	if w.err != nil {
		return w.err
	}
	w.buf = w.s.Flush(w.buf[:0])
	return w.pass()
}

func (w *Writer) pass() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = err
	}
	return w.err
}

// arm makes sure the timer fires within d. An armed timer fires no later
// than w.due, which only ever moves later.
func (w *Writer) arm(d time.Duration) {
	if w.armed {
		return
	}
	w.armed = true
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
	} else {
		w.timer.Reset(d)
	}
}

func (w *Writer) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	if w.closed || w.s.Held() == 0 {
		return
	}
	if d := time.Until(w.due); d > 0 {
		w.arm(d)
		return
	}
	_ = w.flush()
}
