package hub

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/gateway"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/web"
)

// mcpAPI serves the Gateway's admin routes and page and its proxy, thin over
// internal/gateway.
type mcpAPI struct {
	core
	gateway *gateway.Gateway
}

// The routes of MCP servers and Installations hand each request to the
// Gateway (internal/gateway), which owns their rules; these only read the
// request and write the answer.

// gatewayServe is Claude Code's MCP traffic, through the mod relay, with
// the Session's mod token.
func (h mcpAPI) gatewayServe(w http.ResponseWriter, r *http.Request, p Principal) {
	h.gateway.Serve(w, r, p.Session, r.PathValue("installation"))
}

// prepareGateway records the Installations a run of s starts with, and
// puts their values in its redaction set, made here if it has none yet.
// Only adding them to a set already kept is not enough: one made from the
// store before the record (a request for the Session's view as it starts)
// may be kept just after it, without them.
func (h *Hub) prepareGateway(ctx context.Context, s store.Session) ([]protocol.MCPServer, error) {
	servers, err := h.gateway.Prepare(ctx, s)
	if err != nil {
		return nil, err
	}
	values, err := h.gateway.Values(ctx, s.ID)
	if err != nil {
		return nil, err
	}
	set, err := h.masks.Of(ctx, s.ID)
	if err != nil {
		return nil, err
	}
	if err := set.Add(values...); err != nil {
		return nil, err
	}
	return servers, nil
}

func (h mcpAPI) listMCPServers(w http.ResponseWriter, r *http.Request, p Principal) {
	out, err := h.gateway.Servers(r.Context())
	h.reply(w, r, http.StatusOK, out, err)
}

func (h mcpAPI) createMCPServer(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.MCPServer
	err := readJSON(r, &req)
	var out api.MCPServer
	if err == nil {
		out, err = h.gateway.CreateServer(r.Context(), p.User, req)
	}
	if err == nil {
		h.audit(r, p, auditMCPServerAdded, out.ID, out.URL)
	}
	h.reply(w, r, http.StatusOK, out, err)
}

// editMCPServer edits a server; with ?dry_run=1 it only says whose values
// the edit would clear.
func (h mcpAPI) editMCPServer(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.MCPServer
	err := readJSON(r, &req)
	var out api.MCPServerEdit
	if err == nil {
		req.ID = r.PathValue("id")
		out, err = h.gateway.EditServer(r.Context(), p.User, req, r.URL.Query().Get("dry_run") == "1")
	}
	if err == nil && !out.DryRun {
		detail := out.Server.URL
		for _, c := range out.Clears {
			detail += "; cleared " + c.Installation + "'s " + strings.Join(c.Keys, ", ")
		}
		h.audit(r, p, auditMCPServerEdited, out.Server.ID, detail)
	}
	h.reply(w, r, http.StatusOK, out, err)
}

// listInstallations lists every Installation; with ?repo=ID, one the
// person has access to, each says whether it is on there.
func (h mcpAPI) listInstallations(w http.ResponseWriter, r *http.Request, p Principal) {
	var repo *store.Repo
	var err error
	if id := r.URL.Query().Get("repo"); id != "" {
		var rp store.Repo
		rp, err = h.guard.repoFor(r.Context(), p, id)
		repo = &rp
	}
	var out []api.Installation
	if err == nil {
		out, err = h.gateway.List(r.Context(), p.User, repo)
	}
	h.reply(w, r, http.StatusOK, out, err)
}

func (h mcpAPI) install(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.InstallationRequest
	err := readJSON(r, &req)
	var out api.Installation
	if err == nil {
		out, err = h.gateway.Install(r.Context(), p.User, req)
	}
	if err == nil {
		h.audit(r, p, auditInstallationMade, out.ID, installationDetail(out))
	}
	h.reply(w, r, http.StatusOK, out, err)
}

func (h mcpAPI) setInstallationRepos(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.InstallationRepos
	err := readJSON(r, &req)
	var out api.Installation
	if err == nil {
		out, err = h.gateway.SetRepos(r.Context(), p.User, r.PathValue("id"), req.Repos)
	}
	if err == nil {
		h.audit(r, p, auditInstallationRepos, out.ID, installationDetail(out))
	}
	h.reply(w, r, http.StatusOK, out, err)
}

func (h mcpAPI) setInstallationValue(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.SecretValue
	err := readJSON(r, &req)
	var out api.Installation
	if err == nil {
		out, err = h.gateway.SetValue(r.Context(), p.User, r.PathValue("id"), r.PathValue("key"), req.Value)
	}
	if err == nil {
		h.audit(r, p, auditInstallationValueSet, out.ID, "header secret "+r.PathValue("key"))
	}
	h.reply(w, r, http.StatusOK, out, err)
}

// turnInstallation turns an Installation off (or back on) for a Repo the
// person may push to (the Gateway checks that).
func (h mcpAPI) turnInstallation(off bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p Principal) {
		repo, err := h.guard.repoFor(r.Context(), p, r.PathValue("repo"))
		var out api.Installation
		if err == nil {
			out, err = h.gateway.SetOff(r.Context(), p.User, repo, r.PathValue("id"), off)
		}
		if err == nil {
			h.audit(r, p, map[bool]string{true: auditInstallationOff, false: auditInstallationOn}[off], out.ID, "in "+repo.URL)
		}
		h.reply(w, r, http.StatusOK, out, err)
	}
}

func (h mcpAPI) installationLog(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoFor(r.Context(), p, r.PathValue("repo"))
	var out []api.InstallationChange
	if err == nil {
		out, err = h.gateway.Log(r.Context(), repo)
	}
	h.reply(w, r, http.StatusOK, out, err)
}

// oauthCallbackPath is where authorization servers send a browser back.
const oauthCallbackPath = "/mcp/oauth/callback"

// setInstallationClient enters an OAuth client, bound to the authorization
// server the answer names; the secret is write-only.
func (h mcpAPI) setInstallationClient(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.OAuthClient
	err := readJSON(r, &req)
	var issuer string
	if err == nil {
		issuer, err = h.gateway.SetClient(r.Context(), p.User, r.PathValue("id"), req.ClientID, req.ClientSecret)
	}
	if err == nil {
		h.audit(r, p, auditInstallationClient, r.PathValue("id"), "client "+req.ClientID+" for "+issuer)
	}
	h.reply(w, r, http.StatusOK, api.OAuthClientBound{ClientID: req.ClientID, Issuer: issuer}, err)
}

// connectInstallation begins connecting an account: the answer's url is
// where the person's browser goes, signed in to the Hub, to consent.
func (h mcpAPI) connectInstallation(w http.ResponseWriter, r *http.Request, p Principal) {
	u, err := h.gateway.Connect(r.Context(), p.User, r.PathValue("id"))
	h.reply(w, r, http.StatusOK, api.OAuthConnect{URL: u}, err)
}

func (h mcpAPI) disconnectInstallation(w http.ResponseWriter, r *http.Request, p Principal) {
	err := h.gateway.Disconnect(r.Context(), p.User, r.PathValue("id"))
	if err == nil {
		h.audit(r, p, auditInstallationDisconn, r.PathValue("id"), "")
	}
	h.reply(w, r, http.StatusOK, map[string]string{}, err)
}

// oauthCallback is where the authorization server sends the browser of
// whoever began connecting back; the state is theirs alone.
func (h mcpAPI) oauthCallback(w http.ResponseWriter, r *http.Request, p Principal) {
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		h.writeError(w, r, fmt.Errorf("the authorization server did not connect the account (%.100s): %w", e, errdefs.ErrConflict))
		return
	}
	id, err := h.gateway.Callback(r.Context(), p.User, q.Get("state"), q.Get("code"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.audit(r, p, auditInstallationConnect, id, "")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "Installation %s is connected. Sessions take it at their next start or wake; you can close this page.\n", id)
}

// maskInstallation adds an Installation's new OAuth token to the
// redaction sets of the running Sessions that started with it.
func (h *Hub) maskInstallation(installationID string, values ...string) {
	for _, id := range h.masks.Running() {
		rows, err := h.store.MCP.SessionInstallations(h.life.Context(), id)
		if err != nil {
			h.log.Error("the Installations of a running Session", "session", id, "err", err)
			continue
		}
		if !slices.ContainsFunc(rows, func(r store.SessionInstallation) bool { return r.InstallationID == installationID }) {
			continue
		}
		if err := h.masks.Add(id, values...); err != nil {
			h.log.Error("mask an Installation's token", "session", id, "err", err)
		}
	}
}

// mcpPage lists the MCP servers and Installations, each Installation's
// credentials by who set them and when, and, for a Repo the person picks,
// whether each is on there.
func (h mcpAPI) mcpPage(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	type repoRow struct {
		ID, Name string
		Selected bool
	}
	var repos []repoRow
	var picked *store.Repo
	all, err := h.store.Repos.List(ctx)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	for _, rp := range all {
		if h.guard.checkRepoAccess(ctx, p, rp.URL) != nil {
			continue
		}
		sel := rp.ID == r.URL.Query().Get("repo")
		if sel {
			picked = &rp
		}
		repos = append(repos, repoRow{ID: rp.ID, Name: rp.Name, Selected: sel})
	}
	servers, err := h.gateway.Servers(ctx)
	var ins []api.Installation
	if err == nil {
		ins, err = h.gateway.List(ctx, p.User, picked)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var repo string
	if picked != nil {
		repo = picked.ID
	}
	h.appPage(w, p, web.MCP, struct {
		Servers       []api.MCPServer
		Installations []api.Installation
		Repos         []repoRow
		Repo          string
		Owner         bool
	}{servers, ins, repos, repo, p.User.IsOwner})
}

// installationDetail says where an Installation is on, for the audit log:
// global, or its Repos by id.
func installationDetail(in api.Installation) string {
	if in.Global {
		return in.Server + ", global"
	}
	return in.Server + ", in " + strings.Join(in.Repos, ", ")
}
