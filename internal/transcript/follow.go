package transcript

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// DefaultInterval is how often Follow polls where inotify can't tell it of
// a change. Polling costs a stat of each file and a read of the subagents
// directory when nothing changed, and waking the process 50 times a second.
const DefaultInterval = 20 * time.Millisecond

// QuietInterval is how often Follow polls anyway where inotify tells it of
// changes: a safety net, as cheap as a poll a second.
const QuietInterval = time.Second

// Options say what Follow follows.
type Options struct {
	// ConfigDir, Cwd and Conversation name the transcript as Claude Code
	// sees them: CLAUDE_CONFIG_DIR, its working directory and its session
	// UUID (claude.TranscriptPath).
	ConfigDir, Cwd, Conversation string
	// Offsets are where to resume, as the last Batch gave them; nil starts
	// from the beginning.
	Offsets Offsets
	// Interval is the longest time between polls, when nothing wakes
	// Follow; default QuietInterval where inotify watches the transcript's
	// directories, else DefaultInterval.
	Interval time.Duration
	// Stdin, when set, is read to its end: Follow returns when it closes,
	// as it does when the Runner's exec that started Follow ends.
	Stdin io.Reader
}

// Batch is one line of Follow's output: Events in order, and the offsets to
// resume from once they are stored.
type Batch struct {
	Events  []protocol.Event `json:"events"`
	Offsets Offsets          `json:"offsets"`
}

// Follow polls the transcript Options names and writes a Batch to w, as
// one JSON line, whenever there are new Events. It returns nil when ctx is
// done or Stdin closes, and an error if the transcript cannot be read or w
// not written.
func Follow(ctx context.Context, opts Options, w io.Writer) error {
	if opts.ConfigDir == "" || opts.Cwd == "" || opts.Conversation == "" ||
		filepath.Base(opts.Conversation) != opts.Conversation || opts.Conversation == ".." {
		return fmt.Errorf("follow transcript: want a config dir, a working directory and a conversation id: %w", errdefs.ErrInvalid)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.Stdin != nil {
		// The read may outlive Follow when ctx ends first: the process is
		// about to exit then.
		go func() {
			io.Copy(io.Discard, opts.Stdin)
			cancel()
		}()
	}
	t := New(claude.TranscriptPath(opts.ConfigDir, opts.Cwd, opts.Conversation), opts.Offsets)
	wk, werr := newWaker(opts.ConfigDir, t)
	var wake <-chan struct{}
	if werr == nil {
		defer wk.close()
		wake = wk.wake
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-wake:
			timer.Stop() // no stale tick after Stop, as of Go 1.23
		}
		interval := opts.Interval
		if werr == nil && !wk.broken() {
			wk.watch() // a directory made since: watched before it is read
			if interval <= 0 {
				interval = QuietInterval
			}
		} else if interval <= 0 {
			interval = DefaultInterval
		}
		events, offsets, perr := t.Poll()
		if len(events) > 0 {
			if err := enc.Encode(Batch{Events: events, Offsets: offsets}); err != nil {
				return fmt.Errorf("follow transcript: write: %w", err)
			}
		}
		if perr != nil {
			return fmt.Errorf("follow transcript: %w", perr)
		}
		if t.More() {
			timer.Reset(0)
		} else {
			timer.Reset(interval)
		}
	}
}

// Decoder reads Follow's output, on the Runner's side. The follower runs
// in the Sandbox, whose root can write anything to its output, so one
// Batch is read up to MaxBatch bytes and no further.
type Decoder struct {
	dec *json.Decoder
	in  *batchLimit
}

// MaxBatch bounds the JSON of one Batch the Runner reads: the Events of
// maxRead bytes of each of many files, escaped, with room to spare.
const MaxBatch = 256 << 20

// NewDecoder reads Batches from r.
func NewDecoder(r io.Reader) *Decoder {
	in := &batchLimit{r: r}
	return &Decoder{dec: json.NewDecoder(in), in: in}
}

// batchLimit fails a read once MaxBatch bytes have been read since the
// last reset.
type batchLimit struct {
	r    io.Reader
	read int
}

func (l *batchLimit) Read(p []byte) (int, error) {
	if l.read >= MaxBatch {
		return 0, fmt.Errorf("a transcript batch over %d MiB: %w", MaxBatch>>20, errdefs.ErrTooLarge)
	}
	n, err := l.r.Read(p[:min(len(p), MaxBatch-l.read)])
	l.read += n
	return n, err
}

// Next returns the next Batch, or io.EOF at the end of a stream that ended
// cleanly.
func (d *Decoder) Next() (Batch, error) {
	var b Batch
	d.in.read = 0 // what the decoder holds of this Batch already counted against the last: at most 2×MaxBatch held
	if err := d.dec.Decode(&b); err != nil {
		if err == io.EOF {
			return Batch{}, io.EOF
		}
		return Batch{}, fmt.Errorf("decode transcript batch: %w", err)
	}
	return b, nil
}
