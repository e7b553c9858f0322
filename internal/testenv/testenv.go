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
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, msg)
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
