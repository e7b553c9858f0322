package transcript_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/transcript"
)

const conv = "6596ccea-8424-44f5-9e14-078123b5520c"

func promptLine(text string) string {
	return fmt.Sprintf(`{"type":"user","message":{"role":"user","content":%q},"timestamp":"2026-11-30T09:02:10.618Z","origin":{"kind":"human"}}`+"\n", text)
}

func appendTo(t *testing.T, path, data string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(data)
}

// running is Follow started in the background, its batches decoded.
type running struct {
	batches chan transcript.Batch
	done    chan error
}

func startFollow(t *testing.T, ctx context.Context, opts transcript.Options) *running {
	pr, pw := io.Pipe()
	r := &running{batches: make(chan transcript.Batch, 100), done: make(chan error, 1)}
	go func() {
		err := transcript.Follow(ctx, opts, pw)
		pw.Close()
		r.done <- err
	}()
	go func() {
		dec := transcript.NewDecoder(pr)
		for {
			b, err := dec.Next()
			if err != nil {
				close(r.batches)
				return
			}
			r.batches <- b
		}
	}()
	return r
}

func (r *running) next(t *testing.T) transcript.Batch {
	t.Helper()
	select {
	case b, ok := <-r.batches:
		if !ok {
			t.Fatal("Follow's output ended")
		}
		return b
	case <-time.After(testenv.WaitShort):
		t.Fatal("no batch from Follow")
	}
	return transcript.Batch{}
}

func (r *running) exited(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(testenv.WaitShort):
		t.Fatal("Follow did not return")
	}
	return nil
}

func TestFollowStreamsBatchesAndResumes(t *testing.T) {
	config, cwd := t.TempDir(), "/workspace"
	path := claude.TranscriptPath(config, cwd, conv)
	opts := transcript.Options{ConfigDir: config, Cwd: cwd, Conversation: conv, Interval: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	r := startFollow(t, ctx, opts)

	appendTo(t, path, promptLine("one"))
	b := r.next(t)
	if len(b.Events) != 2 || b.Events[1].Text != "one" || b.Offsets[conv+".jsonl"] != int64(len(promptLine("one"))) {
		t.Errorf("first batch: got %+v", b)
	}
	appendTo(t, path, `{"type":"mode","mode":"normal"}`+"\n"+promptLine("two"))
	if b = r.next(t); len(b.Events) != 2 || b.Events[1].Text != "two" {
		t.Errorf("second batch: got %+v, want only the new prompt", b)
	}
	cancel()
	if err := r.exited(t); err != nil {
		t.Errorf("Follow after cancel: got %v, want nil", err)
	}

	// A Follow restarted from the last batch's offsets sends only what is new.
	appendTo(t, path, promptLine("three"))
	opts.Offsets = b.Offsets
	stdin, closeStdin := io.Pipe()
	opts.Stdin = stdin
	r = startFollow(t, context.Background(), opts)
	if b = r.next(t); len(b.Events) != 2 || b.Events[1].Text != "three" {
		t.Errorf("after a restart: got %+v, want only the prompt written meanwhile", b)
	}
	closeStdin.Close()
	if err := r.exited(t); err != nil {
		t.Errorf("Follow after stdin closed: got %v, want nil", err)
	}
}

// An idle follower sleeps until inotify says the transcript changed: with
// no poll for an hour, each write still reaches the Runner at once, as
// does a subagent's file in a directory made after Follow started.
func TestFollowWakesOnEachWriteWithoutPolling(t *testing.T) {
	config, cwd := t.TempDir(), "/workspace"
	path := claude.TranscriptPath(config, cwd, conv)
	opts := transcript.Options{ConfigDir: config, Cwd: cwd, Conversation: conv, Interval: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := startFollow(t, ctx, opts)
	within := func(what string) transcript.Batch {
		t.Helper()
		select {
		case b := <-r.batches:
			return b
		case <-time.After(2 * time.Second):
			t.Fatalf("no batch 2 s after %s", what)
		}
		return transcript.Batch{}
	}
	time.Sleep(50 * time.Millisecond) // Follow's first poll found nothing
	sub := filepath.Join(filepath.Dir(path), conv, "subagents", "agent-a1.jsonl")
	for _, step := range []struct{ file, text, what string }{
		{path, "one", "the transcript was made"},
		{path, "two", "a line was added"},
		{sub, "three", "a subagent's file was made"},
		{sub, "four", "a subagent's line was added"},
	} {
		appendTo(t, step.file, promptLine(step.text))
		if b := within(step.what); b.Events[len(b.Events)-1].Text != step.text {
			t.Errorf("after %s: got %+v", step.what, b)
		}
	}
}

func TestFollowRefusesBadOptions(t *testing.T) {
	for _, opts := range []transcript.Options{
		{Cwd: "/workspace", Conversation: conv},
		{ConfigDir: "/c", Conversation: conv},
		{ConfigDir: "/c", Cwd: "/workspace"},
		{ConfigDir: "/c", Cwd: "/workspace", Conversation: "../" + conv},
		{ConfigDir: "/c", Cwd: "/workspace", Conversation: ".."},
	} {
		if err := transcript.Follow(context.Background(), opts, io.Discard); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Follow(%+v): got %v, want ErrInvalid", opts, err)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestFollowReturnsWhenItCannotWrite(t *testing.T) {
	config := t.TempDir()
	appendTo(t, claude.TranscriptPath(config, "/workspace", conv), promptLine("one"))
	err := transcript.Follow(context.Background(), transcript.Options{ConfigDir: config, Cwd: "/workspace", Conversation: conv}, failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Errorf("got %v, want the write error", err)
	}
}

func TestDecoder(t *testing.T) {
	dec := transcript.NewDecoder(strings.NewReader(`{"events":[{"at":"2026-11-30T09:02:10.618Z","kind":"prompt","text":"hi"}],"offsets":{"a.jsonl":12}}` + "\n"))
	b, err := dec.Next()
	if err != nil || len(b.Events) != 1 || b.Events[0].Text != "hi" || b.Offsets["a.jsonl"] != 12 {
		t.Errorf("got %+v (%v)", b, err)
	}
	if _, err := dec.Next(); err != io.EOF {
		t.Errorf("at the end: got %v, want io.EOF", err)
	}
	for _, bad := range []string{`{"events":[{"kind":`, `not json`, `{"events":"no"}`} {
		if _, err := transcript.NewDecoder(strings.NewReader(bad)).Next(); err == nil || err == io.EOF {
			t.Errorf("Next on %q: got %v, want an error", bad, err)
		}
	}
}

// TestTheDecoderReadsNoBatchPastMaxBatch: the follower's output is the
// Sandbox's to write; an endless value fails at MaxBatch instead of
// filling the Runner's memory.
func TestTheDecoderReadsNoBatchPastMaxBatch(t *testing.T) {
	endless := io.MultiReader(strings.NewReader(`{"events":[{"text":"`), endlessA{})
	_, err := transcript.NewDecoder(endless).Next()
	if !errors.Is(err, errdefs.ErrTooLarge) {
		t.Fatalf("an endless batch: got %v, want too large", err)
	}
}

type endlessA struct{}

func (endlessA) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}
