package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// on returns the Installations on for a Repo: each Repo-scoped one that
// lists it, and each global one unless a Repo-scoped one of the same
// server takes its place there; less those the Repo turned off. why says
// why each other one is off.
func (g *Gateway) on(ctx context.Context, repoID string) (on []store.Installation, why map[string]string, err error) {
	ins, err := g.store.MCP.Installations(ctx)
	if err != nil {
		return nil, nil, err
	}
	off, err := g.store.MCP.InstallationsOff(ctx, repoID)
	if err != nil {
		return nil, nil, err
	}
	scoped := map[string]string{} // server -> the Repo-scoped Installation listing repoID
	for _, in := range ins {
		if !in.Global && slices.Contains(in.Repos, repoID) {
			scoped[in.ServerID] = in.ID
		}
	}
	why = map[string]string{}
	for _, in := range ins {
		switch {
		case !in.Global && !slices.Contains(in.Repos, repoID):
			why[in.ID] = "it does not list this Repo"
		case in.Global && scoped[in.ServerID] != "":
			why[in.ID] = "Installation " + scoped[in.ServerID] + " of the same MCP server takes its place in this Repo"
		case off[in.ID]:
			why[in.ID] = "this Repo turned it off"
		default:
			on = append(on, in)
		}
	}
	return on, why, nil
}

// onFor says whether in is on for a Repo, and why not.
func (g *Gateway) onFor(ctx context.Context, repoID string, in store.Installation) (*api.InstallationFor, error) {
	_, why, err := g.on(ctx, repoID)
	if err != nil {
		return nil, err
	}
	return &api.InstallationFor{Repo: repoID, On: why[in.ID] == "", Why: why[in.ID]}, nil
}

// snapshot is what a Session's run keeps of one Installation, sealed for
// the Session: its header secrets with their values as the run started.
type snapshot struct {
	Headers []snapHeader `json:"headers"`
}

type snapHeader struct {
	Key    string `json:"key"`
	Header string `json:"header"`
	Value  string `json:"value"`
}

// Prepare records the Installations on for the Session's Repo as this run
// of it starts with them, and returns them as the Runner gives them to
// Claude Code. It fails, naming the Installation and the way out, when one
// lacks a value of a header secret, or is not connected to an account, or
// its expired token's refresh is refused.
func (g *Gateway) Prepare(ctx context.Context, s store.Session) ([]protocol.MCPServer, error) {
	on, _, err := g.on(ctx, s.RepoID)
	if err != nil {
		return nil, err
	}
	var rows []store.SessionInstallation
	var out []protocol.MCPServer
	for _, in := range on {
		srv, err := g.store.MCP.MCPServerByID(ctx, in.ServerID)
		if err != nil {
			return nil, err
		}
		values, err := g.store.MCP.InstallationValues(ctx, in.ID)
		if err != nil {
			return nil, err
		}
		if srv.Auth == AuthOAuth {
			// Connected, and its token refreshed now if it expired: a
			// refresh the authorization server refuses fails the start.
			if _, err := g.accessToken(ctx, in.ID, ""); err != nil {
				return nil, err
			}
		}
		var snap snapshot
		for _, h := range srv.Headers {
			v, ok := values[h.Key]
			if !ok {
				return nil, fmt.Errorf("Installation %s (%s) has no value for its header secret %s: set one, or turn the Installation off for this Repo: %w",
					in.ID, in.Name, h.Key, errdefs.ErrConflict)
			}
			plain, err := g.sealer.Open(v.Sealed, valueSeal(in.ID, h.Key))
			if err != nil {
				return nil, fmt.Errorf("Installation %s's value of %s: %w", in.ID, h.Key, err)
			}
			snap.Headers = append(snap.Headers, snapHeader{Key: h.Key, Header: h.Header, Value: string(plain)})
		}
		data, err := json.Marshal(snap)
		if err != nil {
			return nil, err
		}
		rows = append(rows, store.SessionInstallation{InstallationID: in.ID, Name: in.Name, URL: srv.URL,
			Headers: g.sealer.Seal(data, snapshotSeal(s.ID, in.ID))})
		out = append(out, protocol.MCPServer{Installation: in.ID, Name: in.Name})
	}
	if err := g.store.MCP.SetSessionInstallations(ctx, s.ID, rows); err != nil {
		return nil, err
	}
	return out, nil
}

// Started returns the Installations the Session's current run started
// with, by id and name, for the Session view.
func (g *Gateway) Started(ctx context.Context, sessionID string) ([]protocol.MCPServer, error) {
	rows, err := g.store.MCP.SessionInstallations(ctx, sessionID)
	out := []protocol.MCPServer{}
	for _, r := range rows {
		out = append(out, protocol.MCPServer{Installation: r.InstallationID, Name: r.Name})
	}
	return out, err
}

// Values returns, for the Session's redaction set, the header secret
// values its run started with, and the OAuth tokens and client secrets of
// those Installations as they are now: a server may echo one.
func (g *Gateway) Values(ctx context.Context, sessionID string) ([]string, error) {
	rows, err := g.store.MCP.SessionInstallations(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		snap, err := g.open(sessionID, r)
		if err != nil {
			return nil, err
		}
		for _, h := range snap.Headers {
			out = append(out, h.Value)
		}
		out = append(out, g.oauthSecrets(ctx, r.InstallationID)...)
	}
	return out, nil
}

func (g *Gateway) open(sessionID string, r store.SessionInstallation) (snapshot, error) {
	var snap snapshot
	plain, err := g.sealer.Open(r.Headers, snapshotSeal(sessionID, r.InstallationID))
	if err == nil {
		err = json.Unmarshal(plain, &snap)
	}
	if err != nil {
		return snap, fmt.Errorf("Installation %s as session %s started with it: %w", r.InstallationID, sessionID, err)
	}
	return snap, nil
}

// snapshotSeal binds a run's copy of an Installation's values to the
// Session and the Installation.
func snapshotSeal(sessionID, installation string) string {
	return "session-installation:" + sessionID + ":" + installation
}
