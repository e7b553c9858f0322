package hub

import (
	"context"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/store"
)

// TestARedactionSetMadeAsARunStartsMasksItsInstallationsValues: a
// Session's redaction set made from the store just before its run records
// its Installations (a request for the Session's view as it starts), and
// kept just after, still masks their header secret values. It once
// lacked them, and Claude's text showed an Installation's key.
func TestARedactionSetMadeAsARunStartsMasksItsInstallationsValues(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, err := f.store.DevUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const value = "docs-key-0123456789abcdef"
	if _, err := f.hub.gateway.CreateServer(ctx, dev, api.MCPServer{ID: "hub:docs", Name: "Docs", URL: "https://docs.example.com/mcp", Auth: "headers",
		Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}}); err != nil {
		t.Fatal(err)
	}
	repo, _ := f.store.EnsureRepo(ctx, "https://github.com/acme/app", "acme/app")
	if _, err := f.hub.gateway.Install(ctx, dev, api.InstallationRequest{ID: "docs", Server: "hub:docs", Name: "Docs", Repos: []string{repo.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.hub.gateway.SetValue(ctx, dev, "docs", "api-key", value); err != nil {
		t.Fatal(err)
	}
	s, err := f.store.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}

	early, err := f.hub.makeSet(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.hub.prepareGateway(ctx, s); err != nil {
		t.Fatal(err)
	}
	set := f.hub.keepSet(s.ID, early)
	if got := set.Redact("the key is " + value); strings.Contains(got, value) {
		t.Fatalf("%q: the Installation's value is not masked", got)
	}
}
