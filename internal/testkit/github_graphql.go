package testkit

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// The fake GitHub's GraphQL API: the operations gh 2.23 sends for `gh pr
// create` (RepositoryInfo, PullRequestForBranch, PullRequestCreate), by
// operation name, answered from the fake's Repos and pull requests in
// GitHub's shape. It checks what GitHub checks: a live installation token
// that reaches the Repo (metadata read), and pull_requests write to open
// one; an operation it doesn't know is an error in GraphQL's shape.

var graphQLOpName = regexp.MustCompile(`(?m)^\s*(query|mutation)\s+([A-Za-z_][A-Za-z0-9_]*)`)

func (g *GitHub) serveGraphQL(mux *http.ServeMux) {
	mux.HandleFunc("POST /graphql", g.graphQL)
}

// GraphQLOps lists the operation names the fake was asked, in order.
func (g *GitHub) GraphQLOps() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.gqlOps...)
}

func (g *GitHub) graphQL(w http.ResponseWriter, r *http.Request) {
	g.count("graphql")
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if json.NewDecoder(r.Body).Decode(&req) != nil {
		ghError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	m := graphQLOpName.FindStringSubmatch(req.Query)
	if m == nil {
		gqlError(w, "the fake GitHub answers named operations only")
		return
	}
	op := m[2]
	g.mu.Lock()
	g.gqlOps = append(g.gqlOps, op)
	g.mu.Unlock()
	str := func(k string) string { s, _ := req.Variables[k].(string); return s }
	name := str("name") // RepositoryInfo's; the others name it repo
	if name == "" {
		name = str("repo")
	}
	repo := strings.ToLower(str("owner") + "/" + name)
	if op == "PullRequestCreate" {
		in, _ := req.Variables["input"].(map[string]any)
		id, _ := in["repositoryId"].(string)
		repo = strings.ToLower(strings.TrimPrefix(id, "R_"))
	}
	tok := apiToken(r)
	g.mu.Lock()
	_, live := g.liveToken(tok)
	g.mu.Unlock()
	if !live {
		ghError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	if !g.allows(tok, repo, "metadata", "read") {
		gqlError(w, "Could not resolve to a Repository with the name '"+repo+"'.")
		return
	}
	owner, _, _ := strings.Cut(repo, "/")
	_, name, _ = strings.Cut(repo, "/")
	switch op {
	case "RepositoryInfo":
		out, _ := exec.Command("git", "-C", filepath.Join(g.gitRoot, repo+".git"), "symbolic-ref", "--short", "HEAD").Output()
		ghJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{
			"id": "R_" + repo, "name": name, "owner": map[string]any{"login": owner}, "hasIssuesEnabled": true,
			"description": "", "hasWikiEnabled": false, "viewerPermission": "WRITE",
			"defaultBranchRef": map[string]any{"name": strings.TrimSpace(string(out))}, "parent": nil,
			"mergeCommitAllowed": true, "rebaseMergeAllowed": true, "squashMergeAllowed": true}}})
	case "PullRequestForBranch":
		head := str("headRefName")
		g.mu.Lock()
		nodes := []any{}
		for _, p := range g.pulls[repo] {
			if p.Head.Ref == head && strings.EqualFold(p.State, "open") {
				nodes = append(nodes, map[string]any{"number": p.Number, "title": p.Title, "url": p.HTMLURL, "state": "OPEN",
					"headRefName": p.Head.Ref, "baseRefName": p.Base.Ref, "isCrossRepository": false,
					"headRepositoryOwner": map[string]any{"login": owner}})
			}
		}
		g.mu.Unlock()
		ghJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequests": map[string]any{"nodes": nodes}}}})
	case "PullRequestCreate":
		in, _ := req.Variables["input"].(map[string]any)
		s := func(k string) string { v, _ := in[k].(string); return v }
		body, _ := json.Marshal(map[string]string{"title": s("title"), "body": s("body"), "head": s("headRefName"), "base": s("baseRefName")})
		rest := httptest.NewRequest(http.MethodPost, "/repos/"+repo+"/pulls", bytes.NewReader(body))
		rest.Header.Set("Authorization", "Bearer "+tok)
		rest.SetPathValue("owner", owner)
		rest.SetPathValue("repo", name)
		rec := httptest.NewRecorder()
		g.createPull(rec, rest)
		var p fakePull
		if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &p) != nil {
			var e struct{ Message string }
			json.Unmarshal(rec.Body.Bytes(), &e)
			gqlError(w, e.Message)
			return
		}
		ghJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"createPullRequest": map[string]any{"pullRequest": map[string]any{
			"id": "PR_" + repo + "_" + jsonNumber(p.Number), "url": p.HTMLURL}}}})
	default:
		gqlError(w, "the fake GitHub does not answer "+op)
	}
}

func jsonNumber(n int) string { b, _ := json.Marshal(n); return string(b) }

// gqlError answers as GitHub's GraphQL API answers a query it can't
// resolve: 200 with an errors array, which gh prints as "GraphQL: …".
func gqlError(w http.ResponseWriter, msg string) {
	ghJSON(w, http.StatusOK, map[string]any{"data": nil, "errors": []map[string]any{{"type": "NOT_FOUND", "message": msg}}})
}
