package masks

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/gateway"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
)

// fixture is a real store, the Hub's Sealer over a fresh key, and the
// Runner the Sessions of these tests are on.
type fixture struct {
	store   *store.Store
	secrets *seal.Box
	log     *slog.Logger
	runner  store.Runner
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st := storetest.Open(t)
	key, err := seal.ParseKey(seal.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	box, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := st.Members.DevUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rn, _, err := st.Runners.CreateRunner(ctx, "r1", dev.ID)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{store: st, secrets: box, log: slog.New(slog.NewTextHandler(io.Discard, nil)), runner: rn}
}

// TestARedactionSetMadeAsARunStartsMasksItsInstallationsValues: a
// Session's redaction set made from the store just before its run records
// its Installations (a request for the Session's view as it starts), and
// kept just after, still masks their header secret values. It once
// lacked them, and Claude's text showed an Installation's key.
func TestARedactionSetMadeAsARunStartsMasksItsInstallationsValues(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, err := f.store.Members.DevUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	everyone := func(context.Context, store.User, string) bool { return true }
	gw, err := gateway.New(gateway.Options{Store: gateway.Store{MCP: f.store.MCP, Repos: f.store.Repos, Members: f.store.Members}, Sealer: f.secrets, Access: everyone, Push: everyone, Logger: f.log})
	if err != nil {
		t.Fatal(err)
	}
	// As the Hub's: the header secret values a run started with.
	sets := NewSets(SetsStore{Sessions: f.store.Sessions, Variables: f.store.Variables}, f.secrets, func(ctx context.Context, s store.Session) ([]string, error) { return gw.Values(ctx, s.ID) }, false)
	const value = "docs-key-0123456789abcdef"
	if _, err := gw.CreateServer(ctx, dev, api.MCPServer{ID: "hub:docs", Name: "Docs", URL: "https://docs.example.com/mcp", Auth: "headers",
		Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}}); err != nil {
		t.Fatal(err)
	}
	repo, _ := f.store.Repos.EnsureRepo(ctx, "https://github.com/acme/app", "acme/app")
	if _, err := gw.Install(ctx, dev, api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{repo.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.SetValue(ctx, dev, "docs", "api-key", value); err != nil {
		t.Fatal(err)
	}
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}

	early, err := sets.make(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	// What the Hub's prepareGateway does as the run starts.
	if _, err := gw.Prepare(ctx, s); err != nil {
		t.Fatal(err)
	}
	values, err := gw.Values(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	started, err := sets.Of(ctx, s.ID)
	if err == nil {
		err = started.Add(values...)
	}
	if err != nil {
		t.Fatal(err)
	}
	set := sets.keep(s.ID, early)
	if got := set.Redact("the key is " + value); strings.Contains(got, value) {
		t.Fatalf("%q: the Installation's value is not masked", got)
	}
}
