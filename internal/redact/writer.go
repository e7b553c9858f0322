package redact

import (
	"bytes"
	"errors"
	"io"
	"strings"
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
	shapes *shaper // or nil
	tail   []byte  // an unfinished token the shapes hold back
	shaped []byte
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

// MaskShapes makes w mask credentials by shape as well, after the values:
// with the Marked rules, or every rule if all is set. Each is replaced
// character for character (maskWidth), so a terminal keeps its columns. A
// token is read whole: the end of a piece that could be the start of one
// (holdFrom) is held back, under the same deadline as a value's start. Call it before
// the first Write.
func (w *Writer) MaskShapes(all bool) *Writer {
	w.shapes = &shaper{r: markedFrameRules()}
	if all {
		w.shapes.r = allFrameRules()
	}
	return w
}

// maxToken is the longest run of token characters held back for the
// shapes; a longer one goes as it is.
const maxToken = 4 << 10

// shape masks credentials in data, w.tail followed by what the values
// released, by shape, keeping back as the new tail, unless final, the end
// that a match may still go on from (holdFrom): the last token's last
// bytes that could come before a needed word yet to come, or from before
// a word whose match may not have ended. A piece that ends in a space or
// a control sequence, with no word in its last line, passes whole.
func (w *Writer) shape(data []byte, final bool) []byte {
	if w.shapes == nil {
		return data
	}
	if len(data) == len(w.tail) && (len(data) == 0 || !final) {
		return data[:0] // nothing new: the tail stays
	}
	cut := len(data)
	if !final {
		for cut > 0 && len(data)-cut < maxToken && tokenByte(data[cut-1]) {
			cut--
		}
		cut = afterEscape(data, w.shapes.r.holdFrom(data, cut))
		if len(data)-cut >= maxToken {
			cut = len(data)
		}
	}
	out := data[:cut] // passed as it is where nothing is found
	if w.shapes.find(out) {
		w.shaped = w.shapes.maskWidth(w.shaped[:0], out)
		out = w.shaped
	}
	w.tail = append(w.tail[:0], data[cut:]...)
	return out
}

// afterEscape moves cut, the start of the last run of token bytes in
// data, past the end of a control sequence the run begins inside (the 1m of
// ESC [ 1 m): its parameters and final byte are not text.
func afterEscape(data []byte, cut int) int {
	from := max(cut-32, 0) // a colour's parameters are short
	e := bytes.LastIndexByte(data[from:cut], 0x1b)
	if e < 0 {
		return cut
	}
	e += from
	if e+1 >= len(data) || data[e+1] != '[' {
		return cut
	}
	f := e + 2
	for f < len(data) && 0x20 <= data[f] && data[f] <= 0x3f {
		f++
	}
	switch {
	case f == len(data):
		return len(data) // unfinished: no text yet
	case 0x40 <= data[f] && data[f] <= 0x7e:
		return max(cut, f+1)
	}
	return cut
}

// tokenByte reports whether c can be inside a credential a shape finds
// whole on one line.
func tokenByte(c byte) bool {
	return isAlnum(c) || strings.IndexByte("-_./+=~:@%", c) >= 0 || c >= 0x80
}

// held is how many bytes w holds back.
func (w *Writer) held() int { return w.s.Held() + len(w.tail) }

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
	before := w.held()
	// The values' output goes after the held tail: the shapes read the
	// two as one without a copy of the piece.
	w.buf = w.s.Redact(append(w.buf[:0], w.tail...), p)
	out := w.shape(w.buf, false)
	if held := w.held(); held > 0 && (before == 0 || held <= len(p)) {
		// All held bytes arrived now.
		w.due = time.Now().Add(MaxHold)
		w.arm(MaxHold)
	}
	return len(p), w.pass(out)
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
	w.buf = w.s.Flush(append(w.buf[:0], w.tail...))
	return w.pass(w.shape(w.buf, true))
}

func (w *Writer) pass(out []byte) error {
	if len(out) == 0 {
		return nil
	}
	if _, err := w.w.Write(out); err != nil {
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
	if w.closed || w.held() == 0 {
		return
	}
	if d := time.Until(w.due); d > 0 {
		w.arm(d)
		return
	}
	_ = w.flush()
}
