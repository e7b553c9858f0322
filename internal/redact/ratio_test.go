package redact

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testkit"
)

// A ratioRow is one row of docs/performance.md's redaction table: a path
// (figure) and what it is measured against (reference), each one op over
// the same bytes, returning the CPU time it took.
type ratioRow struct {
	name              string
	target            float64 // the least figure/reference wanted
	bytes             int
	figure, reference func() time.Duration
}

// BenchmarkRatio measures each row's path beside its reference in the same
// rounds, one op of each in turn, on CPU time, so a shared host's load
// weighs on both alike. Each logs one line a script reads, the
// throughputs in cpu-MB/s:
//
//	ratio name=frames figure=190.2 reference=240.7 ratio=0.790 target=0.8 load=3.10
//
// Run it with -test.cpu 1 (the paths are single-threaded; so is
// gitleaks' detector as the dense row runs it).
func BenchmarkRatio(b *testing.B) {
	values := benchValues()
	s := mustSet(b, values...)
	term := benchText(1<<20, values)
	Scrub("") // the registries are built once a process
	ScrubMarked("")
	markedFrameRules() // and a Writer's
	allFrameRules()
	dense := denseSecrets(128 << 10)
	rows := []ratioRow{
		{
			// Hub.WatcherMask: an Event's text by value, then by the
			// Marked rules, in 16 KiB tool results.
			name: "events", target: 0.8, bytes: len(term),
			figure:    timed(func() { events(s, term, ScrubMarked) }),
			reference: timed(func() { events(s, term, func(t string) string { return t }) }),
		},
		{
			// A Session's terminal frames, 4 KiB pieces through a Writer.
			name: "frames", target: 0.8, bytes: len(term),
			figure:    timed(func() { frames(s, term, "marked") }),
			reference: timed(func() { frames(s, term, "none") }),
		},
		{
			name: "frames-marked-vs-all", target: 1, bytes: len(term),
			figure:    timed(func() { frames(s, term, "marked") }),
			reference: timed(func() { frames(s, term, "all") }),
		},
		logsRow(term),
		{
			// Scrub, every rule, against gitleaks' own detector with
			// its default config, over text dense with credentials,
			// given a line at a time (its quickest use) or as it reads
			// a file.
			name: "dense-vs-gitleaks", target: 50, bytes: len(dense),
			figure:    timed(func() { Scrub(dense) }),
			reference: gitleaksDetect(b, "lines", dense),
		},
		{
			name: "dense-vs-gitleaks-files", target: 50, bytes: len(dense),
			figure:    timed(func() { Scrub(dense) }),
			reference: gitleaksDetect(b, "file", dense),
		},
	}
	for _, row := range rows {
		b.Run(row.name, func(b *testing.B) {
			var fig, ref time.Duration
			for b.Loop() {
				ref += row.reference()
				fig += row.figure()
			}
			mbps := func(d time.Duration) float64 { return float64(row.bytes) * float64(b.N) / d.Seconds() / 1e6 }
			f, r := mbps(fig), mbps(ref)
			b.ReportMetric(f, "cpu-MB/s")
			b.ReportMetric(r, "ref-cpu-MB/s")
			b.ReportMetric(f/r, "ratio")
			b.Logf("ratio name=%s figure=%.2f reference=%.2f ratio=%.3f target=%g load=%s", row.name, f, r, f/r, row.target, loadAverage())
		})
	}
}

// timed makes f a side of a row: it returns the CPU time f took.
func timed(f func()) func() time.Duration {
	return func() time.Duration {
		start := cpuTime()
		f()
		return cpuTime() - start
	}
}

// events masks text as the Hub masks an Event's, in 16 KiB pieces: by
// value, then with shapes.
func events(s *Set, text []byte, shapes func(string) string) {
	for i := 0; i < len(text); i += 16 << 10 {
		shapes(s.Redact(string(text[i:min(i+16<<10, len(text))])))
	}
}

// frames passes text through a Writer in 4 KiB pieces, with the shapes
// none, marked or all.
func frames(s *Set, text []byte, shapes string) {
	w := NewWriter(s, io.Discard)
	if shapes != "none" {
		w.MaskShapes(shapes == "all")
	}
	for i := 0; i < len(text); i += 4 << 10 {
		w.Write(text[i:min(i+4<<10, len(text))])
	}
	w.Close()
}

// logsRow: the operator's log, each record's message and attributes
// through LogHandler (every rule) to a text handler, a line of the
// terminal text and an error a record, against the text handler alone.
func logsRow(term []byte) ratioRow {
	lines := strings.Split(string(term), "\r\n")
	err := errors.New("dial tcp 10.0.0.7:443: connect: connection refused")
	n := 0
	for _, l := range lines {
		n += len(l) + len(err.Error())
	}
	log := func(h slog.Handler) func() time.Duration {
		l := slog.New(h)
		return timed(func() {
			for _, line := range lines {
				l.Info(line, "err", err)
			}
		})
	}
	plain := slog.NewTextHandler(io.Discard, nil)
	return ratioRow{name: "logs", target: 0.8, bytes: n, figure: log(LogHandler(plain)), reference: log(plain)}
}

// loadAverage is the host's load average over the last minute.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

// gitleaksDetect returns a row's side that runs gitleaks' detector over
// text in a process of its own (GOMAXPROCS=1), by lines or as a file
// (testdata/gitleaks/timer), and returns the CPU time of the detection
// alone, as that process measured it.
func gitleaksDetect(b *testing.B, mode, text string) func() time.Duration {
	bin := buildGitleaksTimer(b)
	file := filepath.Join(b.TempDir(), "text")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	return func() time.Duration {
		cmd := exec.Command(bin, mode, file)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("%s: %v", bin, err)
		}
		var ns int64
		var findings int
		if _, err := fmt.Sscan(string(out), &ns, &findings); err != nil || findings == 0 {
			b.Fatalf("%s printed %q, want its CPU nanoseconds and a count of findings above 0", bin, out)
		}
		return time.Duration(ns)
	}
}

func buildGitleaksTimer(b *testing.B) string {
	b.Helper()
	src, err := os.ReadFile("testdata/gitleaks/timer/main.go")
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(src)
	bin := filepath.Join(testkit.CacheDir(), fmt.Sprintf("gitleaks-%s-timer-%x", gitleaksVersion, sum[:6]))
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	goTool, mod := gitleaksSource(b)
	dir := filepath.Join(mod, "cmd", "kndltimer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		b.Fatal(err)
	}
	build := exec.Command(goTool, "build", "-o", bin+".tmp", "./cmd/kndltimer")
	build.Dir = mod
	build.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building gitleaks' detector: %v\n%s", err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		b.Fatal(err)
	}
	return bin
}
