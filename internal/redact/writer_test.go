package redact

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// sink is an io.Writer the tests read while a timer may write to it.
type sink struct {
	mu     sync.Mutex
	b      strings.Builder
	writes int
	err    error
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	s.writes++
	return s.b.Write(p)
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestWriterReleasesTheSafePrefixAtOnceAndTheTailAfterTheDeadline(t *testing.T) {
	var out sink
	w := NewWriter(mustSet(t, "s3cr3t-value"), &out)
	defer w.Close()

	start := time.Now()
	if _, err := w.Write([]byte("hello world s3cr")); err != nil {
		t.Fatal(err)
	}
	// Written before Write returned: no waiting for it.
	if got := out.String(); got != "hello world " {
		t.Fatalf("after Write: got %q, want %q", got, "hello world ")
	}
	testenv.Eventually(t, testenv.WaitShort, "the held tail is released", func() bool {
		return out.String() == "hello world s3cr"
	})
	if d := time.Since(start); d < MaxHold {
		t.Errorf("the tail came out after %v, want at least MaxHold (%v)", d, MaxHold)
	}

	// After the deadline the tail is out: the rest of the value is no
	// longer matched, as the spec allows.
	if _, err := w.Write([]byte("3t-value!")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "hello world s3cr3t-value!" {
		t.Errorf("got %q", got)
	}
}

func TestWriterCatchesAValueSplitAcrossWrites(t *testing.T) {
	var out sink
	w := NewWriter(mustSet(t, "s3cr3t-value"), &out)
	for _, p := range []string{"key=s3c", "r3t", "-va", "lue\r\n"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "key="+stars(12)+"\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestWriterFlushAndClose(t *testing.T) {
	var out sink
	w := NewWriter(mustSet(t, "s3cr3t-value"), &out)
	w.Write([]byte("a s3cr"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "a s3cr" {
		t.Errorf("after Flush: got %q, want %q", got, "a s3cr")
	}
	w.Write([]byte(" b s3"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "a s3cr b s3" {
		t.Errorf("after Close: got %q, want %q", got, "a s3cr b s3")
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: got %v, want ErrClosed", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: got %v", err)
	}
}

func TestWriterKeepsTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	out := &sink{err: boom}
	w := NewWriter(mustSet(t, "s3cr3t-value"), out)
	if _, err := w.Write([]byte("text")); !errors.Is(err, boom) {
		t.Fatalf("Write: got %v, want %v", err, boom)
	}
	if _, err := w.Write([]byte("more")); !errors.Is(err, boom) {
		t.Errorf("second Write: got %v, want %v", err, boom)
	}
	if err := w.Close(); !errors.Is(err, boom) {
		t.Errorf("Close: got %v, want %v", err, boom)
	}
}

// Writes from many goroutines (run with -race) lose nothing and leak no
// value; the timer's flushes interleave with them safely.
func TestWriterIsSafeForConcurrentUse(t *testing.T) {
	var out sink
	w := NewWriter(mustSet(t, "s3cr3t-value"), &out)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				w.Write([]byte("line s3cr3t-value\n"))
			}
		})
	}
	wg.Wait()
	w.Close()
	got := out.String()
	if strings.Contains(got, "s3cr3t") || strings.Count(got, "line "+stars(12)+"\n") != 800 {
		t.Errorf("got %d bytes with %d masked lines, want 800 and no value", len(got), strings.Count(got, "line "+stars(12)+"\n"))
	}
}

// A Writer with MaskShapes masks a marked credential nobody registered,
// split across Writes at every offset and coloured, character for
// character, with the rule's mark; the rest of the output passes as it
// came, and an assignment only with every rule.
func TestWriterMasksShapesSplitAtEveryOffset(t *testing.T) {
	slack := "xoxb-781236542736-2364535789652-GkwFDQoHqzXDVsC6GzqYUypD"
	text := "\x1b[32m$ cat .env\x1b[0m\r\nSLACK=\x1b[1m" + slack + "\x1b[0m\r\nAPI_SECRET=Zq8rT2vLm9Xc4Kp7Wd1Hs6Nb3\r\n"
	mark := Mark("slack-bot-token")
	masked := mark + stars(len(slack)-len(mark))
	for _, all := range []bool{false, true} {
		want := strings.Replace(text, slack, masked, 1)
		if all {
			want = strings.Replace(want, "Zq8rT2vLm9Xc4Kp7Wd1Hs6Nb3", Mark("generic-api-key"), 1)
		}
		for cut := 0; cut <= len(text); cut++ {
			var out sink
			w := NewWriter(mustSet(t, "first-value-1"), &out).MaskShapes(all)
			w.Write([]byte(text[:cut]))
			if got := out.String(); strings.Contains(got, "GkwFDQoHqzXD") {
				t.Fatalf("all=%v, cut %d: released part of the token before its end: %q", all, cut, got)
			}
			w.Write([]byte(text[cut:]))
			w.Close()
			if got := out.String(); got != want {
				t.Fatalf("all=%v, cut %d:\ngot  %q\nwant %q", all, cut, got, want)
			}
		}
	}
}

// What the shapes hold back, the end of a piece that could be an
// unfinished token, goes out by the deadline; a piece that ends in a
// control sequence, as a screen is drawn, goes at once.
func TestWriterReleasesAHeldTokenAfterTheDeadline(t *testing.T) {
	var out sink
	w := NewWriter(new(Set), &out).MaskShapes(false)
	defer w.Close()
	w.Write([]byte("$ git stat\x1b[K\x1b[38;5;244m"))
	if got := out.String(); got != "$ git stat\x1b[K\x1b[38;5;244m" {
		t.Fatalf("a drawn line was held: got %q", got)
	}
	out.b.Reset()
	w.Write([]byte("building xoxb-7812365"))
	if got := out.String(); got != "building " {
		t.Fatalf("after Write: got %q, want %q", got, "building ")
	}
	testenv.Eventually(t, testenv.WaitShort, "the held token start is released", func() bool {
		return out.String() == "building xoxb-7812365"
	})
}

// TestAWriterMasksShapesWithoutAllocatingPerPiece: a MiB of terminal
// output in 4 KiB pieces through a Writer with 50 values and the Marked
// shapes, the Hub's default for terminal frames, allocates for its
// buffers as they grow and for the few credentials in it, not for each
// piece or each byte (it allocated 531 times a MiB, two a piece).
func TestAWriterMasksShapesWithoutAllocatingPerPiece(t *testing.T) {
	values := benchValues()
	s := mustSet(t, values...)
	text := benchText(1<<20, values)
	for _, all := range []bool{false, true} {
		if allocs := writerAllocs(s, text, all); allocs > 64 {
			t.Errorf("all=%v: got %.0f allocations for 1 MiB in %d pieces, want at most 64", all, allocs, len(text)/(4<<10))
		}
	}
}

// TestTheMarkedPathsAllocateOnlyForTheRegexpsMatches: the Marked rules,
// through a Writer (terminal frames) and ScrubMarked in 16 KiB pieces
// (Events), over a MiB of near misses (a needed word every few bytes) and
// of credentials (one nearly every line), allocate only for what Go's
// regexp returns when a rule's regexp matches, not at each place a word
// is found, nor for each credential's mark. A hand-read tail made its
// submatch indexes and each mask its Mark at every one: 690 and 13,821
// allocations a MiB through the Writer, 742 and 14,408 through
// ScrubMarked; now about 240 and 2,000, 290 and 2,600.
func TestTheMarkedPathsAllocateOnlyForTheRegexpsMatches(t *testing.T) {
	s := mustSet(t, benchValues()...)
	tests := []struct {
		name   string
		text   string
		atMost float64 // a MiB, either path
	}{
		{"near misses", nearMisses(1 << 20), 400},
		{"dense", denseSecrets(1 << 20), 3200},
	}
	for _, tt := range tests {
		if got := writerAllocs(s, []byte(tt.text), false); got > tt.atMost {
			t.Errorf("%s through a Writer: got %.0f allocations a MiB, want at most %.0f", tt.name, got, tt.atMost)
		}
		pieces := make([]string, 0, len(tt.text)/(16<<10)+1)
		for i := 0; i < len(tt.text); i += 16 << 10 {
			pieces = append(pieces, tt.text[i:min(i+16<<10, len(tt.text))])
		}
		got := testing.AllocsPerRun(2, func() {
			for _, p := range pieces {
				ScrubMarked(p)
			}
		})
		if got > tt.atMost {
			t.Errorf("%s through ScrubMarked: got %.0f allocations a MiB, want at most %.0f", tt.name, got, tt.atMost)
		}
	}
}

// writerAllocs is the allocations a Writer with s's values and the
// Marked shapes (every rule, with all) makes for text in 4 KiB pieces.
func writerAllocs(s *Set, text []byte, all bool) float64 {
	return testing.AllocsPerRun(2, func() {
		w := NewWriter(s, io.Discard).MaskShapes(all)
		for i := 0; i < len(text); i += 4 << 10 {
			w.Write(text[i:min(i+4<<10, len(text))])
		}
		w.Close()
	})
}

// TestSpaceEscapesMakesEachESCASpaceAndNothingElse: at every place of
// texts up to 40 bytes long, beside bytes one bit away from ESC.
func TestSpaceEscapesMakesEachESCASpaceAndNothingElse(t *testing.T) {
	for n := range 41 {
		for at := range n {
			text := bytes.Repeat([]byte{0x1b ^ 0x80, 0x1a, 0x1f, 0x3b, 0x9b}, n)[:n]
			text[at] = 0x1b
			text[n-1-at] = 0x1b
			want := bytes.ReplaceAll(text, []byte{0x1b}, []byte{' '})
			if got := spaceEscapes(nil, text); !bytes.Equal(got, want) {
				t.Errorf("spaceEscapes(%q):\ngot  %q\nwant %q", text, got, want)
			}
		}
	}
}
