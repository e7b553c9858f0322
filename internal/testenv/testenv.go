// Package testenv holds what tests share about their environment: one helper
// per need (root, a command on PATH), the rule that under CI a missing need
// fails instead of skipping, and the deadlines tests poll with. Only tests
// import it.
package testenv

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Deadlines for polling a condition; never sleep to wait.
const (
	WaitShort  = 5 * time.Second
	WaitMedium = 30 * time.Second
	WaitLong   = 2 * time.Minute
	// WaitBuild bounds steps that build a root filesystem or download a
	// release, which take minutes on a fresh machine.
	WaitBuild = 10 * time.Minute
	tick      = 10 * time.Millisecond
)

// Strict reports whether a missing need must fail the test: under CI=true or
// KNDL_E2E=1, so CI can never go green by skipping.
func Strict() bool {
	return os.Getenv("CI") == "true" || os.Getenv("KNDL_E2E") == "1"
}

// Lack skips the test naming what it lacks, or fails it when Strict.
func Lack(t testing.TB, what string) {
	t.Helper()
	if Strict() {
		t.Fatalf("this test needs %s (CI=true or KNDL_E2E=1 makes a missing need a failure)", what)
	}
	t.Skipf("skipping: needs %s", what)
}

// RequireRoot needs the test to run as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Lack(t, "root")
	}
}

// RequireCommand needs each named command on PATH and returns the path of
// the first.
func RequireCommand(t testing.TB, names ...string) string {
	t.Helper()
	var first string
	for i, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			Lack(t, "the command "+n+" on PATH")
			return ""
		}
		if i == 0 {
			first = p
		}
	}
	return first
}

// Eventually polls cond until it returns true or the deadline passes, then
// fails with msg.
func Eventually(t testing.TB, within time.Duration, msg string, cond func() bool) {
	t.Helper()
	EventuallyShowing(t, within, cond, func() string { return msg })
}

// EventuallyShowing is Eventually whose failure message is made when it
// fails, so it can show what cond last saw.
func EventuallyShowing(t testing.TB, within time.Duration, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, msg())
		}
		time.Sleep(tick)
	}
}

// ClosedWithin reports whether the far end closes c within d, reading and
// dropping whatever it sends first.
func ClosedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// Leftover returns the stacks of the goroutines running now with a frame
// of any of pkgs (package paths such as "kndl.dev/kndl/internal/hub"),
// leaving out the tests' own (a fake's too) and the HTTP servers'
// requests, which their servers own. A component closed should leave none
// of its own.
func Leftover(pkgs ...string) []string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "net/http.(*conn).serve") || testFrame.MatchString(g) {
			continue
		}
		for _, p := range pkgs {
			if strings.Contains(g, "\n"+p+".") || strings.Contains(g, "\n"+p+"/") {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// testFrame is a frame of a test function or of a function it declares.
var testFrame = regexp.MustCompile(`\.Test[A-Z][^.(]*(\.func|\()`)

// NoLeftover waits until no goroutine of pkgs is left (Leftover), then
// fails naming those still running.
func NoLeftover(t testing.TB, within time.Duration, pkgs ...string) {
	t.Helper()
	var left []string
	deadline := time.Now().Add(within)
	for left = Leftover(pkgs...); len(left) > 0 && time.Now().Before(deadline); left = Leftover(pkgs...) {
		time.Sleep(tick)
	}
	if len(left) > 0 {
		t.Fatalf("%d goroutines of %v still run after %v:\n\n%s", len(left), pkgs, within, strings.Join(left, "\n\n"))
	}
}
