package e2e

import (
	"context"
	"testing"

	"kndl.dev/kndl/internal/testenv"
)

// TestRunnerReconnectsAfterTheHubRestarts: the Hub goes away and comes
// back; the Runner dials again with backoff and the Hub sees it again.
func TestRunnerReconnectsAfterTheHubRestarts(t *testing.T) {
	s := Start(t)
	rn, err := s.Store.RunnerByName(context.Background(), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitShort, "the Hub sees the Runner", func() bool { return s.Hub.Connected(rn.ID) })
	s.RestartHub()
	testenv.Eventually(t, testenv.WaitShort, "the Runner notices", func() bool { return !s.Runner.Connected() || s.Hub.Connected(rn.ID) })
	testenv.Eventually(t, testenv.WaitMedium, "the restarted Hub sees the Runner again", func() bool { return s.Hub.Connected(rn.ID) })
	if !s.Runner.Connected() {
		t.Fatal("the Hub lists the Runner but the Runner is not connected")
	}
}
