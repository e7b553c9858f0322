package store

import (
	"context"
	"errors"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
)

// TestAnMCPServerEditThatSawAnOlderServerChangesNothing: an edit decides
// whose values it clears, and who may make it, from the server and its
// Installations as it read them. If an Installation was added, moved to
// another Repo, or the server's URL or headers changed before the edit is
// written, the edit is refused as a conflict and every value stays, so it
// never clears values it did not check.
func TestAnMCPServerEditThatSawAnOlderServerChangesNothing(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		u, err := s.Members.DevUser(ctx)
		must(t, err)
		a, err := s.Repos.EnsureRepo(ctx, "https://github.com/acme/a", "acme/a")
		must(t, err)
		b, err := s.Repos.EnsureRepo(ctx, "https://github.com/acme/b", "acme/b")
		must(t, err)
		c, err := s.Repos.EnsureRepo(ctx, "https://github.com/acme/c", "acme/c")
		must(t, err)
		_, err = s.MCP.CreateMCPServer(ctx, MCPServer{ID: "hub:docs", Name: "Docs", URL: "https://mcp.example/", Auth: "headers",
			Headers: []HeaderSecret{{Key: "token", Header: "Authorization", Format: "Bearer {value}"}}, CreatedBy: u.ID})
		must(t, err)
		_, err = s.MCP.CreateInstallation(ctx, Installation{ID: "on-a", ServerID: "hub:docs", Name: "On a", Repos: []string{a.ID}, CreatedBy: u.ID}, u.ID, "installed it")
		must(t, err)
		must(t, s.MCP.SetInstallationValue(ctx, "on-a", "token", []byte{1}, u.ID))

		read := func() (MCPServer, []Installation) {
			srv, err := s.MCP.MCPServerByID(ctx, "hub:docs")
			must(t, err)
			all, err := s.MCP.Installations(ctx)
			must(t, err)
			return srv, all
		}
		edited := MCPServer{ID: "hub:docs", Name: "Docs", URL: "https://elsewhere.example/", Auth: "headers",
			Headers: []HeaderSecret{{Key: "token", Header: "Authorization", Format: "Bearer {value}"}}}
		valuesLeft := func() int {
			n := 0
			for _, id := range []string{"on-a", "on-b"} {
				vs, err := s.MCP.InstallationValues(ctx, id)
				must(t, err)
				n += len(vs)
			}
			return n
		}

		for _, c := range []struct {
			name   string
			change func()
		}{
			{"an Installation added", func() {
				_, err := s.MCP.CreateInstallation(ctx, Installation{ID: "on-b", ServerID: "hub:docs", Name: "On b", Repos: []string{b.ID}, CreatedBy: u.ID}, u.ID, "installed it")
				must(t, err)
				must(t, s.MCP.SetInstallationValue(ctx, "on-b", "token", []byte{2}, u.ID))
			}},
			{"an Installation moved to another Repo", func() {
				must(t, s.MCP.SetInstallationRepos(ctx, "on-a", []string{a.ID, c.ID}, u.ID, "moved it"))
			}},
			{"the URL changed", func() {
				srv, ins := read()
				moved := srv
				moved.URL = "https://mcp.example/v2/"
				must(t, s.MCP.UpdateMCPServer(ctx, srv, ins, moved, false, nil))
			}},
		} {
			srv, ins := read()
			c.change()
			before := valuesLeft()
			err := s.MCP.UpdateMCPServer(ctx, srv, ins, edited, true, nil)
			if !errors.Is(err, errdefs.ErrConflict) {
				t.Fatalf("%s, then an edit that read the server before: %v, want a conflict", c.name, err)
			}
			if now, _ := read(); now.URL == edited.URL {
				t.Fatalf("%s: the refused edit moved the server to %s", c.name, now.URL)
			}
			if left := valuesLeft(); left != before {
				t.Fatalf("%s: %d values left after a refused edit, want every one", c.name, left)
			}
		}
		// Read again, the same edit goes through and clears them.
		srv, ins := read()
		must(t, s.MCP.UpdateMCPServer(ctx, srv, ins, edited, true, nil))
		if left := valuesLeft(); left != 0 {
			t.Fatalf("%d values left after an edit of the URL, want none", left)
		}
	})
}
