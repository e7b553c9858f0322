package testkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The fake GitHub's GraphQL API: the operations gh 2.23 sends for `gh pr
// create` (RepositoryInfo, PullRequestForBranch, PullRequestCreate), `gh
// pr view` (PullRequestForBranch, PullRequestByNumber), `gh pr checks`
// (PullRequestStatusChecks) and `gh issue view` (IssueByNumber), by
// operation name, answered from the fake's Repos, issues, pull requests
// and check runs in GitHub's shape. It checks what GitHub checks: a live
// installation token that reaches the Repo (metadata read), pull_requests
// read to read one and write to open one, issues read for an issue, and
// checks read for a pull request's checks; an operation it doesn't know is
// an error in GraphQL's shape.

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
	prNumber := 0
	switch op {
	case "PullRequestCreate":
		in, _ := req.Variables["input"].(map[string]any)
		id, _ := in["repositoryId"].(string)
		repo = strings.ToLower(strings.TrimPrefix(id, "R_"))
	case "PullRequestStatusChecks":
		repo, prNumber = pullNodeID(str("id"))
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
	// Beyond the Repo, what each operation reads: GitHub answers a field
	// the token may not read with an error of its own.
	if perm := map[string]string{"PullRequestForBranch": "pull_requests", "PullRequestByNumber": "pull_requests",
		"PullRequestStatusChecks": "checks"}[op]; perm != "" && !g.allows(tok, repo, perm, "read") {
		gqlForbidden(w)
		return
	}
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
				nodes = append(nodes, pullNode(repo, p))
			}
		}
		g.mu.Unlock()
		ghJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequests": map[string]any{"nodes": nodes}}}})
	case "PullRequestByNumber":
		n, _ := req.Variables["pr_number"].(float64)
		g.mu.Lock()
		p, ok := g.findPull(repo, int(n))
		g.mu.Unlock()
		if !ok {
			gqlError(w, fmt.Sprintf("Could not resolve to a PullRequest with the number of %d.", int(n)))
			return
		}
		ghJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": pullNode(repo, p)}}})
	case "PullRequestStatusChecks":
		g.mu.Lock()
		p, ok := g.findPull(repo, prNumber)
		var contexts []any
		if ok {
			contexts = g.checkRunNodes(repo, g.headSHA(repo, p))
		}
		g.mu.Unlock()
		if !ok {
			gqlError(w, "Could not resolve to a node with the global id of '"+str("id")+"'")
			return
		}
		ghJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"node": map[string]any{"statusCheckRollup": map[string]any{"nodes": []any{
			map[string]any{"commit": map[string]any{"statusCheckRollup": map[string]any{"contexts": map[string]any{"nodes": contexts,
				"pageInfo": map[string]any{"hasNextPage": false, "endCursor": ""}}}}}}}}}})
	case "IssueByNumber":
		n, _ := req.Variables["number"].(float64)
		g.mu.Lock()
		is := g.issue(repo, int(n))
		var node map[string]any
		if is != nil {
			node = issueNode(repo, g.URL, is)
		}
		p, _ := g.findPull(repo, int(n))
		g.mu.Unlock()
		switch {
		case is == nil:
			gqlError(w, fmt.Sprintf("Could not resolve to an issue or pull request with the number of %d.", int(n)))
		case is.pull && !g.allows(tok, repo, "pull_requests", "read"), !is.pull && !g.allows(tok, repo, "issues", "read"):
			gqlForbidden(w)
		default:
			if is.pull {
				node = pullNode(repo, p)
				node["__typename"] = "PullRequest"
			}
			ghJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"hasIssuesEnabled": true, "issue": node}}})
		}
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

// pullNodeID reads a pull request's node id, PR_<owner/repo>_<n>.
func pullNodeID(id string) (repo string, n int) {
	rest, _ := strings.CutPrefix(id, "PR_")
	i := strings.LastIndex(rest, "_")
	if i < 0 {
		return "", 0
	}
	n, _ = strconv.Atoi(rest[i+1:])
	return strings.ToLower(rest[:i]), n
}

// pullNode is a pull request as GitHub's GraphQL API gives it, with the
// fields gh's pr view prints; its state in GraphQL's capitals.
func pullNode(repo string, p fakePull) map[string]any {
	owner, name, _ := strings.Cut(repo, "/")
	state := strings.ToUpper(p.State)
	if p.MergedAt != nil {
		state = "MERGED"
	}
	return map[string]any{"id": "PR_" + repo + "_" + jsonNumber(p.Number), "number": p.Number, "title": p.Title, "body": p.Body,
		"url": p.HTMLURL, "state": state, "isDraft": p.Draft, "author": map[string]any{"login": p.User.Login},
		"headRefName": p.Head.Ref, "baseRefName": p.Base.Ref, "isCrossRepository": p.Head.repo != "" && !strings.EqualFold(p.Head.repo, repo),
		"headRepositoryOwner": map[string]any{"login": owner}, "headRepository": map[string]any{"name": name},
		"comments": map[string]any{"nodes": []any{}, "totalCount": 0}, "reviews": map[string]any{"nodes": []any{}, "totalCount": 0}}
}

// issueNode is an issue as GitHub's GraphQL API gives it.
func issueNode(repo, web string, is *Issue) map[string]any {
	return map[string]any{"__typename": "Issue", "id": "I_" + repo + "_" + jsonNumber(is.Number), "number": is.Number,
		"url": web + "/" + repo + "/issues/" + jsonNumber(is.Number), "state": "OPEN", "title": is.Title, "body": is.Body,
		"author": map[string]any{"login": is.Author}, "comments": map[string]any{"nodes": []any{}, "totalCount": len(is.Comments)},
		"labels": map[string]any{"nodes": []any{}, "totalCount": 0}, "assignees": map[string]any{"nodes": []any{}, "totalCount": 0}}
}

// checkRunNodes are the latest check run of each name on sha, as a
// statusCheckRollup's contexts, newest first. Call with g.mu held.
func (g *GitHub) checkRunNodes(repo, sha string) []any {
	nodes := []any{}
	seen := map[string]bool{}
	runs := g.checks.runs[repo]
	for i := len(runs) - 1; i >= 0; i-- {
		c := runs[i]
		if c.sha != sha || seen[c.name] {
			continue
		}
		seen[c.name] = true
		var conclusion, completed any
		if c.status == "completed" {
			conclusion, completed = strings.ToUpper(c.conclusion), c.at
		}
		nodes = append(nodes, map[string]any{"__typename": "CheckRun", "name": c.name, "status": strings.ToUpper(c.status),
			"conclusion": conclusion, "startedAt": c.at, "completedAt": completed, "isRequired": false,
			"detailsUrl": fmt.Sprintf("https://ci.example/%s/runs/%d", repo, c.id), "checkSuite": map[string]any{"workflowRun": nil}})
	}
	return nodes
}

// gqlForbidden answers as GitHub's GraphQL API answers a field the token
// may not read.
func gqlForbidden(w http.ResponseWriter) {
	ghJSON(w, http.StatusOK, map[string]any{"data": nil, "errors": []map[string]any{{"type": "FORBIDDEN", "message": "Resource not accessible by integration"}}})
}

// gqlError answers as GitHub's GraphQL API answers a query it can't
// resolve: 200 with an errors array, which gh prints as "GraphQL: …".
func gqlError(w http.ResponseWriter, msg string) {
	ghJSON(w, http.StatusOK, map[string]any{"data": nil, "errors": []map[string]any{{"type": "NOT_FOUND", "message": msg}}})
}
