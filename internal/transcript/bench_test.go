package transcript

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// bigTranscript writes a transcript of at least size bytes made of the
// lines Claude Code wrote in testdata/, repeated: the real mix of records
// (most of the bytes are api-request-shape and prompt_snapshot noise).
func bigTranscript(b *testing.B, size int) string {
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	var recorded []byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		recorded = append(recorded, data...)
	}
	if len(recorded) == 0 {
		b.Fatal("no recorded transcripts in testdata/")
	}
	path := filepath.Join(b.TempDir(), conv+".jsonl")
	if err := os.WriteFile(path, bytes.Repeat(recorded, size/len(recorded)+1), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkPoll50MB reads a 50 MB transcript from the start, as a Runner
// does on a long Session's first Follow: Poll until More is false.
func BenchmarkPoll50MB(b *testing.B) {
	path := bigTranscript(b, 50<<20)
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	var events, polls int
	for b.Loop() {
		tl := New(path, nil)
		events, polls = 0, 0
		for {
			evs, _, err := tl.Poll()
			if err != nil {
				b.Fatal(err)
			}
			events, polls = events+len(evs), polls+1
			if !tl.More() {
				break
			}
		}
	}
	b.ReportMetric(float64(events), "events")
	b.ReportMetric(float64(polls), "polls")
}

// BenchmarkPollIdle is one Poll with nothing new, what Follow does every
// 50 ms while Claude Code waits, with the main file and two subagents'.
func BenchmarkPollIdle(b *testing.B) {
	path := bigTranscript(b, 50<<20)
	subs := filepath.Join(filepath.Dir(path), conv, "subagents")
	os.MkdirAll(subs, 0o755)
	for _, id := range []string{"a1", "a2"} {
		os.WriteFile(filepath.Join(subs, "agent-"+id+".jsonl"), []byte(prompt("x")), 0o644)
		os.WriteFile(filepath.Join(subs, "agent-"+id+".meta.json"), []byte(`{"toolUseId":"t"}`), 0o644)
	}
	tl := New(path, nil)
	for {
		if _, _, err := tl.Poll(); err != nil {
			b.Fatal(err)
		}
		if !tl.More() {
			break
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if evs, _, err := tl.Poll(); err != nil || len(evs) > 0 {
			b.Fatalf("idle poll: %d events, %v", len(evs), err)
		}
	}
}
