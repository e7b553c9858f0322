package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/gateway"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/web"
)

// environmentsAPI serves a Repo's Environment routes and page, thin over
// internal/environment. The Service's callbacks and a Runner's Test build
// log are the Hub's (newEnvironments, handleEnvironments).
type environmentsAPI struct {
	core
	envs     *environment.Service
	sessions *session.Owner
	gateway  *gateway.Gateway
}

// The Hub's side of Environments: the routes and the Runner's Test build
// log. The rules are internal/environment's.

func (h *Hub) newEnvironments() *environment.Service {
	return environment.New(environment.Deps{
		Store: h.store.Environments,
		Variables: func(ctx context.Context, repoID string) ([]protocol.Variable, error) {
			vars, _, err := newSessionSecrets(h).sessionVariables(ctx, store.Session{RepoID: repoID})
			return vars, err
		},
		PickRunner: func(ctx context.Context, userID string) (string, environment.Requester, error) {
			u, err := h.store.Members.UserByID(ctx, userID)
			if err != nil {
				return "", nil, err
			}
			rc, err := newPlacer(h).pickRunner(ctx, u, "", "")
			if err != nil {
				return "", nil, err
			}
			return rc.Runner.ID, rc.Conn, nil
		},
		CloneToken: func(ctx context.Context, repoURL string) (string, error) {
			if h.guard.gh == nil || !h.guard.gh.HasApp() {
				return "", nil
			}
			tok, err := h.repoToken(ctx, store.Session{RepoURL: repoURL}, forge.Clone)
			return tok.Token, err
		},
		Redact: h.masks.RepoText,
		Log:    h.log,
	})
}

func (h environmentsAPI) showEnvironment(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoFor(r.Context(), p, r.PathValue("repo"))
	var v environment.View
	if err == nil {
		v, err = h.envs.Show(r.Context(), repo.ID)
	}
	a := apiEnvironment(v)
	if err == nil {
		a.Follows, err = h.follows(r.Context(), repo.ID)
	}
	h.reply(w, r, http.StatusOK, a, err)
}

// editEnvironment makes the body, a whole Config, the Repo's draft.
func (h environmentsAPI) editEnvironment(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoToChange(r.Context(), p, r.PathValue("repo"), "Environment")
	var c environment.Config
	if err == nil {
		c, err = readConfig(r)
	}
	var v environment.View
	if err == nil {
		v, err = h.envs.Edit(r.Context(), repo.ID, c, p.User.ID)
	}
	h.reply(w, r, http.StatusOK, apiEnvironment(v), err)
}

// readConfig reads a Config body as environment.Parse does: unknown
// fields refused, every field checked.
func readConfig(r *http.Request) (environment.Config, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		return environment.Config{}, fmt.Errorf("request body over %d bytes: %w", maxBody, errdefs.ErrTooLarge)
	}
	return environment.Parse(b)
}

func (h environmentsAPI) testEnvironment(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoToChange(r.Context(), p, r.PathValue("repo"), "Environment")
	var t store.TestBuild
	if err == nil {
		t, err = h.envs.Test(r.Context(), repo, p.User.ID)
	}
	h.reply(w, r, http.StatusAccepted, apiTestBuild(t), err)
}

func (h environmentsAPI) showTestBuild(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoFor(r.Context(), p, r.PathValue("repo"))
	var t store.TestBuild
	if err == nil {
		t, err = h.envs.TestBuild(r.Context(), repo.ID, r.PathValue("test"))
	}
	h.reply(w, r, http.StatusOK, apiTestBuild(t), err)
}

func (h environmentsAPI) applyEnvironment(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoToChange(r.Context(), p, r.PathValue("repo"), "Environment")
	var v environment.Version
	if err == nil {
		v, err = h.envs.Apply(r.Context(), repo.ID, p.User.ID)
	}
	if err == nil {
		h.egressNow(r.Context(), v)
		h.audit(r, p, auditEnvironmentApply, repo.URL, fmt.Sprintf("version %d: %s", v.Version, strings.ReplaceAll(v.Changes, "\n", "; ")))
	}
	h.reply(w, r, http.StatusOK, apiEnvironmentVersion(v), err)
}

func (h environmentsAPI) environmentLog(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoFor(r.Context(), p, r.PathValue("repo"))
	var log []environment.Version
	if err == nil {
		log, err = h.envs.Log(r.Context(), repo.ID)
	}
	h.reply(w, r, http.StatusOK, apiAll(log, apiEnvironmentVersion), err)
}

// handleEnvironments registers what a Runner sends about its Test builds.
func (h *Hub) handleEnvironments(rc *runners.Conn, welcomed <-chan struct{}) {
	rc.Conn.Handle(protocol.TypeEnvTestLog, true, func(ctx context.Context, body json.RawMessage) (any, error) {
		select {
		case <-welcomed:
		default:
			return nil, fmt.Errorf("say hello first: %w", errdefs.ErrInvalid)
		}
		var m protocol.EnvTestLog
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("malformed body: %v: %w", err, errdefs.ErrInvalid)
		}
		return nil, h.envs.TestLog(ctx, rc.Runner.ID, m)
	})
}

// repoPage is a Repo's page: its Sessions, its Environment (repo.js edits
// it through the API) and its Variables, Sensitive values never shown.
func (h environmentsAPI) repoPage(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	repo, err := h.guard.repoFor(ctx, p, r.PathValue("repo"))
	if errors.Is(err, errdefs.ErrNotFound) {
		h.notFoundPage(w, p)
		return
	}
	var ss []store.Session
	var vars, links []store.Variable
	if err == nil {
		ss, err = h.store.Sessions.List(ctx, store.SessionFilter{})
	}
	if err == nil {
		vars, err = h.store.Variables.List(ctx, repo.ID)
	}
	if err == nil {
		links, err = h.store.Variables.LinkedVariables(ctx, repo.ID)
	}
	var mcp []api.Installation
	if err == nil {
		mcp, err = h.gateway.List(ctx, p.User, &repo)
	}
	var fix store.AutoFix
	if err == nil {
		fix, err = h.store.Repos.RepoAutoFix(ctx, repo.ID)
	}
	var label string
	if err == nil {
		label, err = h.store.Repos.TriggerLabel(ctx, repo.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type session struct{ ID, Title, State string }
	type variable struct {
		Name, Value, SetAt, LoadsCodeRule, From string
		Sensitive, AtBuild, Shared, LoadsCode   bool
	}
	var sessions []session
	for _, s := range ss {
		if s.RepoID == repo.ID {
			sessions = append(sessions, session{s.ID, s.Title, string(s.State)})
		}
	}
	var vs []variable
	for _, v := range append(vars, links...) {
		a := apiVariable(v) // a Sensitive value is never in it
		vs = append(vs, variable{a.Name, a.Value, when(a.SetAt), a.LoadsCodeRule, a.From, a.Sensitive, a.AtBuild, a.Shared, a.LoadsCode})
	}
	h.appPage(w, p, web.Repo.WithTitle(repoName(repo.URL)), struct {
		ID, URL, Name string
		Sessions      []session
		Variables     []variable
		Installations []api.Installation
		AutoFix       api.AutoFix
		MaxAutoFixes  int
		TriggerLabel  string
		CanChange     bool
	}{repo.ID, repo.URL, repoName(repo.URL), sessions, vs, mcp, apiAutoFix(fix), api.MaxAutoFixes, label, h.guard.canPush(ctx, p.User, repo.URL)})
}
