package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/runner"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// TestSessionsSpreadOverRunnersByLoad: one Hub, three Runners on this
// machine, each a `kndl runner` process with its own home and a
// RUNNER_MAX_SESSIONS of its own (1, 2 and 1). New Sessions go to the
// Runner they leave least full, so the first goes to the one with room for
// two; kndl runner ls shows each Runner's load against its capacity; a full
// Runner named is refused saying so; and with all three full a start is
// refused naming each and its load.
func TestSessionsSpreadOverRunnersByLoad(t *testing.T) {
	t.Parallel()
	s := Start(t)
	// The test's own Runner leaves: the three processes take the Sessions.
	s.runnerCancel()
	<-s.runnerDone
	ctx := context.Background()
	dev, err := s.Store.Members.DevUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]string{}
	for _, r := range []struct {
		name string
		max  string
	}{{"r1", "1"}, {"r2", "2"}, {"r3", "1"}} {
		rn, token, err := s.Store.Runners.CreateRunner(ctx, r.name, dev.ID)
		if err != nil {
			t.Fatal(err)
		}
		byID[rn.ID] = r.name
		c := s.runnerCfg
		c.Name, c.Token, c.Home, c.RelayPort = r.name, token, filepath.Join(t.TempDir(), "runner"), freePort(t)
		os.MkdirAll(c.Home, 0o700)
		for _, name := range []string{"images", "claude-code"} { // the downloads; Builds are each Runner's own
			cached(t, c.Home, name)
		}
		removeSandboxes(t, c)
		runnerProcess(t, c, "RUNNER_MAX_SESSIONS="+r.max)
		testenv.Eventually(t, testenv.WaitMedium, r.name+" connects", func() bool { return s.Hub.Connected(rn.ID) })
	}

	repo := s.Repo()
	for i, want := range []string{"r2", "r1", "r2", "r3"} {
		v := s.NewSession(repo, "spread me")
		if got := byID[v.RunnerID]; got != want {
			t.Fatalf("Session %d went to %s, want %s", i+1, got, want)
		}
		s.waitState(v.ID, api.Active)
	}

	out, errOut, code := s.kndl("", "runner", "ls")
	if code != 0 || !strings.Contains(out, "2 of 2 Sessions") || strings.Count(out, "1 of 1 Sessions") != 2 {
		t.Errorf("kndl runner ls: exit %d, want each Runner's load against its capacity:\n%s%s", code, out, errOut)
	}
	out, _, _ = s.kndl("", "runner", "ls", "--json")
	var rs []api.RunnerStatus
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("kndl runner ls --json: %v:\n%s", err, out)
	}
	for _, r := range rs {
		if r.Name == "r2" && (r.Load == nil || r.Load.Sessions != 2 || r.Host == nil || r.Host.Capacity.Sessions != 2 || r.Host.Capacity.MemoryMiB == 0) {
			t.Errorf("kndl runner ls --json: r2's load %+v, host %+v", r.Load, r.Host)
		}
	}

	_, msg, code := s.kndl("", "new", "--repo", repo, "--runner", "r1", "on a full one")
	if code == 0 || !strings.Contains(msg, "the Runner r1 (1 of 1 Sessions") || !strings.Contains(msg, "is full") {
		t.Errorf("kndl new --runner on a full Runner: exit %d: %s", code, msg)
	}
	_, msg, code = s.kndl("", "new", "--repo", repo, "one too many")
	if code == 0 || !strings.Contains(msg, "every Runner you may use is full") {
		t.Errorf("kndl new with all full: exit %d: %s", code, msg)
	}
	for _, want := range []string{"r1 (1 of 1 Sessions", "r2 (2 of 2 Sessions", "r3 (1 of 1 Sessions"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not name %q", msg, want)
		}
	}
	if n, _ := s.Store.Sessions.List(ctx, store.SessionFilter{}); len(n) != 4 {
		t.Errorf("%d Sessions stored after the refusals, want 4", len(n))
	}
}

// removeSandboxes removes, when the test ends, every Sandbox a Runner with
// c's home made; registered before the Runner starts, it runs after the
// Runner is killed.
func removeSandboxes(t *testing.T, c runner.Config) {
	t.Cleanup(func() {
		ctx := context.Background()
		b, err := oci.New(ctx, sandboxOptions(t, c.Home, c.RelayPort, kndlBinary(t), 0, slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Errorf("%s's Sandboxes: %v", c.Name, err)
			return
		}
		all, _ := b.List(ctx)
		for _, sb := range all {
			b.Remove(ctx, sb.ID)
		}
	})
}
