package testkit

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fake GitHub's check runs and reviews on pull requests, delivered to
// the App's webhook as GitHub delivers them: check_run (completed) and
// pull_request_review (submitted), signed like every delivery.

// CheckRun delivers the check_run event of a check named name completing
// with conclusion (failure, timed_out, success, ...) and summary on pull
// request pull of ownerRepo, returning the delivery and the Hub's status.
// Its log is at the check's details URL, the CI's own page.
func (g *GitHub) CheckRun(t testing.TB, ownerRepo string, pull int, name, conclusion, summary string) (Delivery, int) {
	t.Helper()
	g.mu.Lock()
	repo := strings.ToLower(ownerRepo)
	p := g.pull(t, repo, pull)
	g.iss.nextComment++ // ids from one counter: unique is all a check run's id needs
	id := g.iss.nextComment
	now := time.Now().UTC().Format(time.RFC3339)
	sha := fmt.Sprintf("%040x", id)
	payload := map[string]any{"action": "completed",
		"check_run": map[string]any{"id": id, "name": name, "head_sha": sha, "status": "completed", "conclusion": conclusion,
			"started_at": now, "completed_at": now,
			"url":         fmt.Sprintf("%s/repos/%s/check-runs/%d", g.URL, ownerRepo, id),
			"html_url":    fmt.Sprintf("%s/%s/runs/%d", g.URL, ownerRepo, id),
			"details_url": fmt.Sprintf("https://ci.example/%s/runs/%d", ownerRepo, id),
			"output":      map[string]any{"title": name + ": " + conclusion, "summary": summary, "text": nil, "annotations_count": 0},
			"check_suite": map[string]any{"id": id, "head_branch": p.Head.Ref, "head_sha": sha, "status": "completed", "conclusion": conclusion},
			"pull_requests": []any{map[string]any{"url": fmt.Sprintf("%s/repos/%s/pulls/%d", g.URL, ownerRepo, pull), "id": pull, "number": pull,
				"head": map[string]any{"ref": p.Head.Ref, "sha": sha, "repo": g.shortRepoPayload(headRepo(p, ownerRepo))},
				"base": map[string]any{"ref": p.Base.Ref, "sha": sha, "repo": g.shortRepoPayload(ownerRepo)}}}},
		"repository": g.repoPayload(ownerRepo), "sender": g.userPayload("ci-bot", true)}
	d := g.newDelivery("check_run", payload)
	g.mu.Unlock()
	return d, g.Deliver(t, d)
}

// Review delivers the pull_request_review event of login submitting a
// review in state (changes_requested, approved, commented) with body on
// pull request pull of ownerRepo.
func (g *GitHub) Review(t testing.TB, ownerRepo string, pull int, login, state, body string) (Delivery, int) {
	t.Helper()
	g.mu.Lock()
	repo := strings.ToLower(ownerRepo)
	p := g.pull(t, repo, pull)
	g.iss.nextComment++
	id := g.iss.nextComment
	repoFull, headFull := g.repoPayload(ownerRepo), g.repoPayload(headRepo(p, ownerRepo))
	payload := map[string]any{"action": "submitted",
		"review": map[string]any{"id": id, "user": g.userPayload(login, false), "body": body, "state": state,
			"submitted_at": time.Now().UTC().Format(time.RFC3339), "author_association": "COLLABORATOR",
			"html_url":         fmt.Sprintf("%s#pullrequestreview-%d", p.HTMLURL, id),
			"pull_request_url": fmt.Sprintf("%s/repos/%s/pulls/%d", g.URL, ownerRepo, pull)},
		"pull_request": map[string]any{"number": pull, "title": p.Title, "state": p.State, "html_url": p.HTMLURL,
			"head": map[string]any{"ref": p.Head.Ref, "label": p.Head.Label, "repo": headFull},
			"base": map[string]any{"ref": p.Base.Ref, "label": p.Base.Label, "repo": repoFull}},
		"repository": repoFull, "sender": g.userPayload(login, false)}
	d := g.newDelivery("pull_request_review", payload)
	g.mu.Unlock()
	return d, g.Deliver(t, d)
}

// AddPull opens a pull request of ownerRepo from head into main as login
// would on GitHub's site, without checking its branches, and returns its
// number. A head "fork-owner:branch" is a branch of that owner's fork.
func (g *GitHub) AddPull(ownerRepo, login, head, title string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	owner, name, _ := strings.Cut(ownerRepo, "/")
	repo := strings.ToLower(ownerRepo)
	n := g.newNumber(repo, &Issue{Title: title, Author: login, pull: true})
	headOwner, branch, fork := strings.Cut(head, ":")
	if !fork {
		headOwner, branch = owner, head
	}
	g.pulls[repo] = append(g.pulls[repo], fakePull{Number: n, Title: title, State: "open", HTMLURL: fmt.Sprintf("%s/%s/pull/%d", g.URL, repo, n),
		Head: pullRef{Ref: branch, Label: headOwner + ":" + branch, repo: headOwner + "/" + name}, Base: pullRef{Ref: "main", Label: owner + ":main"}})
	return n
}

// headRepo is the repository a pull request's head branch is in: a fork's,
// or ownerRepo.
func headRepo(p fakePull, ownerRepo string) string {
	if p.Head.repo != "" {
		return p.Head.repo
	}
	return ownerRepo
}

// pull is pull request n of repo. Call with g.mu held.
func (g *GitHub) pull(t testing.TB, repo string, n int) fakePull {
	p, ok := g.findPull(repo, n)
	if !ok {
		g.mu.Unlock()
		t.Fatalf("no pull request %d on %s", n, repo)
	}
	return p
}

// findPull is pull request n of repo, if there is one. Call with g.mu
// held.
func (g *GitHub) findPull(repo string, n int) (fakePull, bool) {
	i := slices.IndexFunc(g.pulls[repo], func(p fakePull) bool { return p.Number == n })
	if i < 0 {
		return fakePull{}, false
	}
	return g.pulls[repo][i], true
}

// showPull answers GET /repos/{owner}/{repo}/pulls/{n} for a token with
// pull requests read: its number, title, state, and its head's branch and
// repository (a fork's, for a head from one).
func (g *GitHub) showPull(w http.ResponseWriter, r *http.Request) {
	g.count("pull")
	ownerRepo := r.PathValue("owner") + "/" + r.PathValue("repo")
	repo := strings.ToLower(ownerRepo)
	n, _ := strconv.Atoi(r.PathValue("n"))
	if !g.allows(apiToken(r), repo, "pull_requests", "read") {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.findPull(repo, n)
	if !ok {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	ghJSON(w, http.StatusOK, map[string]any{"number": p.Number, "title": p.Title, "state": p.State, "html_url": p.HTMLURL,
		"head": map[string]any{"ref": p.Head.Ref, "label": p.Head.Label, "repo": g.repoPayload(headRepo(p, ownerRepo))},
		"base": map[string]any{"ref": p.Base.Ref, "label": p.Base.Label, "repo": g.repoPayload(ownerRepo)}})
}

// repoID is a repository's id on the fake GitHub, fixed by its name.
func repoID(ownerRepo string) int64 {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(ownerRepo)))
	return int64(h.Sum32())
}

// shortRepoPayload is the repository as a check run's pull requests name
// it: its id, API URL and name.
func (g *GitHub) shortRepoPayload(ownerRepo string) map[string]any {
	_, name, _ := strings.Cut(ownerRepo, "/")
	return map[string]any{"id": repoID(ownerRepo), "url": g.URL + "/repos/" + ownerRepo, "name": name}
}
