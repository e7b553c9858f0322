package testkit

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
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
