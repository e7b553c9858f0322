package security

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testkit"
)

// The callers of the role test, each a kind of caller of the Hub.
const (
	theOwner   = "the Owner"                       // olivia: the Owner, with push on acme/app
	theCreator = "the Creator"                     // bob: push on acme/app, and the Session's Creator
	aPusher    = "another Creator"                 // carol: push on acme/app, not the Session's Creator
	aReader    = "a read-only collaborator"        // rita: read on acme/app
	anOutsider = "a Member without access"         // nora: no access to acme/app
	aSandbox   = "a Sandbox's Session (mod) token" // the mod token of the Session's run
	aRunner    = "a Runner token"                  // bob's Runner's
)

var roleCallers = []string{theOwner, theCreator, aPusher, aReader, anOutsider, aSandbox, aRunner}

// answer is a class of the Hub's answers, and how it is recognised.
type answer string

const (
	// allowed: the authorization passed and the handler did it, a 2xx (a
	// page's 200, a redirect onward where the route sends the browser on).
	allowed answer = "allowed"
	// passed: the authorization passed, and the handler then needs what the
	// fixture has no way to give: a WebSocket upgrade (a plain GET gets
	// 426 or 400 from it), a Runner answering a file, a waiting question
	// (409). Anything but 401, 403, 404, 429 and 500 is past the check,
	// since every refusal comes before it.
	passed answer = "passed"
	// forbidden: 403, refused someone who may see the thing.
	forbidden answer = "forbidden"
	// missing: 404, answered as for a thing that doesn't exist, for
	// someone who can't see it (a Session or Repo without access).
	missing answer = "missing"
	// absent: the check passed, and the Session holds no such thing (no
	// question waits, no such subagent runs): a 404 that, unlike missing's,
	// doesn't name the Session.
	absent answer = "absent"
	// unauthenticated: 401, a credential of a kind the route doesn't take.
	unauthenticated answer = "unauthenticated"
)

func (a answer) is(code int, body string) bool {
	switch a {
	case absent:
		return code == http.StatusNotFound && !strings.HasPrefix(body, `{"message":"session `)
	case allowed:
		return code >= 200 && code < 400
	case passed:
		return !slices.Contains([]int{401, 403, 404, 429, 500}, code)
	case forbidden:
		return code == http.StatusForbidden
	case missing:
		return code == http.StatusNotFound
	}
	return code == http.StatusUnauthorized
}

// answers is what each caller gets from one route.
type answers map[string]answer

// people is c for each person, and 401 for a Sandbox and a Runner.
func people(c answer) answers {
	return answers{theOwner: c, theCreator: c, aPusher: c, aReader: c, anOutsider: c, aSandbox: unauthenticated, aRunner: unauthenticated}
}

// but is a with caller's answer c.
func (a answers) but(caller string, c answer) answers {
	b := answers{}
	for k, v := range a {
		b[k] = v
	}
	b[caller] = c
	return b
}

// The answers most routes give.
var (
	everyone = people(allowed)
	// ownerOnly: Members, Invites, sharing Runners and the audit log.
	ownerOnly = people(forbidden).but(theOwner, allowed)
	// watchers: a Session or Repo is seen by everyone with access to it;
	// without, it answers as missing.
	watchers = people(allowed).but(anOutsider, missing)
	// pushers: changing what a Repo's Sessions reach takes push.
	pushers = watchers.but(aReader, forbidden)
	// drivers: only the Creator drives a Session.
	drivers = people(forbidden).but(theCreator, allowed).but(anOutsider, missing)
	// nobody: the route takes no person's, Sandbox's or Runner's credential.
	nobody = people(unauthenticated)
)

// roleRoute is one row of the role table: the request a caller makes on
// the fixture (made afresh for each caller where a success would change
// what the next caller finds), and what each caller gets.
type roleRoute struct {
	want answers
	req  func(f *roleFixture, caller string) req
	// own runs the route on a fixture of its own, since its success
	// changes the callers themselves (their Sessions go to sleep).
	own bool
}

// roleTable is what every route answers each kind of caller. A route the
// Hub serves that isn't here fails the test, and so does a row for a
// route it no longer serves.
var roleTable = map[string]roleRoute{
	// Public routes take no credential: the role test has nothing to ask.
	"GET /health":                 {want: nil},
	"GET /static/{file...}":       {want: nil},
	"GET /signin":                 {want: nil},
	"GET /signin/github":          {want: nil},
	"GET /signin/github/callback": {want: nil},
	"POST /signin/claim":          {want: nil},
	"POST /signin/dev":            {want: nil},
	"GET /setup":                  {want: nil},
	"GET /invite":                 {want: nil},
	"POST /api/cli/login":         {want: nil},
	"POST /api/cli/login/poll":    {want: nil},
	// The metrics token's route is TestMetricsTakeOnlyTheMetricsToken's.
	"GET /metrics": {want: nobody, req: get("/metrics")},
	// The GitHub App's webhook takes its signature alone: no caller's
	// credential is one.
	"POST /github/webhook": {want: nobody, req: send("POST", "/github/webhook", `{"action":"created"}`)},

	// Pages.
	"POST /signout": {want: everyone, req: func(f *roleFixture, c string) req {
		r := send("POST", "/signout", "")(f, c)
		r.cookie = f.freshCookie(c) // signing out ends the cookie: each its own
		return r
	}},
	"GET /{$}":           {want: everyone, req: get("/")},
	"GET /sessions/{id}": {want: watchers, req: func(f *roleFixture, _ string) req { return get("/sessions/"+f.session.ID)(f, "") }},
	"GET /sessions/{id}/ports/{port}": {want: watchers, req: func(f *roleFixture, _ string) req {
		return get("/sessions/"+f.session.ID+"/ports/8080")(f, "")
	}},
	"GET /runners":       {want: everyone, req: get("/runners")},
	"GET /attempts/{id}": {want: watchers, req: func(f *roleFixture, _ string) req { return get("/attempts/"+f.attempts)(f, "") }},
	"GET /repos/{repo}":  {want: watchers, req: func(f *roleFixture, _ string) req { return get("/repos/"+f.repo.ID)(f, "") }},
	"GET /account":       {want: everyone, req: get("/account")},
	"GET /members":       {want: everyone, req: get("/members")},
	"GET /audit":         {want: ownerOnly, req: get("/audit")},
	"GET /mcp":           {want: everyone, req: get("/mcp")},
	"GET /cli/login": {want: everyone, req: func(f *roleFixture, _ string) req {
		return get("/cli/login?code="+f.cliLoginCode())(f, "")
	}},
	// Any Member approves a login of their own kndl.
	"POST /cli/login": {want: everyone, req: func(f *roleFixture, c string) req {
		r := send("POST", "/cli/login", url.Values{"code": {f.cliLoginCode()}, "action": {"approve"}}.Encode())(f, c)
		r.header = http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
		return r
	}},
	// A sign-in at an MCP server's authorization server comes back only to
	// the browser that began it: the Creator's here.
	"GET /mcp/oauth/callback": {want: people(missing).but(theCreator, allowed), req: func(f *roleFixture, _ string) req {
		return get(f.oauthCallback())(f, "")
	}},

	// Members and Invites: the Owner's alone.
	"DELETE /api/cli/token": {want: everyone, req: send("DELETE", "/api/cli/token", "")},
	"GET /api/members":      {want: everyone, req: get("/api/members")},
	"DELETE /api/members/{id}": {want: ownerOnly, req: func(f *roleFixture, c string) req {
		return send("DELETE", "/api/members/"+f.freshMember(), "")(f, c)
	}},
	"GET /api/invites": {want: ownerOnly, req: get("/api/invites")},
	"POST /api/invites": {want: ownerOnly, req: func(f *roleFixture, c string) req {
		return send("POST", "/api/invites", fmt.Sprintf(`{"github_login":"invited-%d"}`, f.next()))(f, c)
	}},
	"DELETE /api/invites/{id}": {want: ownerOnly, req: func(f *roleFixture, c string) req {
		return send("DELETE", "/api/invites/"+f.freshInvite(), "")(f, c)
	}},

	// Runners: any Member pairs one; its pairer or the Owner removes it;
	// the Owner shares it. A Runner connects with its own token, and takes
	// only a stream the Hub asked of it (none waits here).
	"GET /runner/connect":     {want: nobody.but(aRunner, passed), req: get("/runner/connect")},
	"GET /runner/stream/{id}": {want: nobody.but(aRunner, missing), req: get("/runner/stream/nothing-waits")},
	"GET /api/models":         {want: everyone, req: get("/api/models")},
	"GET /api/runners":        {want: everyone, req: get("/api/runners")},
	"POST /api/runners": {want: everyone, req: func(f *roleFixture, c string) req {
		return send("POST", "/api/runners", fmt.Sprintf(`{"name":"box-%d"}`, f.next()))(f, c)
	}},
	"DELETE /api/runners/{id}": {want: people(forbidden).but(theOwner, allowed).but(theCreator, allowed), req: func(f *roleFixture, c string) req {
		return send("DELETE", "/api/runners/"+f.freshRunner(), "")(f, c)
	}},
	"PUT /api/runners/{id}/shared": {want: ownerOnly, req: func(f *roleFixture, c string) req {
		return send("PUT", "/api/runners/"+f.runner.ID+"/shared", `{"shared":true}`)(f, c)
	}},

	// One's own account.
	"GET /api/account": {want: everyone, req: get("/api/account")},
	"PUT /api/account/claude-token": {want: everyone, own: true, req: func(f *roleFixture, c string) req {
		return send("PUT", "/api/account/claude-token", fmt.Sprintf(`{"token":%q}`, fmt.Sprintf(tokenOf, "again")))(f, c)
	}},
	"DELETE /api/account/claude-token": {want: everyone, own: true, req: send("DELETE", "/api/account/claude-token", "")},
	// One's own notification webhooks; another's answer as missing
	// (TestAMembersWebhookIsTheirsAlone).
	"GET /api/account/webhooks":  {want: everyone, req: get("/api/account/webhooks")},
	"POST /api/account/webhooks": {want: everyone, req: send("POST", "/api/account/webhooks", `{"url":"https://203.0.113.7/hook","format":"json"}`)},
	"PUT /api/account/webhooks/{id}": {want: everyone, req: func(f *roleFixture, c string) req {
		return send("PUT", "/api/account/webhooks/"+f.freshWebhook(c), `{"url":"https://203.0.113.8/hook","format":"slack"}`)(f, c)
	}},
	"DELETE /api/account/webhooks/{id}": {want: everyone, req: func(f *roleFixture, c string) req {
		return send("DELETE", "/api/account/webhooks/"+f.freshWebhook(c), "")(f, c)
	}},

	// Sessions: everyone with access to the Repo starts and watches them;
	// the Creator alone drives one.
	"POST /api/sessions": {want: watchers, req: func(f *roleFixture, c string) req {
		body, _ := json.Marshal(api.NewSession{Repo: f.gh.RepoURL("acme/app"), Prompt: "hello", Runner: f.runner.Name})
		return send("POST", "/api/sessions", string(body))(f, c)
	}},
	"POST /api/attempts": {want: watchers, req: func(f *roleFixture, c string) req {
		body, _ := json.Marshal(api.NewAttempts{NewSession: api.NewSession{Repo: f.gh.RepoURL("acme/app"), Prompt: "hello", Runner: f.runner.Name}, Attempts: 2})
		return send("POST", "/api/attempts", string(body))(f, c)
	}},
	// Keeping one: the Creator, who drives every attempt, alone.
	"POST /api/attempts/{id}/keep": {want: drivers, req: func(f *roleFixture, c string) req {
		return send("POST", "/api/attempts/"+f.attempts+"/keep", `{"session_id":"`+f.session.ID+`","others":"sleep"}`)(f, c)
	}},
	"GET /api/attempts/{id}":                        {want: watchers, req: func(f *roleFixture, c string) req { return get("/api/attempts/"+f.attempts)(f, c) }},
	"GET /api/attempts/{id}/usage":                  {want: watchers, req: func(f *roleFixture, c string) req { return get("/api/attempts/"+f.attempts+"/usage")(f, c) }},
	"GET /api/sessions":                             {want: everyone, req: get("/api/sessions")},
	"GET /api/sessions/live":                        {want: people(passed), req: get("/api/sessions/live")},
	"GET /api/sessions/{id}":                        {want: watchers, req: onSession("GET", "", "")},
	"POST /api/sessions/{id}/prompts":               {want: drivers, req: onSession("POST", "/prompts", `{"text":"hello"}`)},
	"PATCH /api/sessions/{id}/prompts/{prompt}":     {want: drivers, req: onPrompt("PATCH", "", `{"text":"hello again"}`)},
	"DELETE /api/sessions/{id}/prompts/{prompt}":    {want: drivers, req: onPrompt("DELETE", "", "")},
	"POST /api/sessions/{id}/prompts/{prompt}/move": {want: drivers, req: onPrompt("POST", "/move", `{"position":1}`)},
	"POST /api/sessions/{id}/stop-turn":             {want: drivers, req: onSession("POST", "/stop-turn", "")},
	"PATCH /api/sessions/{id}":                      {want: drivers, req: onSession("PATCH", "", `{"title":"renamed"}`)},
	"POST /api/sessions/{id}/sleep":                 {want: drivers, req: onFresh(store.Active, "/sleep")},
	"POST /api/sessions/{id}/wake":                  {want: drivers, req: onFresh(store.Asleep, "/wake")},
	"POST /api/sessions/{id}/restart":               {want: drivers, req: onFresh(store.Active, "/restart")},
	"POST /api/sessions/{id}/archive":               {want: drivers, req: onFresh(store.Asleep, "/archive")},
	"POST /api/sessions/{id}/restore":               {want: drivers, req: onFresh(store.Archived, "/restore")},
	"PUT /api/sessions/{id}/keep-awake":             {want: drivers, req: onSession("PUT", "/keep-awake", `{"on":true}`)},
	"PUT /api/sessions/{id}/thread-context":         {want: drivers, req: onSession("PUT", "/thread-context", `{"on":true}`)},
	// No question waits, nor a subagent runs: the Creator gets past the
	// check that refuses others to the Session's own 404 (absent).
	"POST /api/sessions/{id}/answer":                 {want: drivers.but(theCreator, absent), req: onSession("POST", "/answer", `{"answers":[{"option":1}]}`)},
	"POST /api/sessions/{id}/subagents/{agent}/stop": {want: drivers.but(theCreator, absent), req: onSession("POST", "/subagents/a1/stop", "")},
	// A pull request from the view: the Creator alone. The Session pushed
	// no such branch, so the Creator gets past the check to a 400 (passed).
	"POST /api/sessions/{id}/pulls": {want: drivers.but(theCreator, passed), req: onSession("POST", "/pulls", `{"branch":"kndl/none","title":"t"}`)},
	// A host the Session's allowlist refused: Allow takes push, Request is
	// the Creator's. No host was refused here, so those past the check get
	// a 400 (passed); the Creator, who has push, a 409 (passed).
	"POST /api/sessions/{id}/egress/allow":   {want: pushers.but(theOwner, passed).but(theCreator, passed).but(aPusher, passed), req: onSession("POST", "/egress/allow", `{"host":"example.com"}`)},
	"POST /api/sessions/{id}/egress/request": {want: drivers.but(theCreator, passed), req: onSession("POST", "/egress/request", `{"host":"example.com"}`)},
	"GET /api/sessions/{id}/events":          {want: watchers, req: onSession("GET", "/events", "")},
	"GET /api/sessions/{id}/watch":           {want: watchers.but(theOwner, passed).but(theCreator, passed).but(aPusher, passed).but(aReader, passed), req: onSession("GET", "/watch", "")},

	// A fork is the Creator's: the fixture's Session is awake, so the
	// Creator gets past the check to a 409 (passed). Its links, a watcher's.
	"POST /api/sessions/{id}/fork": {want: drivers.but(theCreator, passed), req: onSession("POST", "/fork", `{}`)},
	"GET /api/sessions/{id}/forks": {want: watchers, req: onSession("GET", "/forks", "")},

	// The terminal's WebSocket: a watcher sees the Session, the terminal
	// being the Creator's is decided inside it.
	"GET /api/sessions/{id}/live": {want: watchers.but(theOwner, passed).but(theCreator, passed).but(aPusher, passed).but(aReader, passed), req: onSession("GET", "/live", "")},
	// A Workspace file: the fake Runner sends no file, so a caller past the
	// check gets the Runner's failure (passed). Issue 22 finding 7 masks a
	// watcher's download; it stays allowed.
	"GET /api/sessions/{id}/files/{path...}": {want: watchers, req: onSession("GET", "/files/notes.txt", "")},
	// Its changes, like its transcript.
	"GET /api/sessions/{id}/changes": {want: watchers, req: onSession("GET", "/changes", "")},
	"POST /api/sessions/{id}/attachments": {want: drivers, req: func(f *roleFixture, c string) req {
		r := onSession("POST", "/attachments?name=notes.txt", "some notes")(f, c)
		r.header = http.Header{"Content-Type": {"text/plain"}}
		return r
	}},
	"GET /api/sessions/{id}/attachments":              {want: watchers, req: onSession("GET", "/attachments", "")},
	"GET /api/sessions/{id}/attachments/{attachment}": {want: watchers, req: func(f *roleFixture, c string) req { return onSession("GET", "/attachments/"+f.attachment, "")(f, c) }},

	// Repos: seeing one takes access; changing its Variables and its
	// Environment takes push.
	"GET /api/repos": {want: everyone, req: get("/api/repos")},
	"POST /api/repos": {want: watchers, req: func(f *roleFixture, c string) req {
		return send("POST", "/api/repos", `{"url":"`+f.gh.RepoURL("acme/app")+`"}`)(f, c)
	}},
	"GET /api/repos/{repo}/variables":           {want: watchers, req: onRepo("GET", "/variables", "")},
	"PUT /api/repos/{repo}/variables/{name}":    {want: pushers, req: onRepo("PUT", "/variables/NODE_ENV", `{"value":"test","loads_code":true}`)},
	"GET /api/repos/{repo}/trigger-label":       {want: watchers, req: onRepo("GET", "/trigger-label", "")},
	"PUT /api/repos/{repo}/trigger-label":       {want: pushers, req: onRepo("PUT", "/trigger-label", `{"label":"kndl"}`)},
	"GET /api/repos/{repo}/auto-fix":            {want: watchers, req: onRepo("GET", "/auto-fix", "")},
	"PATCH /api/repos/{repo}/auto-fix":          {want: pushers, req: onRepo("PATCH", "/auto-fix", `{"ci":true}`)},
	"GET /api/repos/{repo}/limits":              {want: watchers, req: onRepo("GET", "/limits", "")},
	"PATCH /api/repos/{repo}/limits":            {want: pushers, req: onRepo("PATCH", "/limits", `{"max_turns":5}`)},
	"DELETE /api/repos/{repo}/variables/{name}": {want: pushers, req: func(f *roleFixture, c string) req { return onRepo("DELETE", "/variables/"+f.freshVariable(), "")(f, c) }},
	// Linking a Shared variable takes push in the Repo, and being its
	// setter (the Creator here) or the Owner.
	"PUT /api/repos/{repo}/links/{name}":             {want: pushers.but(aPusher, forbidden), req: onRepo("PUT", "/links/CREATORS_SHARED", "")},
	"DELETE /api/repos/{repo}/links/{name}":          {want: pushers, req: func(f *roleFixture, c string) req { return onRepo("DELETE", "/links/"+f.freshLink(), "")(f, c) }},
	"GET /api/repos/{repo}/environment":              {want: watchers, req: onRepo("GET", "/environment", "")},
	"PUT /api/repos/{repo}/environment/draft":        {want: pushers, req: onRepo("PUT", "/environment/draft", `{"cpus":2}`)},
	"POST /api/repos/{repo}/environment/tests":       {want: pushers, req: onRepo("POST", "/environment/tests", "")},
	"GET /api/repos/{repo}/environment/tests/{test}": {want: watchers, req: func(f *roleFixture, c string) req { return onRepo("GET", "/environment/tests/"+f.test, "")(f, c) }},
	"POST /api/repos/{repo}/environment/apply": {want: pushers, req: func(f *roleFixture, c string) req {
		f.draft()
		return onRepo("POST", "/environment/apply", "")(f, c)
	}},
	// The fixture serves no devcontainer.json: past the check, a 400.
	"POST /api/repos/{repo}/environment/draft/devcontainer": {want: people(passed).but(aReader, forbidden).but(anOutsider, missing),
		req: onRepo("POST", "/environment/draft/devcontainer", `{}`)},
	"GET /api/repos/{repo}/environment/log": {want: watchers, req: onRepo("GET", "/environment/log", "")},

	// What Sessions spent: a Session's, by everyone who sees it; a report
	// of one's own, by everyone; everyone's, by the Owner alone.
	"GET /usage":                   {want: everyone, req: get("/usage")},
	"GET /api/usage":               {want: ownerOnly, req: get("/api/usage?all=1")},
	"GET /api/sessions/{id}/usage": {want: watchers, req: onSession("GET", "/usage", "")},

	// Shared variables: any Member manages them. Changing or removing one
	// takes being its setter or the Owner, and (issue 22 finding 9) push
	// in each Repo it is linked to: the reader sets each, which the Owner
	// links into acme/app.
	"GET /api/variables": {want: everyone, req: get("/api/variables")},
	"PUT /api/variables/{name}": {want: ownerOnly, req: func(f *roleFixture, c string) req {
		return send("PUT", "/api/variables/"+f.freshShared(), `{"value":"changed"}`)(f, c)
	}},
	"DELETE /api/variables/{name}": {want: ownerOnly, req: func(f *roleFixture, c string) req { return send("DELETE", "/api/variables/"+f.freshShared(), "")(f, c) }},

	// The audit log is the Owner's.
	"GET /api/audit":        {want: ownerOnly, req: get("/api/audit")},
	"GET /api/audit/verify": {want: ownerOnly, req: get("/api/audit/verify")},

	// MCP servers and Installations. Any Member adds a server. Issue 22
	// findings 1 and 2: editing a server takes the right to edit each of
	// its Installations (docs, on acme/app), and making or changing a
	// Repo's Installation takes push there; a Repo someone can't see reads
	// as missing.
	"GET /api/mcp/servers": {want: everyone, req: get("/api/mcp/servers")},
	"POST /api/mcp/servers": {want: everyone, req: func(f *roleFixture, c string) req {
		return send("POST", "/api/mcp/servers", fmt.Sprintf(`{"id":"hub:s%d","name":"S","url":"https://mcp.example.com/mcp","auth":"none"}`, f.next()))(f, c)
	}},
	"PUT /api/mcp/servers/{id}": {want: pushers.but(anOutsider, forbidden), req: func(f *roleFixture, c string) req {
		body, _ := json.Marshal(api.MCPServer{Name: "Docs", URL: f.up.URL, Auth: "headers",
			Headers: []api.HeaderSecret{{Key: "api-key", Header: "Authorization", Format: "Bearer {value}"}}})
		return send("PUT", "/api/mcp/servers/hub:docs", string(body))(f, c)
	}},
	"GET /api/mcp/installations": {want: everyone, req: get("/api/mcp/installations")},
	"POST /api/mcp/installations": {want: pushers, req: func(f *roleFixture, c string) req {
		n := f.next()
		f.api(f.bob, "POST", "/api/mcp/servers", api.MCPServer{ID: fmt.Sprintf("hub:s%d", n), Name: "S", URL: "https://mcp.example.com/mcp", Auth: "none"}, nil)
		body, _ := json.Marshal(api.InstallationRequest{ID: fmt.Sprintf("s%d", n), Server: fmt.Sprintf("hub:s%d", n), Name: "S", Repos: []string{f.repo.ID}})
		return send("POST", "/api/mcp/installations", string(body))(f, c)
	}},
	"PUT /api/mcp/installations/{id}/repos": {want: pushers, req: func(f *roleFixture, c string) req {
		return send("PUT", "/api/mcp/installations/docs/repos", `{"repos":["`+f.repo.ID+`"]}`)(f, c)
	}},
	"PUT /api/mcp/installations/{id}/secrets/{key}": {want: pushers, req: send("PUT", "/api/mcp/installations/docs/secrets/api-key", `{"value":"`+mcpKey+`"}`)},
	"PUT /api/mcp/installations/{id}/client": {want: pushers, req: func(f *roleFixture, c string) req {
		return send("PUT", "/api/mcp/installations/"+f.freshOAuth()+"/client", `{"client_id":"entered","client_secret":"entered-secret"}`)(f, c)
	}},
	"POST /api/mcp/installations/{id}/connect": {want: pushers, req: func(f *roleFixture, c string) req {
		return send("POST", "/api/mcp/installations/"+f.freshOAuth()+"/connect", "")(f, c)
	}},
	"DELETE /api/mcp/installations/{id}/connect": {want: pushers, req: func(f *roleFixture, c string) req {
		return send("DELETE", "/api/mcp/installations/"+f.freshOAuth()+"/connect", "")(f, c)
	}},
	// Turning an Installation on or off in a Repo changes what its
	// Sessions reach, so it takes push as the rest of issue 22's do.
	"PUT /api/repos/{repo}/mcp/{id}/off": {want: pushers, req: func(f *roleFixture, c string) req {
		return onRepo("PUT", "/mcp/"+f.freshOAuth()+"/off", "")(f, c)
	}},
	"DELETE /api/repos/{repo}/mcp/{id}/off": {want: pushers, req: func(f *roleFixture, c string) req {
		id := f.freshOAuth()
		f.api(f.bob, "PUT", "/api/repos/"+f.repo.ID+"/mcp/"+id+"/off", nil, nil)
		return onRepo("DELETE", "/mcp/"+id+"/off", "")(f, c)
	}},
	"GET /api/repos/{repo}/mcp/log": {want: watchers, req: onRepo("GET", "/mcp/log", "")},

	// The Gateway takes a live run's mod token alone, for an Installation
	// it started with.
	"GET /gateway/{installation}": {want: nobody.but(aSandbox, passed), req: get("/gateway/docs")},
	"POST /gateway/{installation}": {want: nobody.but(aSandbox, allowed), req: func(f *roleFixture, c string) req {
		r := send("POST", "/gateway/docs", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)(f, c)
		r.header = http.Header{"Accept": {"application/json, text/event-stream"}}
		return r
	}},
	"DELETE /gateway/{installation}": {want: nobody.but(aSandbox, passed), req: send("DELETE", "/gateway/docs", "")},
}

func get(path string) func(*roleFixture, string) req { return send("GET", path, "") }

func send(method, path, body string) func(*roleFixture, string) req {
	return func(*roleFixture, string) req {
		r := req{method: method, path: path, body: body}
		if method != "GET" {
			r.origin = "self"
		}
		return r
	}
}

// onSession is a request on the fixture's Session, Active on bob's Runner.
func onSession(method, sub, body string) func(*roleFixture, string) req {
	return func(f *roleFixture, c string) req { return send(method, "/api/sessions/"+f.session.ID+sub, body)(f, c) }
}

// onPrompt is a request on a prompt of its own, queued on a sleeping
// Session of the Creator's, where it stays queued.
func onPrompt(method, sub, body string) func(*roleFixture, string) req {
	return func(f *roleFixture, c string) req {
		s := f.freshSession(store.Asleep)
		p, err := f.store.Prompts.EnqueuePrompt(context.Background(), store.Prompt{SessionID: s.ID, AuthorID: f.creator.ID, Text: "queued"})
		if err != nil {
			f.t.Fatal(err)
		}
		return send(method, "/api/sessions/"+s.ID+"/prompts/"+p.ID+sub, body)(f, c)
	}
}

// onFresh is a request on a Session of its own, in state st.
func onFresh(st store.SessionState, sub string) func(*roleFixture, string) req {
	return func(f *roleFixture, c string) req {
		return send("POST", "/api/sessions/"+f.freshSession(st).ID+sub, "")(f, c)
	}
}

// onRepo is a request on acme/app.
func onRepo(method, sub, body string) func(*roleFixture, string) req {
	return func(f *roleFixture, c string) req { return send(method, "/api/repos/"+f.repo.ID+sub, body)(f, c) }
}

// roleFixture is the team on acme/app with every kind of caller, and a
// thing of each kind the routes act on.
type roleFixture struct {
	*gatewayEnv
	people     map[string]*browser
	creator    store.User
	session    api.Session // bob's, Active on his Runner
	modToken   string      // its run's
	attachment string      // one of its Attachments
	attempts   string      // an attempt set whose attempt it is
	test       string      // a Test build of acme/app
	n          atomic.Int64
}

func newRoleFixture(t *testing.T) *roleFixture {
	f := &roleFixture{gatewayEnv: newGatewayEnv(t)}
	e := f.gatewayEnv
	rita, nora := e.member(e.owner, "rita"), e.member(e.owner, "nora")
	e.gh.SetCollaborator("acme/app", "rita", true)
	e.gh.SetReadOnly("acme/app", "rita", true)
	for _, b := range []*browser{rita, nora} {
		e.storeToken(b)
	}
	carol := e.browser("carol") // team's, signed in again: newGatewayEnv keeps no browser of hers
	e.signIn(carol)
	f.people = map[string]*browser{theOwner: e.owner, theCreator: e.bob, aPusher: carol, aReader: rita, anOutsider: nora}
	f.creator = e.userOf("bob")
	// The Owner shares bob's Runner, so everyone with access starts there.
	e.shared(e.owner, e.runner, true)
	s, start, _ := e.started()
	f.session, f.modToken = s, start.ModToken
	go func() { // Sessions the routes start or wake: nothing waits for them
		for range e.runner.started {
		}
	}()
	e.runner.files.Store("notes.txt", []byte("notes"))
	e.runner.changes.Store(s.ID, protocol.Changes{})
	e.runner.conn.Notify(context.Background(), protocol.TypeSessionPorts, protocol.SessionPorts{SessionID: s.ID, Ports: []protocol.Port{{Port: 8080, Addresses: []string{"0.0.0.0"}}}})

	var a api.Attachment
	code, body := e.do(e.bob.Client, req{method: "POST", path: "/api/sessions/" + s.ID + "/attachments?name=notes.txt", body: "notes", origin: "self", header: http.Header{"Content-Type": {"text/plain"}}})
	if json.Unmarshal([]byte(body), &a); code >= 300 || a.ID == "" {
		t.Fatalf("bob attaches a file: %d %s", code, body)
	}
	f.attachment = a.ID
	set, err := e.store.Attempts.CreateAttemptSet(context.Background(), store.AttemptSet{CreatorID: f.creator.ID, RepoID: e.repo.ID, Title: "t"})
	if err == nil {
		err = e.store.Attempts.AddAttempt(context.Background(), set.ID, 1, s.ID)
	}
	if err != nil {
		t.Fatal(err)
	}
	f.attempts = set.ID
	var tb api.TestBuild
	f.draft()
	code, body = e.do(e.bob.Client, req{method: "POST", path: "/api/repos/" + e.repo.ID + "/environment/tests", origin: "self"})
	if json.Unmarshal([]byte(body), &tb); code >= 300 || tb.ID == "" {
		t.Fatalf("bob tests the Environment: %d %s", code, body)
	}
	f.test = tb.ID
	e.api(e.bob, "PUT", "/api/variables/CREATORS_SHARED", map[string]any{"value": "bobs"}, nil)
	return f
}

func (f *roleFixture) next() int64 { return f.n.Add(1) }

// freshShared is a Shared variable of its own, set by the reader and
// linked into acme/app by the Owner.
func (f *roleFixture) freshShared() string {
	name := fmt.Sprintf("READERS_%d", f.next())
	f.api(f.people[aReader], "PUT", "/api/variables/"+name, map[string]any{"value": "readers"}, nil)
	if code, body := f.do(f.owner.Client, req{method: "PUT", path: "/api/repos/" + f.repo.ID + "/links/" + name, origin: "self"}); code >= 300 {
		f.t.Fatalf("the Owner links %s: %d %s", name, code, body)
	}
	return name
}

// freshVariable is a Variable of acme/app, of its own.
func (f *roleFixture) freshVariable() string {
	name := fmt.Sprintf("VAR_%d", f.next())
	f.api(f.bob, "PUT", "/api/repos/"+f.repo.ID+"/variables/"+name, map[string]any{"value": "v"}, nil)
	return name
}

// freshLink is a Shared variable of the Creator's linked into acme/app.
func (f *roleFixture) freshLink() string {
	name := fmt.Sprintf("LINKED_%d", f.next())
	f.api(f.bob, "PUT", "/api/variables/"+name, map[string]any{"value": "v"}, nil)
	if code, body := f.do(f.bob.Client, req{method: "PUT", path: "/api/repos/" + f.repo.ID + "/links/" + name, origin: "self"}); code >= 300 {
		f.t.Fatalf("bob links %s: %d %s", name, code, body)
	}
	return name
}

// draft has the Creator edit acme/app's Environment draft, for an apply.
func (f *roleFixture) draft() {
	f.api(f.bob, "PUT", "/api/repos/"+f.repo.ID+"/environment/draft", map[string]any{"cpus": 1 + f.next()%4}, nil)
}

// freshSession is a Session of the Creator's on acme/app in state st.
func (f *roleFixture) freshSession(st store.SessionState) store.Session {
	ctx := context.Background()
	repo, _ := f.store.Repos.RepoByID(ctx, f.repo.ID)
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: f.creator.ID, RunnerID: f.runner.ID, Title: "t"})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, to := range map[store.SessionState][]store.SessionState{store.Active: {store.Active}, store.Asleep: {store.Active, store.Asleep}, store.Archived: {store.Active, store.Asleep, store.Archived}}[st] {
		if err := f.store.Sessions.MoveSession(ctx, s.ID, s.State, to, "", false); err != nil {
			f.t.Fatalf("session to %s: %v", to, err)
		}
		s.State = to
	}
	return s
}

// freshMember is the id of a Member of their own.
func (f *roleFixture) freshMember() string {
	login := fmt.Sprintf("member-%d", f.next())
	f.member(f.owner, login)
	return f.userOf(login).ID
}

// freshInvite is the id of an Invite of its own.
func (f *roleFixture) freshInvite() string {
	login := fmt.Sprintf("invited-%d", f.next())
	f.invite(f.owner, login)
	var invs []api.Invite
	f.api(f.owner, "GET", "/api/invites", nil, &invs)
	for _, in := range invs {
		if in.GitHubLogin == login {
			return in.ID
		}
	}
	f.t.Fatalf("no Invite for %s in %+v", login, invs)
	return ""
}

// freshRunner is a Runner bob paired, of its own.
func (f *roleFixture) freshRunner() string {
	return f.pair(f.bob, fmt.Sprintf("spare-%d", f.next())).ID
}

// freshWebhook is a notification webhook of the caller's own, or an id of
// none for a caller who is no person.
func (f *roleFixture) freshWebhook(caller string) string {
	b, ok := f.people[caller]
	if !ok {
		return "none"
	}
	w, err := f.store.Notify.AddNotifyWebhook(context.Background(), store.NotifyWebhook{ID: fmt.Sprintf("hook-%d", f.next()),
		UserID: f.userOf(b.login).ID, URL: "https://203.0.113.7/hook", Format: "json", Secret: []byte("sealed")})
	if err != nil {
		f.t.Fatal(err)
	}
	return w.ID
}

// freshCookie is a sign-in of its own for a person.
func (f *roleFixture) freshCookie(caller string) string {
	b, ok := f.people[caller]
	if !ok {
		return ""
	}
	tok, err := f.store.Signins.CreateSignin(context.Background(), f.userOf(b.login).ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

// cliLoginCode is the code of a kndl login of its own, waiting.
func (f *roleFixture) cliLoginCode() string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("cli-%d", f.next())))
	var started struct {
		UserCode string `json:"user_code"`
	}
	code, body := f.do(nil, req{method: "POST", path: "/api/cli/login", body: `{"token_sha256":"` + hex.EncodeToString(sum[:]) + `","machine":"laptop"}`, from: nextAddr()})
	if json.Unmarshal([]byte(body), &started); code != http.StatusOK || started.UserCode == "" {
		f.t.Fatalf("kndl login starts: %d %s", code, body)
	}
	return started.UserCode
}

// freshOAuth is an Installation on acme/app of an OAuth MCP server, each
// of its own (a Repo has one Installation of a server), made by the
// Creator after the fixture's Session started, as one not connected fails
// a start.
func (f *roleFixture) freshOAuth() string {
	n := f.next()
	as := testkit.NewOAuthServer(f.t, testkit.OAuthOptions{DCR: true})
	f.api(f.bob, "POST", "/api/mcp/servers", api.MCPServer{ID: fmt.Sprintf("hub:oauth%d", n), Name: "OAuth", URL: as.MCP.URL, Auth: "oauth"}, nil)
	id := fmt.Sprintf("oauth%d", n)
	f.api(f.bob, "POST", "/api/mcp/installations", api.InstallationRequest{ID: id, Server: fmt.Sprintf("hub:oauth%d", n), Name: "OAuth", Repos: []string{f.repo.ID}}, nil)
	return id
}

// oauthCallback is the path the authorization server sends the Creator's
// browser back to, from a connect the Creator began.
func (f *roleFixture) oauthCallback() string {
	var begun struct {
		URL string `json:"url"`
	}
	f.api(f.bob, "POST", "/api/mcp/installations/"+f.freshOAuth()+"/connect", nil, &begun)
	resp, err := noRedirect(nil).Get(begun.URL)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(back.String(), f.url) {
		f.t.Fatalf("the authorization server sends the browser to %q", resp.Header.Get("Location"))
	}
	return back.RequestURI()
}

// credential sets who on r: a person's sign-in cookie where the route
// takes one, else a CLI token of their own; a Sandbox's or a Runner's
// bearer token.
func (f *roleFixture) credential(r *req, caller string, creds []auth.Kind) {
	switch caller {
	case aSandbox:
		r.bearer = f.modToken
	case aRunner:
		r.bearer = f.runner.Token
	default:
		if r.cookie != "" {
			return
		}
		if slices.Contains(creds, auth.Cookie) {
			r.cookie = f.cookieOf(f.people[caller])
			return
		}
		tok, err := f.store.Signins.CreateCLIToken(context.Background(), f.userOf(f.people[caller].login).ID, "laptop")
		if err != nil {
			f.t.Fatal(err)
		}
		r.bearer = tok
	}
}

// TestEveryRouteAnswersEachCallerAsTheRoleTableSays: for every route of
// the route table, each kind of caller (the Owner, the Session's Creator,
// another Creator with push, a read-only collaborator, a Member without
// access, a Sandbox's mod token and a Runner token) gets the answer the
// role table says. A route the table lacks fails, and so does a row for a
// route the Hub no longer serves.
func TestEveryRouteAnswersEachCallerAsTheRoleTableSays(t *testing.T) {
	began := time.Now()
	shared := newRoleFixture(t)
	served := map[string]bool{}
	for _, rt := range shared.hub.Routes() {
		served[rt.Pattern] = true
		row, ok := roleTable[rt.Pattern]
		if !ok {
			t.Errorf("%s: the role table has no row for it: say what each caller gets", rt.Pattern)
			continue
		}
		if rt.Creds[0] == auth.Public {
			continue
		}
		t.Run(rt.Pattern, func(t *testing.T) {
			f := shared
			if row.own {
				f = newRoleFixture(t)
			}
			was := f.t
			f.t = t
			defer func() { f.t = was }()
			for _, caller := range roleCallers {
				r := row.req(f, caller)
				f.credential(&r, caller, rt.Creds)
				r.from = nextAddr()
				code, body := f.do(nil, r)
				if want := row.want[caller]; !want.is(code, body) {
					t.Errorf("%s: %d %.160s; want %s", caller, code, body, want)
				}
			}
		})
	}
	for pattern := range roleTable {
		if !served[pattern] {
			t.Errorf("%s: the role table has a row for a route the Hub doesn't serve", pattern)
		}
	}
	t.Logf("the role table took %s", time.Since(began).Round(time.Millisecond))
}
