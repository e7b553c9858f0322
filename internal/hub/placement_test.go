package hub

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// TestARunnersLoadCountsItsSessionsReservations: the capacity a Runner
// says in its hello is its limit, and a running Session counts what its
// Repo's Environment reserves, within the Runner's per-Sandbox cap. A
// second Session reserving 1.5 CPUs does not fit 2, and is refused naming
// the load; one reserving nothing does; GET /api/runners shows the load.
func TestARunnersLoadCountsItsSessionsReservations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := connectRunner(t, f, f.rtoken)
	host := protocol.HostInfo{Backend: "crun", MaxCPUs: 1.5, MaxMemoryMiB: 1024,
		Capacity: protocol.Amount{Sessions: 10, CPUs: 2, MemoryMiB: 4096}}
	if err := c.Request(ctx, protocol.TypeHello, protocol.Hello{MinVersion: 1, MaxVersion: protocol.Version, Models: claude.Models(), Name: "r1", Host: host}, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitShort, "the Hub sees the Runner", func() bool { return f.hub.Connected(f.runner.ID) })
	dev, _ := f.store.Members.DevUser(ctx)
	repo, _ := f.store.Repos.EnsureRepo(ctx, "/srv/big", "big")
	if _, err := f.store.Environments.ApplyDraft(ctx, store.EnvironmentVersion{RepoID: repo.ID, Config: `{"cpus":4,"memory_mib":512}`, CreatedBy: dev.ID}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"}); err != nil {
		t.Fatal(err)
	}

	_, err := newPlacer(f.hub).pickRunner(ctx, dev, "", repo.ID)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "r1 (1 of 10 Sessions, 1.5 of 2 CPUs, 512 of 4096 MiB)") {
		t.Errorf("a second 4-CPU Session, capped at 1.5, on 2 CPUs: %v", err)
	}
	if rc, err := newPlacer(f.hub).pickRunner(ctx, dev, "", ""); err != nil || rc.Runner.ID != f.runner.ID {
		t.Errorf("a Session reserving nothing: %v", err)
	}

	_, body := f.call(t, http.MethodGet, "/api/runners", "")
	var rs []api.RunnerStatus
	json.Unmarshal([]byte(body), &rs)
	if len(rs) != 1 || rs[0].Load == nil || *rs[0].Load != (protocol.Amount{Sessions: 1, CPUs: 1.5, MemoryMiB: 512}) || rs[0].Host.Capacity != host.Capacity {
		t.Errorf("GET /api/runners: %s", body)
	}
}
