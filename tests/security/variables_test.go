package security

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestASharedVariableIsLinkedOnlyByItsSetterOrTheOwner: a Member can't
// link another Member's Sensitive Shared variable into a Repo they
// control (and print it from a Session there), nor replace or remove it;
// its setter and the Owner can.
func TestASharedVariableIsLinkedOnlyByItsSetterOrTheOwner(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	alice := e.member(owner, "alice")
	mallory := e.member(owner, "mallory")
	e.gh.InstallApp("acme/app")
	e.gh.InstallApp("mallory/own")
	e.gh.SetCollaborator("acme/app", "alice", true)
	e.gh.SetCollaborator("mallory/own", "mallory", true)
	e.gh.SetCollaborator("mallory/own", "olivia", true) // the Owner
	repoOf := func(b *browser, name string) string {
		code, body := e.do(b.Client, req{method: "POST", path: "/api/repos", body: `{"url":"` + e.gh.RepoURL(name) + `"}`, origin: "self"})
		if code != http.StatusOK {
			t.Fatalf("add repo %s: %d %s", name, code, body)
		}
		var repo struct{ ID string }
		json.Unmarshal([]byte(body), &repo)
		return repo.ID
	}
	aliceRepo, malloryRepo := repoOf(alice, "acme/app"), repoOf(mallory, "mallory/own")
	if code, body := e.do(alice.Client, req{method: "PUT", path: "/api/variables/DEPLOY_KEY", body: `{"value":"alice-secret-1","sensitive":true}`, origin: "self"}); code != http.StatusOK {
		t.Fatalf("alice sets it: %d %s", code, body)
	}
	for _, r := range []req{
		{method: "PUT", path: "/api/repos/" + malloryRepo + "/links/DEPLOY_KEY", origin: "self"},
		{method: "PUT", path: "/api/variables/DEPLOY_KEY", body: `{"value":"mallorys-value","sensitive":true}`, origin: "self"},
		{method: "DELETE", path: "/api/variables/DEPLOY_KEY", origin: "self"},
	} {
		if code, body := e.do(mallory.Client, r); code != http.StatusForbidden {
			t.Errorf("mallory %s %s: %d %s, want 403", r.method, r.path, code, body)
		}
	}
	if code, body := e.do(alice.Client, req{method: "PUT", path: "/api/repos/" + aliceRepo + "/links/DEPLOY_KEY", origin: "self"}); code != http.StatusNoContent {
		t.Fatalf("alice links her own: %d %s", code, body)
	}
	if code, body := e.do(owner.Client, req{method: "PUT", path: "/api/repos/" + malloryRepo + "/links/DEPLOY_KEY", origin: "self"}); code != http.StatusNoContent {
		t.Fatalf("the Owner links it: %d %s", code, body)
	}
}

// TestALinkedSharedVariableIsChangedOnlyWithPushInEveryRepoThatLinksIt: a
// Shared variable's value reaches every Repo that links it, so its setter
// changes or removes it only with write (push) permission on each of them;
// the refusal names the Repos they see and no other. The Owner may.
func TestALinkedSharedVariableIsChangedOnlyWithPushInEveryRepoThatLinksIt(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	alice := e.member(owner, "alice")
	for _, name := range []string{"acme/web", "acme/app", "acme/hidden"} {
		e.gh.InstallApp(name)
		e.gh.SetCollaborator(name, "olivia", true) // the Owner pushes to each
	}
	e.gh.SetCollaborator("acme/web", "alice", true)
	e.gh.SetCollaborator("acme/app", "alice", true)
	e.gh.SetReadOnly("acme/app", "alice", true)
	link := func(b *browser, name string) {
		t.Helper()
		code, body := e.do(b.Client, req{method: "POST", path: "/api/repos", body: `{"url":"` + e.gh.RepoURL(name) + `"}`, origin: "self"})
		var repo struct{ ID string }
		json.Unmarshal([]byte(body), &repo)
		if code == http.StatusOK {
			code, body = e.do(b.Client, req{method: "PUT", path: "/api/repos/" + repo.ID + "/links/DEPLOY_HOST", origin: "self"})
		}
		if code != http.StatusNoContent {
			t.Fatalf("link it into %s: %d %s", name, code, body)
		}
	}
	set := func(b *browser, value string) (int, string) {
		return e.do(b.Client, req{method: "PUT", path: "/api/variables/DEPLOY_HOST", body: `{"value":"` + value + `"}`, origin: "self"})
	}
	if code, body := set(alice, "a.example"); code != http.StatusOK {
		t.Fatalf("alice makes it: %d %s", code, body)
	}
	link(alice, "acme/web")
	if code, body := set(alice, "b.example"); code != http.StatusOK {
		t.Fatalf("alice, who pushes to the one Repo that links it, changes it: %d %s", code, body)
	}

	link(owner, "acme/app")    // alice reads it only
	link(owner, "acme/hidden") // alice has no access
	for _, r := range []req{
		{method: "PUT", path: "/api/variables/DEPLOY_HOST", body: `{"value":"evil.example"}`, origin: "self"},
		{method: "DELETE", path: "/api/variables/DEPLOY_HOST", origin: "self"},
	} {
		code, body := e.do(alice.Client, r)
		if code != http.StatusForbidden || !strings.Contains(body, e.gh.RepoURL("acme/app")) || !strings.Contains(body, "a Repo you can't push to") ||
			strings.Contains(body, "hidden") || strings.Contains(body, e.gh.RepoURL("acme/web")) {
			t.Errorf("alice %s it: %d %s, want 403 naming acme/app and a Repo she can't push to, not acme/hidden", r.method, code, body)
		}
	}
	if _, body := e.do(owner.Client, req{method: "GET", path: "/api/variables"}); !strings.Contains(body, `"b.example"`) {
		t.Fatalf("a refused change changed it: %s", body)
	}

	if code, body := set(owner, "c.example"); code != http.StatusOK {
		t.Errorf("the Owner changes it: %d %s", code, body)
	}
	if code, body := e.do(owner.Client, req{method: "DELETE", path: "/api/variables/DEPLOY_HOST", origin: "self"}); code != http.StatusNoContent {
		t.Errorf("the Owner removes it: %d %s", code, body)
	}
}
