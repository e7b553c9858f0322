package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/store"
)

// Principal is who a request authenticated as.
type Principal struct {
	Kind   auth.Kind
	User   store.User   // Cookie, CLI
	Runner store.Runner // Runner
	// Session is the Session a mod token is for: one starting or Active.
	Session store.Session // Mod
	cred    []byte        // Cookie, CLI: the credential's hash, to end what it opened
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, p Principal)

// route is one row of the route table: a pattern and the credentials it
// takes. A route that declares no credential does not register.
type route struct {
	pattern string // net/http pattern: "METHOD /path/{param}"
	creds   []auth.Kind
	handle  handlerFunc
}

// routes is the one route table: every route the Hub serves, with the
// credential each takes. Add new routes here and nowhere else. A
// privileged act's handler is wrapped in h.recent: it asks for a browser
// sign-in within HUB_SUDO_MAX_AGE.
func (h *Hub) routes() []route {
	person := []auth.Kind{auth.Cookie, auth.CLI}
	public := []auth.Kind{auth.Public}
	browser := []auth.Kind{auth.Cookie}
	mod := []auth.Kind{auth.Mod}
	// The handlers, by resource, each holding the parts of the Hub it uses.
	var (
		sess    = newSessionsAPI(h)
		view    = newViewAPI(h)
		runs    = newRunnersAPI(h)
		atts    = attachmentsAPI{core: h.core, masks: h.masks}
		opens   = openPullAPI{core: h.core, masks: h.masks, pulls: h.pulls}
		envs    = environmentsAPI{core: h.core, envs: h.envs, sessions: h.sessions, gateway: h.gateway}
		vars    = variablesAPI{core: h.core, vault: h.vault, masks: h.masks}
		members = membersAPI{core: h.core, runners: h.runners, sessions: h.sessions, storeClaudeToken: h.StoreClaudeToken}
		signins = signinAPI{core: h.core, refusals: &h.refusals}
		logins  = cliLoginAPI{core: h.core, runners: h.runners}
		mcp     = mcpAPI{core: h.core, gateway: h.gateway}
		audit   = auditAPI{h.core}
		ops     = opsAPI{healthz: h.healthz, metrics: h.metrics}
		pages   = pagesAPI{core: h.core, rows: newSessionRows(h), place: newPlacer(h), runners: h.runners, masks: h.masks,
			envs: h.envs, gateway: h.gateway}
		notes   = notifyAPI{core: h.core, notify: h.notify}
		forks   = forkAPI{core: h.core, sessions: h.sessions, runners: h.runners}
		gh      = triggersAPI{core: h.core, triggers: h.triggers, sessions: h.sessions}
		changes = changesAPI{core: h.core, runners: h.runners, masks: h.masks, diffs: &h.diffs}
		usage   = usageAPI{h.core}
		limits  = limitsAPI{h.core}
		asks    = egressAskAPI{environmentsAPI: envs, notify: h.notify, asks: &h.egressAsks}
		tries   = attemptsAPI{core: h.core, sessions: sess, changes: changes, rows: newSessionRows(h), masks: h.masks, envs: h.envs}
	)
	return []route{
		{"GET /health", public, ops.health},
		{"GET /metrics", []auth.Kind{auth.Metrics}, ops.serveMetrics},
		{"GET /static/{file...}", public, signins.static},
		{"GET /signin", public, signins.signinPage},
		{"GET /signin/github", public, signins.githubSignin},
		{"GET /signin/github/callback", public, signins.githubCallback},
		{"POST /signin/claim", public, signins.claim},
		{"POST /signin/dev", public, signins.devSignin},
		{"GET /setup", public, signins.setupPage},
		{"GET /invite", public, signins.invitePage},
		{"POST /signout", browser, signins.signout},
		{"GET /{$}", browser, pages.home},
		{"GET /sessions/{id}", browser, pages.sessionPage},
		{"GET /sessions/{id}/ports/{port}", browser, view.openPort},
		{"GET /runners", browser, pages.runnersPage},
		{"GET /repos/{repo}", browser, envs.repoPage},
		{"GET /account", browser, pages.accountPage},
		{"GET /members", browser, pages.membersPage},
		{"GET /audit", browser, audit.auditLogPage},
		{"GET /mcp", browser, mcp.mcpPage},
		{"POST /api/cli/login", public, logins.cliLoginStart},
		{"POST /api/cli/login/poll", public, logins.cliLoginPoll},
		{"GET /cli/login", browser, logins.cliLoginPage},
		{"POST /cli/login", browser, logins.cliLoginDecide}, // approving asks for a recent sign-in (checkRecent), denying doesn't
		{"DELETE /api/cli/token", []auth.Kind{auth.CLI}, logins.cliLogout},
		{"GET /api/members", person, members.listMembers},
		{"DELETE /api/members/{id}", person, h.recent(members.removeMember)},
		{"GET /api/invites", person, members.listInvites},
		{"POST /api/invites", person, h.recent(members.createInvite)},
		{"DELETE /api/invites/{id}", person, members.revokeInvite},
		{"GET /runner/connect", []auth.Kind{auth.Runner}, runs.runnerConnect},
		{"GET /runner/stream/{id}", []auth.Kind{auth.Runner}, runs.runnerStream},
		{"GET /api/models", person, sess.models},
		{"GET /api/runners", person, runs.listRunners},
		{"POST /api/runners", person, h.recent(runs.createRunner)},
		{"DELETE /api/runners/{id}", person, runs.revokeRunner},
		{"PUT /api/runners/{id}/shared", person, h.recent(runs.shareRunner)},
		{"GET /api/account", person, members.showAccount},
		{"PUT /api/account/claude-token", person, h.recent(members.setClaudeToken)},
		{"DELETE /api/account/claude-token", person, members.deleteClaudeToken},
		// A Member's notification webhooks: adding or pointing one
		// elsewhere sends their Sessions' words out, a privileged act.
		{"GET /api/account/webhooks", person, notes.listWebhooks},
		{"POST /api/account/webhooks", person, h.recent(notes.addWebhook)},
		{"PUT /api/account/webhooks/{id}", person, h.recent(notes.editWebhook)},
		{"DELETE /api/account/webhooks/{id}", person, notes.removeWebhook},
		{"POST /api/sessions", person, sess.createSession},
		{"GET /api/sessions", person, sess.listSessions},
		{"GET /api/sessions/live", person, sess.liveSessions},
		{"GET /api/sessions/{id}", person, sess.showSession},
		{"POST /api/sessions/{id}/prompts", person, sess.queuePrompt},
		{"PATCH /api/sessions/{id}/prompts/{prompt}", person, sess.editPrompt},
		{"DELETE /api/sessions/{id}/prompts/{prompt}", person, sess.cancelPrompt},
		{"POST /api/sessions/{id}/prompts/{prompt}/move", person, sess.movePrompt},
		{"POST /api/sessions/{id}/stop-turn", person, sess.stopTurn},
		{"PATCH /api/sessions/{id}", person, sess.updateSession},
		{"POST /api/sessions/{id}/sleep", person, sess.lifeHandler(h.sessions.Sleep, "its Creator put it to sleep")},
		{"POST /api/sessions/{id}/wake", person, sess.lifeHandler(h.sessions.Wake, "its Creator woke it")},
		{"POST /api/sessions/{id}/restart", person, sess.lifeHandler(h.sessions.Restart, "its Creator restarted it")},
		{"POST /api/sessions/{id}/archive", person, sess.lifeHandler(h.sessions.Archive, "its Creator archived it")},
		{"POST /api/sessions/{id}/restore", person, sess.lifeHandler(h.sessions.Restore, "its Creator restored it")},
		{"PUT /api/sessions/{id}/keep-awake", person, sess.switchHandler(h.sessions.SetKeepAwake)},
		{"PUT /api/sessions/{id}/thread-context", person, sess.switchHandler(gh.setThreadContext)},
		{"POST /api/sessions/{id}/answer", person, sess.answerHandler},
		{"POST /api/sessions/{id}/subagents/{agent}/stop", person, sess.stopSubagent},
		// A fork (fork.go): the Creator's alone; its links, for every watcher.
		{"POST /api/sessions/{id}/fork", person, forks.fork},
		{"GET /api/sessions/{id}/forks", person, forks.listForks},
		{"GET /api/sessions/{id}/events", person, sess.listEvents},
		{"GET /api/sessions/{id}/watch", person, sess.watchSession},
		{"GET /api/repos", person, vars.listRepos},
		{"POST /api/repos", person, vars.addRepo},
		{"GET /api/repos/{repo}/variables", person, vars.listRepoVariables},
		{"PUT /api/repos/{repo}/variables/{name}", person, vars.setRepoVariable},
		{"DELETE /api/repos/{repo}/variables/{name}", person, vars.deleteRepoVariable},
		{"PUT /api/repos/{repo}/links/{name}", person, vars.linkVariable},
		{"DELETE /api/repos/{repo}/links/{name}", person, vars.unlinkVariable},
		{"GET /api/repos/{repo}/environment", person, envs.showEnvironment},
		{"PUT /api/repos/{repo}/environment/draft", person, envs.editEnvironment},
		{"POST /api/repos/{repo}/environment/draft/devcontainer", person, envs.fromDevcontainer},
		{"POST /api/repos/{repo}/environment/tests", person, envs.testEnvironment},
		{"GET /api/repos/{repo}/environment/tests/{test}", person, envs.showTestBuild},
		{"POST /api/repos/{repo}/environment/apply", person, envs.applyEnvironment},
		{"GET /api/repos/{repo}/environment/log", person, envs.environmentLog},
		{"GET /api/variables", person, vars.listSharedVariables},
		{"PUT /api/variables/{name}", person, vars.setSharedVariable},
		{"DELETE /api/variables/{name}", person, vars.deleteSharedVariable},
		{"GET /api/sessions/{id}/live", person, view.liveSession},
		{"GET /api/sessions/{id}/files/{path...}", person, pages.downloadFile},
		{"GET /api/sessions/{id}/changes", person, changes.showChanges},
		{"POST /api/sessions/{id}/attachments", person, atts.uploadAttachment},
		{"GET /api/sessions/{id}/attachments", person, atts.listAttachments},
		{"GET /api/sessions/{id}/attachments/{attachment}", person, atts.downloadAttachment},
		{"GET /api/audit", person, audit.listAudit},
		{"GET /api/audit/verify", person, audit.verifyAudit},
		{"GET /api/mcp/servers", person, mcp.listMCPServers},
		{"POST /api/mcp/servers", person, mcp.createMCPServer},
		{"PUT /api/mcp/servers/{id}", person, mcp.editMCPServer},
		{"GET /api/mcp/installations", person, mcp.listInstallations},
		{"POST /api/mcp/installations", person, mcp.install},
		{"PUT /api/mcp/installations/{id}/repos", person, mcp.setInstallationRepos},
		{"PUT /api/mcp/installations/{id}/secrets/{key}", person, mcp.setInstallationValue},
		{"PUT /api/mcp/installations/{id}/client", person, mcp.setInstallationClient},
		{"POST /api/mcp/installations/{id}/connect", person, mcp.connectInstallation},
		{"DELETE /api/mcp/installations/{id}/connect", person, mcp.disconnectInstallation},
		{"GET " + oauthCallbackPath, browser, mcp.oauthCallback},
		{"PUT /api/repos/{repo}/mcp/{id}/off", person, mcp.turnInstallation(true)},
		{"DELETE /api/repos/{repo}/mcp/{id}/off", person, mcp.turnInstallation(false)},
		{"GET /api/repos/{repo}/mcp/log", person, mcp.installationLog},
		{"GET /gateway/{installation}", mod, mcp.gatewayServe},
		{"POST /gateway/{installation}", mod, mcp.gatewayServe},
		{"DELETE /gateway/{installation}", mod, mcp.gatewayServe},
		{"POST /github/webhook", []auth.Kind{auth.Webhook}, gh.webhook},
		{"GET /api/repos/{repo}/trigger-label", person, gh.showTriggerLabel},
		{"PUT /api/repos/{repo}/trigger-label", person, gh.setTriggerLabel},
		{"GET /api/repos/{repo}/auto-fix", person, gh.showAutoFix},
		{"PATCH /api/repos/{repo}/auto-fix", person, gh.editAutoFix},

		// What Sessions spent.
		{"GET /usage", browser, usage.usagePage},
		{"GET /api/usage", person, usage.usageReport},
		{"GET /api/sessions/{id}/usage", person, usage.sessionUsage},

		// A Repo's limits for the Sessions started from GitHub.
		{"GET /api/repos/{repo}/limits", person, limits.showLimits},
		{"PATCH /api/repos/{repo}/limits", person, limits.changeLimits},

		// A pull request from the Session view: its Creator's alone (openpull.go).
		{"POST /api/sessions/{id}/pulls", person, opens.openPull},

		// A host the Session's allowlist refused: Allow for a Member with
		// push, Request for a Creator without (egressask.go).
		{"POST /api/sessions/{id}/egress/allow", person, asks.allowHost},
		{"POST /api/sessions/{id}/egress/request", person, asks.requestHost},

		// Attempt sets: one prompt as several Sessions, ranked (attemptsets.go).
		{"POST /api/attempts", person, tries.createAttempts},
		{"GET /api/attempts/{id}", person, tries.showAttempts},
		{"GET /api/attempts/{id}/usage", person, tries.attemptsUsage},
		{"POST /api/attempts/{id}/keep", person, tries.keepAttempt},
		{"GET /attempts/{id}", browser, tries.attemptsPage},
	}
}

// The handler types and pieces that parts of the Hub call as well as the
// route table: each is made from the Hub's parts when called, so a
// callback given to a part made before them (the Runners' connections
// before the Sessions) reads them once they are there, not a copy taken
// without them.

func newSessionsAPI(h *Hub) sessionsAPI {
	return sessionsAPI{core: h.core, sessions: h.sessions, rows: newSessionRows(h), place: newPlacer(h), placing: &h.placing,
		masks: h.masks, envs: h.envs, gateway: h.gateway}
}

func newViewAPI(h *Hub) viewAPI {
	return viewAPI{core: h.core, web: h.web, sessions: h.sessions, envs: h.envs, rows: newSessionRows(h), runners: h.runners,
		masks: h.masks, forward: h.forward, life: h.life}
}

func newRunnersAPI(h *Hub) runnersAPI {
	return runnersAPI{core: h.core, runners: h.runners, sessions: h.sessions, place: newPlacer(h), pulls: h.pulls, masks: h.masks,
		tokens: h.tokens, credentials: newSessionSecrets(h).sessionCredentials}
}

func newSessionRows(h *Hub) sessionRows {
	return sessionRows{core: h.core, sessions: h.sessions, pulls: h.pulls, masks: h.masks}
}

func newPlacer(h *Hub) placer {
	return placer{store: placerStore{h.store.Runners, h.store.Members, h.store.Sessions}, runners: h.runners, envs: h.envs}
}

// muxOf registers routes, refusing a route without a credential.
func (h *Hub) muxOf(routes []route) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	for _, rt := range routes {
		if len(rt.creds) == 0 || slices.Contains(rt.creds, 0) {
			return nil, fmt.Errorf("route %q declares no credential: every route must", rt.pattern)
		}
		if slices.Contains(rt.creds, auth.Public) && len(rt.creds) > 1 {
			return nil, fmt.Errorf("route %q is public and also takes a credential", rt.pattern)
		}
		mux.Handle(rt.pattern, h.authenticate(rt))
	}
	return mux, nil
}

// catchUpFirst are the routes of a watcher's socket: authenticate takes
// its catch-up turn (catchUps) before its sign-in's token read, so the
// thousands that dial a standby at once do not fill the store's
// connections with sign-ins either, which kept /health waiting past its
// 2 s on the load test's takeover.
var catchUpFirst = map[string]bool{"GET /api/sessions/{id}/watch": true, "GET /api/sessions/{id}/live": true}

// authenticate resolves the request's credential against the kinds the route
// takes, and answers 401 when none matches. A person's request is tracked
// while it runs, so ending their credential or access ends it.
func (h *Hub) authenticate(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if catchUpFirst[rt.pattern] {
			leave, ok := h.catchUp.enter(r.Context())
			if !ok {
				return
			}
			defer leave()
			r = r.WithContext(withTurn(r.Context(), leave))
		}
		p, err := h.guard.principal(r.Context(), r, rt.creds)
		if err != nil {
			switch statusOf(err) {
			case http.StatusUnauthorized:
				if slices.Contains(rt.creds, auth.Cookie) && signin.WantsPage(r) {
					http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
					return
				}
				// The Gateway's callers are Claude Code's MCP clients: a
				// challenge would start an OAuth sign-in of their own.
				if !slices.Contains(rt.creds, auth.Mod) {
					w.Header().Set("WWW-Authenticate", `Bearer realm="kndl"`)
				}
			case http.StatusTooManyRequests:
				w.Header().Set("Retry-After", strconv.Itoa(int(signin.FailRefill/time.Second)))
			}
			h.writeError(w, r, err)
			return
		}
		if p.Kind == auth.Cookie || p.Kind == auth.CLI {
			ctx, done := h.guard.conns.track(r.Context(), p, p.cred)
			defer done()
			r = r.WithContext(ctx)
		}
		rt.handle(w, r, p)
	})
}

// principal resolves the request's credential among kinds: a bearer token,
// or else, where the route takes one, the sign-in cookie. A right
// credential is let in whatever its address did; a wrong one counts
// against the address, and one from an address that has failed too often
// is refused as too many.
func (g *guard) principal(ctx context.Context, r *http.Request, kinds []auth.Kind) (Principal, error) {
	if slices.Contains(kinds, auth.Public) {
		return Principal{Kind: auth.Public}, nil
	}
	if slices.Contains(kinds, auth.Webhook) {
		// Signed over the body: triggers.Receiver.Take checks it first.
		return Principal{Kind: auth.Webhook}, nil
	}
	token, ok := bearer(r)
	if !ok && slices.Contains(kinds, auth.Cookie) {
		token = g.signinToken(r)
	}
	if ok {
		switch kind := auth.KindOf(token); {
		case !slices.Contains(kinds, kind):
		case kind == auth.CLI:
			u, err := g.store.Signins.UserByCLIToken(ctx, token)
			if err == nil {
				return Principal{Kind: kind, User: u, cred: auth.Hash(token)}, nil
			}
			if unchecked(err) {
				return Principal{}, err
			}
		case kind == auth.Runner:
			rn, err := g.store.Runners.RunnerByToken(ctx, token)
			if err == nil {
				return Principal{Kind: kind, Runner: rn}, nil
			}
			if unchecked(err) {
				return Principal{}, err
			}
		case kind == auth.Metrics:
			if err := g.store.Signins.CheckMetricsToken(ctx, token); err == nil {
				return Principal{Kind: kind}, nil
			}
		case kind == auth.Mod:
			// Claude Code reaches its MCP servers as it starts, before the
			// Hub hears it is up: a starting run's token counts too.
			s, err := g.store.Sessions.SessionByModToken(ctx, token)
			if err == nil && (s.State == store.Starting || s.State == store.Active) {
				return Principal{Kind: kind, Session: s}, nil
			}
		}
	} else if token != "" {
		p, err := g.cookiePrincipal(ctx, r, token)
		if err == nil {
			p.cred = auth.Hash(token)
			return p, nil
		}
		if errors.Is(err, errdefs.ErrForbidden) || unchecked(err) {
			return Principal{}, err
		}
	}
	if token != "" && !g.fails.Take(signin.ClientAddr(r)) {
		return Principal{}, fmt.Errorf("too many failed sign-ins or wrong credentials from your address; try again in a minute: %w", errdefs.ErrTooMany)
	}
	return Principal{}, fmt.Errorf("this endpoint needs a valid %s credential: %w", kindList(kinds), errdefs.ErrUnauthorized)
}

// unchecked reports whether a credential's lookup failed (the store could
// not answer: a standby taking over a load), which is neither a wrong
// credential to count against the address nor a reason to refuse it.
func unchecked(err error) bool {
	return err != nil && !errors.Is(err, errdefs.ErrUnauthorized) && !errors.Is(err, errdefs.ErrForbidden)
}

func bearer(r *http.Request) (string, bool) {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return strings.TrimSpace(v), ok && v != ""
}

func kindList(kinds []auth.Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.String()
	}
	return strings.Join(names, " or ")
}
