package security

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/testenv"
)

// sessionRoutes are the requests on one Session, each as a person with
// access could make it.
func sessionRoutes(id string) []req {
	return []req{
		{method: "GET", path: "/api/sessions/" + id},
		{method: "GET", path: "/api/sessions/" + id + "/events"},
		{method: "GET", path: "/api/sessions/" + id + "/watch"},
		{method: "POST", path: "/api/sessions/" + id + "/prompts", body: `{"text":"hello"}`, origin: "self"},
		{method: "PATCH", path: "/api/sessions/" + id + "/prompts/p1", body: `{"text":"hello"}`, origin: "self"},
		{method: "DELETE", path: "/api/sessions/" + id + "/prompts/p1", origin: "self"},
		{method: "POST", path: "/api/sessions/" + id + "/prompts/p1/move", body: `{"position":1}`, origin: "self"},
		{method: "POST", path: "/api/sessions/" + id + "/stop-turn", origin: "self"},
		{method: "POST", path: "/api/sessions/" + id + "/archive", origin: "self"},
		{method: "POST", path: "/api/sessions/" + id + "/restore", origin: "self"},
		{method: "POST", path: "/api/sessions/" + id + "/answer", body: `{"answers":[{"option":1}]}`, origin: "self"},
		{method: "POST", path: "/api/sessions/" + id + "/attachments?name=notes.txt", body: "some notes", origin: "self"},
		{method: "GET", path: "/api/sessions/" + id + "/attachments"},
		{method: "POST", path: "/api/sessions/" + id + "/subagents/a1/stop", origin: "self"},
		{method: "POST", path: "/api/sessions/" + id + "/fork", body: `{}`, origin: "self"},
		{method: "GET", path: "/api/sessions/" + id + "/forks"},
	}
}

// answersAsMissing checks that every request on Session id answers b as a
// Session that doesn't exist does.
func (e *env) answersAsMissing(t *testing.T, b *browser, id string) {
	t.Helper()
	missing := uuid.NewString()
	want := sessionRoutes(missing)
	for i, r := range sessionRoutes(id) {
		code, body := e.do(b.Client, r)
		wcode, wbody := e.do(b.Client, want[i])
		if code != http.StatusNotFound || code != wcode || strings.ReplaceAll(body, id, missing) != wbody {
			t.Errorf("%s %s: %d %s; a missing Session: %d %s", r.method, r.path, code, body, wcode, wbody)
		}
	}
}

func listed(t *testing.T, e *env, b *browser, id string) bool {
	t.Helper()
	code, body := e.do(b.Client, req{method: "GET", path: "/api/sessions"})
	var ss []api.Session
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ss) != nil {
		t.Fatalf("list: %d %s", code, body)
	}
	for _, s := range ss {
		if s.ID == id {
			return true
		}
	}
	return false
}

// TestASessionSomeoneCantAccessAnswersAsIfItDidntExist: without access to a
// Session's Repo (the App not installed on it, or not a collaborator), every
// request on the Session answers exactly as for one that doesn't exist, and
// no list shows it. Starting a Session on such a Repo is refused alike
// whether the Repo exists or not.
func TestASessionSomeoneCantAccessAnswersAsIfItDidntExist(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	bob := e.member(owner, "bob")
	olivia := e.userOf("olivia")
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "olivia", true)
	e.gh.SetCollaborator("acme/other", "bob", true) // App not installed there
	s := e.session(olivia, "acme/app")
	other := e.session(olivia, "acme/other")

	if code, _ := e.do(owner.Client, req{method: "GET", path: "/api/sessions/" + s.ID}); code != http.StatusOK {
		t.Fatalf("a collaborator on an installed Repo: %d, want 200", code)
	}
	e.answersAsMissing(t, bob, s.ID)     // not a collaborator
	e.answersAsMissing(t, bob, other.ID) // a collaborator, but no App
	e.answersAsMissing(t, owner, other.ID)
	if listed(t, e, bob, s.ID) || listed(t, e, bob, other.ID) {
		t.Fatal("a list shows bob a Session he has no access to")
	}

	start := func(repo string) (int, string) {
		return e.do(bob.Client, req{method: "POST", path: "/api/sessions", origin: "self",
			body: `{"repo":"` + repo + `","prompt":"hello"}`})
	}
	realCode, real := start(e.gh.RepoURL("acme/app"))
	noneCode, none := start(e.gh.RepoURL("acme/nothing-here"))
	if realCode != http.StatusNotFound || noneCode != realCode || strings.ReplaceAll(real, "acme/app", "acme/nothing-here") != none {
		t.Fatalf("starting a Session without access: %d %s; on a Repo that doesn't exist: %d %s", realCode, real, noneCode, none)
	}
}

// TestWithoutTheGitHubAppNobodySignedInWithGitHubHasRepoAccess: with no
// GITHUB_APP_ID, a GitHub sign-in has access to no Repo.
func TestWithoutTheGitHubAppNobodySignedInWithGitHubHasRepoAccess(t *testing.T) {
	e := newEnv(t, func(c *hub.Config) { c.GitHubAppID, c.GitHubAppKey = 0, "" })
	owner := e.owner()
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "olivia", true)
	s := e.session(e.userOf("olivia"), "acme/app")
	e.answersAsMissing(t, owner, s.ID)
}

// TestOnlyTheCreatorDrivesASession: someone else with access watches a
// Session but can't prompt it, change or reorder its queued prompts, stop its Turn or
// a subagent, answer Claude's question, archive or restore it.
func TestOnlyTheCreatorDrivesASession(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	bob := e.member(owner, "bob")
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "olivia", true)
	e.gh.SetCollaborator("acme/app", "bob", true)
	s := e.session(e.userOf("olivia"), "acme/app")
	for _, r := range sessionRoutes(s.ID) {
		code, body := e.do(bob.Client, r)
		drives := r.method != "GET"
		switch {
		case drives && code != http.StatusForbidden:
			t.Errorf("bob %s %s: %d %s, want 403: only the Creator drives", r.method, r.path, code, body)
		case !drives && strings.HasSuffix(r.path, "/watch"):
		case !drives && code != http.StatusOK:
			t.Errorf("bob %s %s: %d %s, want 200: anyone with access watches", r.method, r.path, code, body)
		}
	}
	closed := e.watch(s.ID, http.Header{"Cookie": {"kndl=" + e.cookieOf(bob)}, "Origin": {e.url}})
	select {
	case <-closed:
		t.Fatal("bob's watch was closed")
	default:
	}
	if code, body := e.do(owner.Client, req{method: "POST", path: "/api/sessions/" + s.ID + "/prompts", body: `{"text":"hello"}`, origin: "self"}); code != http.StatusCreated {
		t.Fatalf("the Creator prompting: %d %s", code, body)
	}
	// Only the Creator attaches; anyone with access downloads, as a file.
	if as, _ := e.store.Prompts.Attachments(context.Background(), s.ID); len(as) != 0 {
		t.Fatalf("bob's attachment was kept: %+v", as)
	}
	code, body := e.do(owner.Client, req{method: "POST", path: "/api/sessions/" + s.ID + "/attachments?name=notes.txt", body: "some notes", origin: "self"})
	var a api.Attachment
	if json.Unmarshal([]byte(body), &a); code != http.StatusCreated {
		t.Fatalf("the Creator attaching: %d %s", code, body)
	}
	resp := e.send(bob.Client, req{method: "GET", path: "/api/sessions/" + s.ID + "/attachments/" + a.ID})
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("bob downloading: %d %v, want the file as an attachment", resp.StatusCode, resp.Header)
	}
}

// TestLosingRepoAccessOnGitHubTakesYouOutWithinTwiceTheTTL: once GitHub
// says someone is no longer a collaborator, within twice
// HUB_REPO_ACCESS_TTL_MS their open watch of the Repo's Session closes and
// the Session answers them as if it didn't exist.
func TestLosingRepoAccessOnGitHubTakesYouOutWithinTwiceTheTTL(t *testing.T) {
	const ttl = 500 * time.Millisecond
	e := newEnv(t, func(c *hub.Config) { c.RepoAccessTTL = ttl })
	owner := e.owner()
	bob := e.member(owner, "bob")
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "bob", true)
	s := e.session(e.userOf("olivia"), "acme/app")
	if code, _ := e.do(bob.Client, req{method: "GET", path: "/api/sessions/" + s.ID}); code != http.StatusOK {
		t.Fatalf("bob with access: %d", code)
	}
	closed := e.watch(s.ID, http.Header{"Cookie": {"kndl=" + e.cookieOf(bob)}, "Origin": {e.url}})

	e.gh.SetCollaborator("acme/app", "bob", false)
	lost := time.Now()
	closesWithin(t, closed, 2*ttl, "bob's watch after he lost access")
	testenv.Eventually(t, 2*ttl, "the Session disappears for bob", func() bool {
		code, _ := e.do(bob.Client, req{method: "GET", path: "/api/sessions/" + s.ID})
		return code == http.StatusNotFound
	})
	t.Logf("out after %v (TTL %v)", time.Since(lost), ttl)
	e.answersAsMissing(t, bob, s.ID)
	if listed(t, e, bob, s.ID) {
		t.Fatal("the list still shows bob the Session")
	}
}

// TestWhenGitHubCantAnswerAccessHadIsKeptUntilItExpiresAndNoneIsGained:
// during a GitHub outage, someone with access keeps it while GitHub's last
// answer lasts, and no longer: a failed check never renews it, so within
// twice HUB_REPO_ACCESS_TTL_MS their watch closes and the Session answers
// them as if it didn't exist, as it would had GitHub said they were
// removed. Someone who had no access gains none, and both get theirs back
// once GitHub answers.
func TestWhenGitHubCantAnswerAccessHadIsKeptUntilItExpiresAndNoneIsGained(t *testing.T) {
	const ttl = 600 * time.Millisecond
	e := newEnv(t, func(c *hub.Config) { c.RepoAccessTTL = ttl })
	owner := e.owner()
	bob := e.member(owner, "bob")
	carol := e.member(owner, "carol")
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "bob", true)
	e.gh.SetCollaborator("acme/app", "carol", true)
	s := e.session(e.userOf("olivia"), "acme/app")
	get := func(b *browser) int {
		code, _ := e.do(b.Client, req{method: "GET", path: "/api/sessions/" + s.ID})
		return code
	}
	if code := get(bob); code != http.StatusOK {
		t.Fatalf("bob before the outage: %d", code)
	}
	closed := e.watch(s.ID, http.Header{"Cookie": {"kndl=" + e.cookieOf(bob)}, "Origin": {e.url}})

	e.gh.SetDown(true)
	outage := time.Now()
	if code := get(bob); code != http.StatusOK {
		t.Fatalf("bob as the outage starts: %d, want 200 (his answer has not expired)", code)
	}
	e.answersAsMissing(t, carol, s.ID)
	// His last answer came before the outage; the re-check that finds it
	// expired runs at most a TTL after it did. slack is for the machine's
	// scheduling of that re-check, not for the Hub.
	const slack = 200 * time.Millisecond
	closesWithin(t, closed, 2*ttl+slack, "bob's watch during the outage")
	if code := get(bob); code != http.StatusNotFound {
		t.Fatalf("bob once his answer expired, GitHub still down: %d, want 404", code)
	}
	t.Logf("out after %v of the outage (TTL %v)", time.Since(outage), ttl)

	e.gh.SetDown(false)
	for _, b := range []*browser{bob, carol} {
		testenv.Eventually(t, testenv.WaitShort, b.login+" gets access once GitHub answers", func() bool { return get(b) == http.StatusOK })
	}
}

// TestRepoAccessAnswersAreCached: GitHub is asked once per person and Repo
// within HUB_REPO_ACCESS_TTL_MS, and a refusal is asked again sooner (after
// a tenth of it, at most 30 s: see internal/hub TestRefusalsAreTrustedAtMost30Seconds).
func TestRepoAccessAnswersAreCached(t *testing.T) {
	const ttl = 2 * time.Second
	e := newEnv(t, func(c *hub.Config) { c.RepoAccessTTL = ttl })
	owner := e.owner()
	bob := e.member(owner, "bob")
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "olivia", true)
	s := e.session(e.userOf("olivia"), "acme/app")
	get := func(b *browser) int {
		code, _ := e.do(b.Client, req{method: "GET", path: "/api/sessions/" + s.ID})
		return code
	}
	for range 5 {
		if get(owner) != http.StatusOK {
			t.Fatal("olivia has no access")
		}
	}
	if n := e.gh.Calls("collaborator"); n != 1 {
		t.Fatalf("GitHub was asked %d times for one person and Repo within the TTL, want 1", n)
	}
	if get(bob) != http.StatusNotFound {
		t.Fatal("bob has access")
	}
	e.gh.SetCollaborator("acme/app", "bob", true)
	added := time.Now()
	testenv.Eventually(t, testenv.WaitShort, "bob gets access", func() bool { return get(bob) == http.StatusOK })
	if since := time.Since(added); since >= ttl {
		t.Fatalf("a refusal was trusted for %v, as long as a yes (%v)", since, ttl)
	}
}
