package hub

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/gateway"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/loadscode"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/redact"
	"kndl.dev/kndl/internal/store"
)

// variablesAPI serves Repos and Variables: a Repo's, shared ones and their
// links. What a Session runs with and must never show is sessionSecrets'.
type variablesAPI struct {
	core
	vault
	masks *masks.Sets
}

// maxVariableBytes bounds one Variable's value.
const maxVariableBytes = environment.MaxVariableBytes

var variableNameRE = environment.VariableName

// sandboxOwn are the variables a Sandbox's login environment sets, which
// no Variable replaces: one would do so for every process in the Sandbox,
// the Start script, Claude Code and all it runs, and a value isn't
// expanded, so a PATH Variable can't add to PATH, only take it over.
var sandboxOwn = []string{"PATH", "HOME", "SHELL"}

// sandboxOwnError says why a Variable can't be named name, or is nil.
func sandboxOwnError(name string) error {
	if !slices.Contains(sandboxOwn, name) {
		return nil
	}
	return fmt.Errorf("a Variable can't be named %s: the Sandbox sets %s itself, from its login environment (to add a directory to PATH, have the Environment's Bootstrap script add it in ~/.profile): %w",
		name, strings.Join(sandboxOwn, ", "), errdefs.ErrInvalid)
}

// loadsCodeError says why a Variable named name can't be set with the mark
// marked, or is nil. A name under loadscode.Table changes how a tool loads
// code or reaches the network in every Creator's Sessions of the Repo, so
// it is set only with the mark, by someone who may change the Repo's
// Variables at all (push); a mark on any other name means nothing, and is
// refused too. Only setting reads the mark: a Variable stored before it was
// asked for keeps reaching Sessions as it did.
func loadsCodeError(name string, marked bool) error {
	r, ok := loadscode.Match(name)
	switch {
	case ok && !marked:
		return fmt.Errorf("%s falls under %s, a name that changes how a tool loads code or reaches the network (%s): it reaches every Creator's Sessions in the Repo, so set it only on purpose, with the mark: kndl var set --loads-code, or \"loads_code\": true: %w",
			name, r.Pattern, r.Why, errdefs.ErrInvalid)
	case !ok && marked:
		return fmt.Errorf("%s changes nothing a tool loads, by kndl's table (docs/security.md, \"Which Variables reach Claude Code\"): set it without --loads-code: %w", name, errdefs.ErrInvalid)
	}
	return nil
}

// sealFor is what a Variable's value is sealed for: its Repo and name, so a
// value moved to another row does not open.
func sealFor(repoID, name string) string { return "variable:" + repoID + ":" + name }

func (h vault) openVariable(v store.Variable) (string, error) {
	b, err := h.secrets.Open(v.Sealed, sealFor(v.RepoID, v.Name))
	return string(b), err
}

func (h variablesAPI) listRepos(w http.ResponseWriter, r *http.Request, p Principal) {
	rs, err := h.store.Repos.List(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := []api.Repo{}
	for _, repo := range rs {
		if h.guard.checkRepoAccess(r.Context(), p, repo.URL) == nil {
			out = append(out, apiRepo(repo))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// addRepo records a Repo by its URL (to give it Variables before its first
// Session), or returns the one there is.
func (h variablesAPI) addRepo(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.RepoRequest
	err := readJSON(r, &req)
	if err == nil {
		err = checkRepo(req.URL)
	}
	if err == nil {
		err = h.guard.checkRepoAccess(r.Context(), p, req.URL)
	}
	var repo store.Repo
	if err == nil {
		repo, err = h.store.Repos.EnsureRepo(r.Context(), req.URL, repoName(req.URL))
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiRepo(repo))
}

func (h variablesAPI) listRepoVariables(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	repo, err := h.guard.repoFor(ctx, p, r.PathValue("repo"))
	var vars, links []store.Variable
	if err == nil {
		vars, err = h.store.Variables.List(ctx, repo.ID)
	}
	if err == nil {
		links, err = h.store.Variables.LinkedVariables(ctx, repo.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RepoVariables{Repo: apiRepo(repo), Variables: apiAll(vars, apiVariable), Links: apiAll(links, apiVariable)})
}

func (h variablesAPI) listSharedVariables(w http.ResponseWriter, r *http.Request, p Principal) {
	vs, err := h.store.Variables.List(r.Context(), "")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAll(vs, apiVariable))
}

func (h variablesAPI) setRepoVariable(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoToChange(r.Context(), p, r.PathValue("repo"), "Variables")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.setVariable(w, r, p, repo.ID)
}

// setSharedVariable: any Member makes a Shared variable; only the Owner or
// who set it changes it, with push permission in every Repo that links it.
func (h variablesAPI) setSharedVariable(w http.ResponseWriter, r *http.Request, p Principal) {
	err := h.mayChangeShared(r.Context(), p, r.PathValue("name"), false)
	if err == nil {
		err = h.mayChangeLinked(r.Context(), p, r.PathValue("name"))
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.setVariable(w, r, p, "")
}

// mayChangeShared refuses a change of the Shared variable name (replacing
// it, removing it, linking it into a Repo) to anyone but the Owner and who
// set it: otherwise any Member could link someone's Sensitive Shared
// variable into a Repo they control and print it from a Session. must says
// whether it has to exist.
func (h variablesAPI) mayChangeShared(ctx context.Context, p Principal, name string, must bool) error {
	vars, err := h.store.Variables.List(ctx, "")
	if err != nil {
		return err
	}
	for _, v := range vars {
		if v.Name != name {
			continue
		}
		if !p.User.IsOwner && v.SetBy != p.User.ID {
			return fmt.Errorf("only the Owner, or who set the Shared variable %s, links, changes or removes it: %w", name, errdefs.ErrForbidden)
		}
		return nil
	}
	if must {
		return fmt.Errorf("no Shared variable %s: %w", name, errdefs.ErrNotFound)
	}
	return nil
}

// mayChangeLinked refuses a change or removal of the Shared variable name
// to anyone but the Owner and those with write (push) permission at GitHub
// on every Repo that links it: the change reaches every Creator's Sessions
// there, as a change of the Repo's own Variables does (repoToChange). The
// refusal names the Repos the person sees, and no other.
func (h variablesAPI) mayChangeLinked(ctx context.Context, p Principal, name string) error {
	if p.User.IsOwner {
		return nil
	}
	repos, err := h.reposLinking(ctx, name)
	if err != nil {
		return err
	}
	var cant []string
	unseen := false
	for _, repo := range repos {
		switch {
		case h.guard.canPush(ctx, p.User, repo.URL):
		case h.guard.checkRepoAccess(ctx, p, repo.URL) == nil:
			cant = append(cant, repo.URL)
		default:
			unseen = true
		}
	}
	if unseen {
		cant = append(cant, "a Repo you can't push to")
	}
	if len(cant) == 0 {
		return nil
	}
	return fmt.Errorf("the Shared variable %s is linked into %s: changing or removing it takes write (push) permission at GitHub on every Repo that links it, or the Owner: %w",
		name, strings.Join(cant, ", "), errdefs.ErrForbidden)
}

func (h variablesAPI) setVariable(w http.ResponseWriter, r *http.Request, p Principal, repoID string) {
	ctx := r.Context()
	name := r.PathValue("name")
	var req api.VariableRequest
	err := readJSON(r, &req)
	switch {
	case err != nil:
	case !variableNameRE().MatchString(name):
		err = fmt.Errorf("variable name %q: use letters, digits and _, not starting with a digit: %w", name, errdefs.ErrInvalid)
	case sandboxOwnError(name) != nil:
		err = sandboxOwnError(name)
	case loadsCodeError(name, req.LoadsCode) != nil:
		err = loadsCodeError(name, req.LoadsCode)
	case len(req.Value) > maxVariableBytes:
		err = fmt.Errorf("the value is over %d bytes: %w", maxVariableBytes, errdefs.ErrTooLarge)
	case req.Sensitive:
		err = redact.Validate(req.Value)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	v := store.Variable{RepoID: repoID, Name: name, Value: req.Value, Sensitive: req.Sensitive, AtBuild: req.AtBuild, LoadsCode: req.LoadsCode, SetBy: p.User.ID}
	if req.Sensitive {
		v.Sealed = h.secrets.Seal([]byte(req.Value), sealFor(repoID, name))
	}
	saved, prev, err := h.store.Variables.SetVariable(ctx, v)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	repos := map[string]bool{repoID: true}
	if repoID == "" {
		linking, _ := h.reposLinking(ctx, name) // masking does what it can
		repos = map[string]bool{}
		for _, repo := range linking {
			repos[repo.ID] = true
		}
	}
	if req.Sensitive {
		// Running Sessions that could see it mask it from now on.
		h.masks.MaskNew(req.Value, func(repoID, _ string) bool { return repos[repoID] })
	}
	if prev != nil && prev.Sensitive {
		// The value it replaced stays masked in the Sessions that started
		// with it, a Hub restart included.
		old, err := h.openVariable(*prev)
		if err == nil {
			err = h.masks.KeepMasking(ctx, old, repos)
		}
		if err != nil {
			h.log.Error("keep masking a replaced value", "repo", repoID, "name", name, "err", err)
		}
	}
	h.log.Info("variable set", "repo", repoID, "name", name, "sensitive", req.Sensitive, "by", p.User.Name)
	h.audit(r, p, auditVariableSet, h.variableTarget(ctx, repoID, name), variableDetail(req, prev != nil))
	writeJSON(w, http.StatusOK, apiVariable(saved))
}

// reposLinking lists the Repos that link the Shared variable name.
func (h variablesAPI) reposLinking(ctx context.Context, name string) ([]store.Repo, error) {
	repos, err := h.store.Repos.List(ctx)
	var out []store.Repo
	for _, repo := range repos {
		var linked []store.Variable
		if linked, err = h.store.Variables.LinkedVariables(ctx, repo.ID); err != nil {
			return nil, err
		}
		for _, v := range linked {
			if v.Name == name {
				out = append(out, repo)
			}
		}
	}
	return out, err
}

func (h variablesAPI) deleteRepoVariable(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoToChange(r.Context(), p, r.PathValue("repo"), "Variables")
	if err == nil {
		_, err = h.store.Variables.DeleteVariable(r.Context(), repo.ID, r.PathValue("name"))
	}
	if err == nil {
		h.audit(r, p, auditVariableRemoved, h.variableTarget(r.Context(), repo.ID, r.PathValue("name")), "")
	}
	h.answerNoContent(w, r, err)
}

func (h variablesAPI) deleteSharedVariable(w http.ResponseWriter, r *http.Request, p Principal) {
	err := h.mayChangeShared(r.Context(), p, r.PathValue("name"), true)
	if err == nil {
		err = h.mayChangeLinked(r.Context(), p, r.PathValue("name"))
	}
	if err == nil {
		_, err = h.store.Variables.DeleteVariable(r.Context(), "", r.PathValue("name"))
	}
	if err == nil {
		h.audit(r, p, auditVariableRemoved, h.variableTarget(r.Context(), "", r.PathValue("name")), "")
	}
	h.answerNoContent(w, r, err)
}

func (h variablesAPI) linkVariable(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoToChange(r.Context(), p, r.PathValue("repo"), "Variables")
	if err == nil {
		err = h.mayChangeShared(r.Context(), p, r.PathValue("name"), true)
	}
	if err == nil {
		err = h.store.Variables.LinkVariable(r.Context(), repo.ID, r.PathValue("name"), p.User.ID)
	}
	if err == nil {
		h.audit(r, p, auditVariableLinked, h.variableTarget(r.Context(), "", r.PathValue("name")), "into "+repo.URL)
		// A Sensitive one joins the running Sessions' sets at once.
		linked, _ := h.store.Variables.LinkedVariables(r.Context(), repo.ID)
		for _, v := range linked {
			if v.Name == r.PathValue("name") && v.Sensitive {
				if plain, err := h.openVariable(v); err == nil {
					h.masks.MaskNew(plain, func(repoID, _ string) bool { return repoID == repo.ID })
				}
			}
		}
	}
	h.answerNoContent(w, r, err)
}

func (h variablesAPI) unlinkVariable(w http.ResponseWriter, r *http.Request, p Principal) {
	repo, err := h.guard.repoToChange(r.Context(), p, r.PathValue("repo"), "Variables")
	if err == nil {
		err = h.store.Variables.UnlinkVariable(r.Context(), repo.ID, r.PathValue("name"))
	}
	if err == nil {
		h.audit(r, p, auditVariableUnlinked, h.variableTarget(r.Context(), "", r.PathValue("name")), "from "+repo.URL)
	}
	h.answerNoContent(w, r, err)
}

// sessionSecrets opens what a Session runs with and must never show: its
// Variables, its Creator's setup token, and its MCP servers' header values.
// Made per use (newSessionSecrets) from the Hub's parts, all made by then.
type sessionSecrets struct {
	vault
	store          secretsStore
	log            *slog.Logger
	sessions       *session.Owner
	gateway        *gateway.Gateway
	tokenInSandbox bool // HUB_CLAUDE_TOKEN=sandbox
}

// secretsStore is the parts of the store sessionSecrets read: the
// Variables a Session runs with and its Creator's setup token.
type secretsStore struct {
	Variables *store.Variables
	Members   *store.Members
}

func newSessionSecrets(h *Hub) sessionSecrets {
	return sessionSecrets{vault: h.vault, store: secretsStore{h.store.Variables, h.store.Members}, log: h.log, sessions: h.sessions, gateway: h.gateway,
		tokenInSandbox: h.cfg.ClaudeTokenInSandbox}
}

// sessionVariables opens what a Session runs with, for its Runner. One
// stored under a name no Variable may have now (sandboxOwn) is left out,
// and named in dropped.
func (h sessionSecrets) sessionVariables(ctx context.Context, s store.Session) (out []protocol.Variable, dropped []string, err error) {
	vars, err := h.store.Variables.SessionVariables(ctx, s.RepoID)
	if err != nil {
		return nil, nil, err
	}
	out = make([]protocol.Variable, 0, len(vars))
	for _, v := range vars {
		if sandboxOwnError(v.Name) != nil {
			dropped = append(dropped, v.Name)
			continue
		}
		value := v.Value
		if v.Sensitive {
			if value, err = h.openVariable(v); err != nil {
				return nil, nil, fmt.Errorf("variable %s: %w", v.Name, err)
			}
		}
		out = append(out, protocol.Variable{Name: v.Name, Value: value, AtBuild: v.AtBuild})
	}
	return out, dropped, nil
}

// sessionCredentials is what a Session's Runner starts it with: its
// Creator's setup token and the Session's Variables, opened. A Variable
// left out is said in the Session.
func (h sessionSecrets) sessionCredentials(ctx context.Context, s store.Session) (protocol.SessionCredentials, error) {
	tok, err := h.claudeToken(ctx, s.CreatorID)
	if err != nil {
		return protocol.SessionCredentials{}, fmt.Errorf("the Session's Creator has no Claude setup token stored (kndl token set): %w", errdefs.ErrForbidden)
	}
	vars, dropped, err := h.sessionVariables(ctx, s)
	if err != nil {
		return protocol.SessionCredentials{}, err
	}
	if len(dropped) > 0 {
		h.noteDropped(ctx, s.ID, dropped)
	}
	return protocol.SessionCredentials{ClaudeToken: tok, ClaudeTokenInSandbox: h.tokenInSandbox, Variables: vars}, nil
}

// noteDropped says in a Session that the Variables named dropped, stored
// before such names were refused, did not reach its Sandbox.
func (h sessionSecrets) noteDropped(ctx context.Context, sessionID string, dropped []string) {
	text := fmt.Sprintf("Not passed to the Sandbox: the Variable %s. The Sandbox sets %s itself, from its login environment; remove it from the Repo's Variables or the Shared variables it links.",
		strings.Join(dropped, ", "), strings.Join(sandboxOwn, ", "))
	if err := h.sessions.Record(ctx, sessionID, protocol.Event{Kind: protocol.EventNote, Text: text}); err != nil {
		h.log.Error("note dropped variables", "session", sessionID, "err", err)
	}
}

// sensitiveValues opens the values a Session's text must never show.
func (h sessionSecrets) sensitiveValues(ctx context.Context, s store.Session) ([]string, error) {
	vars, err := h.store.Variables.SessionVariables(ctx, s.RepoID)
	if err != nil {
		return nil, err
	}
	var values []string
	for _, v := range vars {
		if v.Sensitive {
			plain, err := h.openVariable(v)
			if err != nil {
				return nil, err
			}
			values = append(values, plain)
		}
	}
	if tok, err := h.claudeToken(ctx, s.CreatorID); err == nil {
		values = append(values, tok)
	}
	// The header secret values its run started with: a server may echo one.
	gw, err := h.gateway.Values(ctx, s.ID)
	return append(values, gw...), err
}
