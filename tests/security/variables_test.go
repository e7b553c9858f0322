package security

import (
	"encoding/json"
	"net/http"
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
