package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
)

// TestRunnerReconnectsAfterTheHubRestarts: the Hub goes away and comes
// back; the Runner dials again with backoff and the Hub sees it again.
func TestRunnerReconnectsAfterTheHubRestarts(t *testing.T) {
	t.Parallel()
	s := Start(t)
	rn, err := s.Store.Runners.RunnerByName(context.Background(), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitShort, "the Hub sees the Runner", func() bool { return s.Hub.Connected(rn.ID) })
	s.RestartHub()
	testenv.Eventually(t, testenv.WaitShort, "the Runner notices", func() bool { return !s.Runner.Connected() || s.Hub.Connected(rn.ID) })
	testenv.Eventually(t, testenv.WaitMedium, "the restarted Hub sees the Runner again", func() bool { return s.Hub.Connected(rn.ID) })
	// The Hub counts the Runner connected once it has sent the welcome; the
	// Runner, once it has read it, a moment later (a check between the two
	// failed once in CI under load).
	testenv.Eventually(t, testenv.WaitShort, "the Runner connected too, the welcome read", s.Runner.Connected)
	// A Hub that stops closes with StatusGoingAway: the Runner says so at
	// Info, not as a lost connection.
	if log := s.logText(); !strings.Contains(log, `level=INFO msg="the Hub is stopping; reconnecting"`) || strings.Contains(log, "hub connection lost") {
		t.Fatalf("the Runner's log of the Hub's stop is not one Info line saying it stopped:\n%s", log)
	}
}

// TestARunnerThatCannotListenSaysWhyItDidNotConnect: a Runner whose relay
// port is taken ends its Run at once; the wait for it to connect says so,
// with the Hub's view and the log, not only that it did not connect.
func TestARunnerThatCannotListenSaysWhyItDidNotConnect(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.runnerCancel()
	<-s.runnerDone
	ln, err := net.Listen("tcp", s.Backend.Host().Relay)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s.startRunner(s.Backend)
	select {
	case <-s.runnerDone:
	case <-time.After(testenv.WaitShort):
		t.Fatal("a Runner that cannot listen on its relay port still runs")
	}
	why := s.whyNotConnected("the Runner connects")
	for _, want := range []string{"the Runner's Run: ended, returning the mod relay cannot listen on " + s.Backend.Host().Relay,
		"the Hub counts it connected: false", `msg="the Runner's Run ended"`} {
		if !strings.Contains(why, want) {
			t.Errorf("the wait's message does not say %q:\n%s", want, why)
		}
	}
}

// runsOnItsBackend checks that kndl runner ls shows the backend the Runner
// reported, and that Session id's Sandbox runs on it: under gVisor its
// kernel is gVisor's, under crun the host's.
func (s *System) runsOnItsBackend(t *testing.T, id string) {
	want := "crun"
	if runtime, _ := sandboxRuntime(t); runtime == "runsc" {
		want = "gvisor"
	}
	rn, err := s.Store.Runners.RunnerByName(context.Background(), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitShort, "the Hub sees the Runner", func() bool { return s.Hub.Connected(rn.ID) })
	out, errOut, code := s.kndl("", "runner", "ls")
	if code != 0 || !strings.Contains(out, "connected") || !strings.Contains(out, want) {
		t.Fatalf("kndl runner ls: exit %d, want the Runner connected on %s:\n%s%s", code, want, out, errOut)
	}
	version, _ := s.Exec(id, "cat", "/proc/version")
	if onGVisor := strings.Contains(version, "gvisor"); onGVisor != (want == "gvisor") {
		t.Errorf("the Session's /proc/version on %s: %q", want, version)
	}
}
