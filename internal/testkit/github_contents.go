package testkit

import (
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// serveContents answers what the Hub reads of a Repo's files, from the
// bare repository ServeRepo serves: a branch's head and a file's raw
// contents at a commit.
func (g *GitHub) serveContents(mux *http.ServeMux) {
	mux.HandleFunc("GET /repos/{owner}/{repo}/branches/{branch}", g.branch)
	mux.HandleFunc("GET /repos/{owner}/{repo}/contents/{path...}", g.contents)
}

// gitOut runs git in owner/repo's bare repository, for a token that may read
// its contents; ok is false for anything GitHub would answer 404 to.
func (g *GitHub) gitOut(r *http.Request, args ...string) (string, bool) {
	repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	if !g.allows(apiToken(r), repo, "contents", "read") {
		return "", false
	}
	out, err := exec.Command("git", append([]string{"-C", filepath.Join(g.gitRoot, repo+".git")}, args...)...).Output()
	return string(out), err == nil
}

// branch answers GET /repos/{owner}/{repo}/branches/{branch}: its head.
func (g *GitHub) branch(w http.ResponseWriter, r *http.Request) {
	g.count("branch")
	sha, ok := g.gitOut(r, "rev-parse", "--verify", "refs/heads/"+r.PathValue("branch")+"^{commit}")
	if !ok {
		ghError(w, http.StatusNotFound, "Branch not found")
		return
	}
	ghJSON(w, http.StatusOK, map[string]any{"name": r.PathValue("branch"), "commit": map[string]string{"sha": strings.TrimSpace(sha)}})
}

// contents answers GET /repos/{owner}/{repo}/contents/{path}?ref= with
// the raw media type alone (Accept: application/vnd.github.raw), the one
// the Hub asks for.
func (g *GitHub) contents(w http.ResponseWriter, r *http.Request) {
	g.count("contents")
	if r.Header.Get("Accept") != "application/vnd.github.raw" {
		ghError(w, http.StatusUnsupportedMediaType, "the fake serves the raw media type alone")
		return
	}
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		ref = "HEAD"
	}
	body, ok := "", false
	if !strings.HasPrefix(ref, "-") {
		body, ok = g.gitOut(r, "cat-file", "blob", ref+":"+r.PathValue("path"))
	}
	if !ok {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	w.Header().Set("Content-Type", "application/vnd.github.raw")
	w.Write([]byte(body))
}

// PushFiles commits files (path to contents) to owner/repo's default
// branch, served by ServeRepo, as login would push them, and delivers the
// push event GitHub sends for it: the delivery and the Hub's status.
func (g *GitHub) PushFiles(t testing.TB, ownerRepo, login string, files map[string]string) (Delivery, int) {
	t.Helper()
	bare, work := g.BarePath(strings.ToLower(ownerRepo)), t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-c", "user.name=" + login, "-c", "user.email=" + login + "@example.com"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	branch := git("-C", bare, "symbolic-ref", "--short", "HEAD")
	before := git("-C", bare, "rev-parse", branch)
	git("clone", "-q", "-b", branch, bare, work)
	var added, modified []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(work, name)
		if _, err := os.Stat(p); err == nil {
			modified = append(modified, name)
		} else {
			added = append(added, name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("-C", work, "add", "-A")
	git("-C", work, "commit", "-q", "-m", "change "+strings.Join(slices.Sorted(maps.Keys(files)), ", "))
	git("-C", work, "push", "-q", "origin", branch)
	after := git("-C", work, "rev-parse", "HEAD")
	g.mu.Lock()
	repo := g.repoPayload(ownerRepo)
	repo["default_branch"] = branch
	payload := map[string]any{"ref": "refs/heads/" + branch, "before": before, "after": after, "repository": repo,
		"commits": []map[string]any{{"id": after, "added": added, "modified": modified, "removed": []string{}}},
		"pusher":  map[string]any{"name": login}, "sender": g.userPayload(login, false)}
	d := g.newDelivery("push", payload)
	g.mu.Unlock()
	return d, g.Deliver(t, d)
}
