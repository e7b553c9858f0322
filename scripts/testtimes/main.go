// Command testtimes reads `go test -json` on stdin and writes what a plain
// `go test` would (a failed test's output, each package's ok or FAIL), then
// the 15 slowest top-level tests. scripts/test pipes its e2e phases through
// it, so CI's log says where the e2e suite's time goes (docs/testing.md):
//
//	go test -json ./tests/e2e/ | go run ./scripts/testtimes
//
// Then each entry a passed test logged as a stall ("stall: …"), whole.
// Last, for each failed test, it repeats the words it failed with, so that
// a report showing only the log's tail names the cause and not only the
// system log a failed e2e System prints after them.
//
// It exits 0 whatever the tests did; the pipeline's status is go test's.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// slowest is how many tests the report names.
const slowest = 15

// A failure's words are cut to lines of width, at most lines of them.
const (
	width = 240
	lines = 16
)

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type timing struct {
	name    string
	seconds float64
	failed  bool
	output  string
}

func main() { report(os.Stdin, os.Stdout) }

// report reads go test -json from in and writes the report to out.
func report(r io.Reader, w io.Writer) {
	held := map[string]*strings.Builder{} // a running test's output, printed if it fails
	var times []timing
	var stalls []string // a passed test's stall entries, printed last
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			fmt.Fprintln(w, in.Text()) // not an event: go test's own words
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		key := e.Package + " " + top
		switch {
		case e.Test == "" && (e.Action == "output" || e.Action == "build-output"):
			fmt.Fprint(w, e.Output)
		case e.Action == "output":
			if !strings.HasPrefix(strings.TrimSpace(e.Output), "=== ") {
				if held[key] == nil {
					held[key] = &strings.Builder{}
				}
				held[key].WriteString(e.Output)
			}
		case sub || e.Test == "":
		case e.Action == "pass" || e.Action == "skip":
			if b := held[key]; b != nil {
				stalls = append(stalls, stalled(top, b.String())...)
			}
			delete(held, key)
			times = append(times, timing{name: top, seconds: e.Elapsed})
		case e.Action == "fail":
			out := ""
			if b := held[key]; b != nil {
				out = b.String()
				fmt.Fprint(w, out)
			}
			delete(held, key)
			times = append(times, timing{top, e.Elapsed, true, out})
		}
	}
	for _, b := range held { // cut off (a timeout's panic): say what they said
		fmt.Fprint(w, b.String())
	}
	sort.Slice(times, func(i, j int) bool { return times[i].seconds > times[j].seconds })
	var sum float64
	for _, t := range times {
		sum += t.seconds
	}
	fmt.Fprintf(w, "slowest tests (of %d, %.0f s in all):\n", len(times), sum)
	for i, t := range times {
		if i == slowest {
			break
		}
		mark := ""
		if t.failed {
			mark = " FAIL"
		}
		fmt.Fprintf(w, "%7.1f s  %s%s\n", t.seconds, t.name, mark)
	}
	for _, st := range stalls {
		fmt.Fprint(w, st)
	}
	for _, t := range times {
		if t.failed && t.output != "" {
			fmt.Fprintf(w, "%s failed with:\n%s", t.name, failure(t.output))
		}
	}
}

// logLine is the start of a line a test logged (t.Log, t.Fatal): its
// file and line.
var logLine = regexp.MustCompile(`^\s+\w+\.go:\d+: `)

// cleanup is the header of what a failed e2e System logs after its test
// has failed (tests/e2e/system_test.go): what follows is not the cause.
const cleanup = "goroutines of the test process"

// stall marks an entry a passed test logged of a wait that ran long
// (tests/e2e/system_test.go): a finding to chase, though nothing failed.
const stall = "stall: "

// stalled returns each entry of a passed test's output that starts with
// stall, whole, under a line naming the test.
func stalled(test, out string) []string {
	var found []string
	in := false
	for _, l := range strings.SplitAfter(out, "\n") {
		if logLine.MatchString(l) {
			in = strings.HasPrefix(logLine.ReplaceAllString(l, ""), stall)
			if in {
				found = append(found, test+" passed, but logged a stall:\n")
			}
		}
		if in {
			found[len(found)-1] += l
		}
	}
	return found
}

// failure returns the last entry a test logged before its System's
// cleanup, which is the one it failed with: its first line and those that
// continue it, each cut to width, at most lines of them.
func failure(out string) string {
	all := strings.Split(out, "\n")
	start := -1
	for i, l := range all {
		if logLine.MatchString(l) {
			if strings.Contains(l, cleanup) {
				break
			}
			start = i
		}
	}
	if start < 0 {
		return "    (no logged line: see its output above)\n"
	}
	var b strings.Builder
	for i, l := range all[start:] {
		if i > 0 && (i == lines || logLine.MatchString(l) || strings.TrimSpace(l) == "") {
			break
		}
		if r := []rune(l); len(r) > width {
			l = string(r[:width]) + "…"
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}
