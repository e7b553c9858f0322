package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// events is the output of go test -json, made an event at a time.
type events struct{ strings.Builder }

func (e *events) emit(action, test, output string, elapsed float64) {
	b, _ := json.Marshal(event{Action: action, Package: "kndl.dev/kndl/tests/e2e", Test: test, Output: output, Elapsed: elapsed})
	e.Write(append(b, '\n'))
}

// report is what testtimes writes, given them.
func (e *events) report() string {
	var out strings.Builder
	report(strings.NewReader(e.String()), &out)
	return out.String()
}

// TestAFailedTestsWordsComeLastNotItsSystemLog: the report's tail names
// what a failed test failed with, cut to its width, and not the goroutines
// and system log its System printed after; a passed test's output is not
// printed.
func TestAFailedTestsWordsComeLastNotItsSystemLog(t *testing.T) {
	var in events
	emit := in.emit
	emit("run", "TestPasses", "", 0)
	emit("output", "TestPasses", "    a_test.go:9: fine words\n", 0)
	emit("pass", "TestPasses", "", 1.5)
	emit("run", "TestFails", "", 0)
	emit("output", "TestFails", "=== RUN   TestFails\n", 0)
	emit("output", "TestFails", "    a_test.go:10: the Runner connected\n", 0)
	emit("output", "TestFails", "    browser_test.go:135: both helpers listed: not within 30s: context deadline exceeded\n", 0)
	emit("output", "TestFails", "        the page showed http://x/sessions/1\n", 0)
	emit("output", "TestFails", "        text: "+strings.Repeat("é", 300)+"\n", 0)
	emit("output", "TestFails", "    system_test.go:516: goroutines of the test process (every System's in it):\n", 0)
	emit("output", "TestFails", "        goroutine 1 [running]:\n", 0)
	emit("output", "TestFails", "    system_test.go:519: system log:\n", 0)
	emit("output", "TestFails", "        level=DEBUG msg=\"a hook of the mod fired\"\n", 0)
	emit("output", "TestFails", "--- FAIL: TestFails (39.55s)\n", 0)
	emit("fail", "TestFails", "", 39.55)

	got := in.report()
	want := "TestFails failed with:\n" +
		"    browser_test.go:135: both helpers listed: not within 30s: context deadline exceeded\n" +
		"        the page showed http://x/sessions/1\n" +
		"        text: " + strings.Repeat("é", width-len("        text: ")) + "…\n"
	if !strings.HasSuffix(got, want) {
		t.Fatalf("the report ends\n%s\nwant it to end\n%s", got, want)
	}
	if strings.Contains(got, "fine words") || !strings.Contains(got, "a hook of the mod fired") {
		t.Fatalf("the report printed a passed test's output or dropped a failed one's:\n%s", got)
	}
	if !strings.Contains(got, "   39.5 s  TestFails FAIL\n") {
		t.Fatalf("the report does not list the failed test's time:\n%s", got)
	}
}

// TestAPassedTestsStallIsPrintedWhole: a passed test's "stall:" entry is
// printed whole, after the slowest tests, and its other words are not.
func TestAPassedTestsStallIsPrintedWhole(t *testing.T) {
	var in events
	emit := in.emit
	long := strings.Repeat("x", 2*width)
	emit("output", "TestSlowEnd", "    a_test.go:9: fine words\n", 0)
	emit("output", "TestSlowEnd", "    system_test.go:548: stall: the Runner's Run returned 12s after its context ended; the log's last 40 lines:\n", 0)
	emit("output", "TestSlowEnd", "        level=WARN msg=\"some of the Runner's work did not end in time\" goroutines="+long+"\n", 0)
	emit("output", "TestSlowEnd", "    a_test.go:12: later words\n", 0)
	emit("pass", "TestSlowEnd", "", 30)
	emit("output", "TestQuick", "    a_test.go:9: no stall: the word, not at the start\n", 0)
	emit("pass", "TestQuick", "", 1)

	got := in.report()
	want := "TestSlowEnd passed, but logged a stall:\n" +
		"    system_test.go:548: stall: the Runner's Run returned 12s after its context ended; the log's last 40 lines:\n" +
		"        level=WARN msg=\"some of the Runner's work did not end in time\" goroutines=" + long + "\n"
	if !strings.HasSuffix(got, want) {
		t.Fatalf("the report ends\n%s\nwant it to end\n%s", got, want)
	}
	if strings.Contains(got, "fine words") || strings.Contains(got, "later words") || strings.Contains(got, "TestQuick passed") {
		t.Fatalf("the report printed a passed test's other words:\n%s", got)
	}
}
