// Command testtimes reads `go test -json` on stdin and writes what a plain
// `go test` would (a failed test's output, each package's ok or FAIL), then
// the 15 slowest top-level tests. scripts/test pipes its e2e phases through
// it, so CI's log says where the e2e suite's time goes (docs/testing.md):
//
//	go test -json ./tests/e2e/ | go run ./scripts/testtimes
//
// It exits 0 whatever the tests did; the pipeline's status is go test's.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// slowest is how many tests the report names.
const slowest = 15

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
}

func main() {
	held := map[string]*strings.Builder{} // a running test's output, printed if it fails
	var times []timing
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			fmt.Println(in.Text()) // not an event: go test's own words
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		key := e.Package + " " + top
		switch {
		case e.Test == "" && (e.Action == "output" || e.Action == "build-output"):
			fmt.Print(e.Output)
		case e.Action == "output":
			if !strings.HasPrefix(strings.TrimSpace(e.Output), "=== ") {
				if held[key] == nil {
					held[key] = &strings.Builder{}
				}
				held[key].WriteString(e.Output)
			}
		case sub || e.Test == "":
		case e.Action == "pass" || e.Action == "skip":
			delete(held, key)
			times = append(times, timing{top, e.Elapsed, false})
		case e.Action == "fail":
			if b := held[key]; b != nil {
				fmt.Print(b.String())
			}
			delete(held, key)
			times = append(times, timing{top, e.Elapsed, true})
		}
	}
	for _, b := range held { // cut off (a timeout's panic): say what they said
		fmt.Print(b.String())
	}
	sort.Slice(times, func(i, j int) bool { return times[i].seconds > times[j].seconds })
	var sum float64
	for _, t := range times {
		sum += t.seconds
	}
	fmt.Printf("slowest tests (of %d, %.0f s in all):\n", len(times), sum)
	for i, t := range times {
		if i == slowest {
			break
		}
		mark := ""
		if t.failed {
			mark = " FAIL"
		}
		fmt.Printf("%7.1f s  %s%s\n", t.seconds, t.name, mark)
	}
}
