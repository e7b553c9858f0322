package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kndl.dev/kndl/internal/protocol"
)

// MaxLine bounds one transcript line. A longer one (Claude Code writes a
// pasted image or a huge tool output into one line) is skipped, with a
// note Event, and never held in memory whole.
const MaxLine = 16 << 20

// maxRead bounds what one Poll reads from each file, so a first Poll of a
// long transcript returns a batch of bounded size; Poll again at once while
// More reports true.
const maxRead = 8 << 20

// Offsets is how far each file has been read: for each file, the byte just
// after the last complete line read. Its keys are paths relative to the
// project directory, with "/": "<conversation>.jsonl" and
// "<conversation>/subagents/agent-<id>.jsonl".
type Offsets map[string]int64

// Stats counts what a Tailer has skipped since it was made.
type Stats struct {
	Lines     int // complete lines read
	Malformed int // lines that are not JSON records, skipped
	TooLong   int // lines over MaxLine, skipped
}

// Tailer reads a conversation's transcript and its subagents' files as
// Claude Code appends to them. It is not safe for concurrent use.
type Tailer struct {
	main      string // the main file's path
	subagents string // the directory of subagent files
	base      string // what Offsets' keys are relative to
	offsets   Offsets
	parents   map[string]string // agent id -> the Agent tool call's id
	br        *bufio.Reader
	line      []byte
	stats     Stats
	more      bool
}

// New returns a Tailer for the transcript at path (claude.TranscriptPath)
// and its subagents' files, resuming from offsets (nil: from the start).
// Neither needs to exist yet.
func New(path string, offsets Offsets) *Tailer {
	base := filepath.Dir(path)
	conv := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	if offsets == nil {
		offsets = Offsets{}
	}
	return &Tailer{
		main:      path,
		subagents: filepath.Join(base, conv, "subagents"),
		base:      base,
		offsets:   maps.Clone(offsets), // never nil
		parents:   map[string]string{},
		br:        bufio.NewReaderSize(nil, 64<<10),
	}
}

// Stats returns what the Tailer has read and skipped so far.
func (t *Tailer) Stats() Stats { return t.stats }

// More reports whether the last Poll stopped before the end of a file, to
// bound its batch: poll again without waiting.
func (t *Tailer) More() bool { return t.more }

// Poll reads the complete lines appended since the last Poll to the main
// transcript and to every subagent file, and returns their Events and the
// offsets to resume from. Each file's Events keep its order; files are
// interleaved by time. A file that does not exist yet has nothing to read;
// a file shorter than its offset (truncated or replaced) is read again from
// its start, with a note. A malformed line is skipped and counted. Notes of
// the Tailer's own carry the time they were made. On an error, the Events
// read before it are returned with the offsets that match them.
func (t *Tailer) Poll() ([]protocol.Event, Offsets, error) {
	t.more = false
	files := []string{t.main}
	entries, err := os.ReadDir(t.subagents)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, t.Offsets(), fmt.Errorf("read transcript: %w", err)
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, "agent-") && strings.HasSuffix(name, ".jsonl") {
			files = append(files, filepath.Join(t.subagents, name))
		}
	}
	var perFile [][]protocol.Event
	for _, f := range files {
		evs, err := t.read(f)
		if len(evs) > 0 {
			perFile = append(perFile, evs)
		}
		if err != nil {
			return merge(perFile), t.Offsets(), err
		}
	}
	return merge(perFile), t.Offsets(), nil
}

// Offsets returns a copy of how far each file has been read.
func (t *Tailer) Offsets() Offsets { return maps.Clone(t.offsets) }

// read reads file's new complete lines from its offset.
func (t *Tailer) read(file string) ([]protocol.Event, error) {
	key, _ := filepath.Rel(t.base, file)
	key = filepath.ToSlash(key)
	fi, err := os.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	off, size := t.offsets[key], fi.Size()
	if off == size {
		return nil, nil
	}
	var events []protocol.Event
	if off > size || off < 0 {
		events = append(events, protocol.Event{At: time.Now(), Kind: protocol.EventNote,
			Text: fmt.Sprintf("The transcript file %s is shorter than what was read of it (%d bytes of %d): reading it again from its start.", key, size, off)})
		off = 0
	}
	src, err := t.source(file)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	defer f.Close()

	// An offset in the middle of a line (left after a line over MaxLine, or
	// given by someone else) skips to the next line.
	skipping := false
	if off > 0 {
		var b [1]byte
		if _, err := f.ReadAt(b[:], off-1); err != nil {
			return nil, fmt.Errorf("read transcript %s: %w", key, err)
		}
		skipping = b[0] != '\n'
	}
	t.br.Reset(io.NewSectionReader(f, off, size-off))
	start, pos := off, off // pos: of br's next byte
	t.line = t.line[:0]
	for {
		frag, err := t.br.ReadSlice('\n')
		pos += int64(len(frag))
		if err != nil && err != bufio.ErrBufferFull && err != io.EOF {
			return nil, fmt.Errorf("read transcript %s: %w", key, err)
		}
		complete := err == nil
		switch {
		case skipping:
			// Consume it all, so a restarted reader skips on.
			off, skipping = pos, !complete
		case !complete && len(t.line)+len(frag) > MaxLine:
			t.stats.TooLong++
			events = append(events, protocol.Event{At: time.Now(), Kind: protocol.EventNote, Agent: src.Agent, Parent: src.Parent,
				Text: fmt.Sprintf("A transcript line over %d MB was skipped.", MaxLine>>20)})
			t.line, skipping, off = t.line[:0], true, pos
		case !complete:
			t.line = append(t.line, frag...)
		default:
			line := frag
			if len(t.line) > 0 {
				t.line = append(t.line, frag...)
				line = t.line
			}
			if evs, err := t.parse(line, src); err == nil {
				events = append(events, evs...)
			}
			t.line, off = t.line[:0], pos
		}
		if err == io.EOF || (complete && pos-start >= maxRead) {
			// At EOF, a line still being written is read whole next time.
			t.offsets[key] = off
			if err != io.EOF {
				t.more = true
			}
			if cap(t.line) > 1<<20 {
				t.line = nil // keep no long line's buffer between polls
			}
			return events, nil
		}
	}
}

func (t *Tailer) parse(line []byte, src Source) ([]protocol.Event, error) {
	t.stats.Lines++
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	if skip(line) {
		return nil, nil
	}
	evs, err := Parse(line, src)
	if err != nil {
		t.stats.Malformed++
	}
	return evs, err
}

// noisy are record types that never make an Event and begin their line
// with their type: most of a transcript's bytes are in them (api-request-
// shape is about 40 KB per model call). They are skipped without decoding.
var noisy = [][]byte{
	[]byte(`{"type":"api-request`),
	[]byte(`{"type":"mode"`),
	[]byte(`{"type":"permission-mode"`),
	[]byte(`{"type":"atis-latch"`),
	[]byte(`{"type":"tools-used"`),
	[]byte(`{"type":"last-prompt"`),
	[]byte(`{"type":"cost-state"`),
	[]byte(`{"type":"queue-operation"`),
	[]byte(`{"type":"file-history-snapshot"`),
}

// skip reports whether line is a record that makes no Event, found
// cheaply. A line it cannot tell about is decoded.
func skip(line []byte) bool {
	for _, p := range noisy {
		if bytes.HasPrefix(line, p) {
			return true
		}
	}
	// Attachments other than queued prompts and a hook's stop,
	// prompt_snapshot (60 KB) among them, name their type near the start.
	head := line[:min(len(line), 300)]
	if i := bytes.Index(head, []byte(`"attachment":{"type":"`)); i >= 0 {
		typ := head[i+len(`"attachment":{"type":"`):]
		return !bytes.HasPrefix(typ, []byte(`queued_command"`)) && !bytes.HasPrefix(typ, []byte(`hook_stopped_continuation"`))
	}
	return false
}

// source is who file's records come from: for a subagent's, its id and the
// Agent tool call that started it, from the .meta.json Claude Code writes
// beside it (read until found).
func (t *Tailer) source(file string) (Source, error) {
	if file == t.main {
		return Source{}, nil
	}
	id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "agent-"), ".jsonl")
	if p, ok := t.parents[id]; ok {
		return Source{Agent: id, Parent: p}, nil
	}
	data, err := os.ReadFile(strings.TrimSuffix(file, ".jsonl") + ".meta.json")
	if errors.Is(err, fs.ErrNotExist) {
		return Source{Agent: id}, nil
	}
	if err != nil {
		return Source{}, fmt.Errorf("read transcript: %w", err)
	}
	var meta struct {
		ToolUseID string `json:"toolUseId"`
	}
	if json.Unmarshal(data, &meta) == nil && meta.ToolUseID != "" {
		t.parents[id] = meta.ToolUseID
	}
	return Source{Agent: id, Parent: meta.ToolUseID}, nil
}

// merge interleaves each file's Events by time, keeping each file's order.
func merge(perFile [][]protocol.Event) []protocol.Event {
	if len(perFile) == 1 {
		return perFile[0]
	}
	var out []protocol.Event
	for {
		best := -1
		for i, evs := range perFile {
			if len(evs) > 0 && (best < 0 || evs[0].At.Before(perFile[best][0].At)) {
				best = i
			}
		}
		if best < 0 {
			return out
		}
		out = append(out, perFile[best][0])
		perFile[best] = perFile[best][1:]
	}
}
