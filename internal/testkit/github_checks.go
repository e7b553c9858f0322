package testkit

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fake GitHub's check runs and reviews on pull requests, delivered to
// the App's webhook as GitHub delivers them: check_run (completed),
// check_suite and pull_request_review (submitted), signed like every
// delivery.

// fakeChecks are the check runs and reviews the fake keeps, for the REST
// API to list as GitHub does.
type fakeChecks struct {
	runs    map[string][]fakeCheckRun // by lower-case owner/repo, oldest first
	reviews map[string][]fakeReview   // by lower-case owner/repo and "#N"
}

type fakeCheckRun struct {
	id                     int64
	name, sha              string
	status, conclusion, at string
}

type fakeReview struct {
	id                 int64
	login, state, body string
	at, sha            string
}

func (g *GitHub) serveChecks(mux *http.ServeMux) {
	g.checks = fakeChecks{runs: map[string][]fakeCheckRun{}, reviews: map[string][]fakeReview{}}
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", g.listCheckRuns)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{n}/reviews", g.listReviews)
}

// CheckRun delivers the check_run event of a check named name completing
// with conclusion (failure, timed_out, success, ...) and summary on pull
// request pull of ownerRepo, returning the delivery and the Hub's status.
// Its log is at the check's details URL, the CI's own page. The REST API
// lists it on the pull request's head commit from then on.
func (g *GitHub) CheckRun(t testing.TB, ownerRepo string, pull int, name, conclusion, summary string) (Delivery, int) {
	t.Helper()
	p, sha := g.pullHead(t, ownerRepo, pull)
	g.mu.Lock()
	run := g.addCheckRun(ownerRepo, sha, name, "completed", conclusion)
	id, now := run.id, run.at
	payload := map[string]any{"action": "completed",
		"check_run": map[string]any{"id": id, "name": name, "head_sha": sha, "status": "completed", "conclusion": conclusion,
			"started_at": now, "completed_at": now,
			"url":           fmt.Sprintf("%s/repos/%s/check-runs/%d", g.URL, ownerRepo, id),
			"html_url":      fmt.Sprintf("%s/%s/runs/%d", g.URL, ownerRepo, id),
			"details_url":   fmt.Sprintf("https://ci.example/%s/runs/%d", ownerRepo, id),
			"output":        map[string]any{"title": name + ": " + conclusion, "summary": summary, "text": nil, "annotations_count": 0},
			"check_suite":   map[string]any{"id": id, "head_branch": p.Head.Ref, "head_sha": sha, "status": "completed", "conclusion": conclusion},
			"pull_requests": g.checkPulls(ownerRepo, pull, p, sha)},
		"repository": g.repoPayload(ownerRepo), "sender": g.userPayload("ci-bot", true)}
	d := g.newDelivery("check_run", payload)
	g.mu.Unlock()
	return d, g.Deliver(t, d)
}

// CheckSuite delivers the check_suite event action (requested,
// rerequested, completed) of the suite on pull request pull's head
// commit, with its status (queued, in_progress, completed) and
// conclusion, returning the delivery and the Hub's status. It adds no
// check run.
func (g *GitHub) CheckSuite(t testing.TB, ownerRepo string, pull int, action, status, conclusion string) (Delivery, int) {
	t.Helper()
	p, sha := g.pullHead(t, ownerRepo, pull)
	g.mu.Lock()
	g.iss.nextComment++
	id := g.iss.nextComment
	payload := map[string]any{"action": action,
		"check_suite": map[string]any{"id": id, "head_branch": p.Head.Ref, "head_sha": sha, "status": status, "conclusion": conclusion,
			"url":            fmt.Sprintf("%s/repos/%s/check-suites/%d", g.URL, ownerRepo, id),
			"check_runs_url": fmt.Sprintf("%s/repos/%s/check-suites/%d/check-runs", g.URL, ownerRepo, id),
			"pull_requests":  g.checkPulls(ownerRepo, pull, p, sha)},
		"repository": g.repoPayload(ownerRepo), "sender": g.userPayload("ci-bot", true)}
	d := g.newDelivery("check_suite", payload)
	g.mu.Unlock()
	return d, g.Deliver(t, d)
}

// checkPulls is a check run's or suite's pull_requests: the pull request
// p, number pull, at commit sha, its repositories short.
func (g *GitHub) checkPulls(ownerRepo string, pull int, p fakePull, sha string) []any {
	return []any{map[string]any{"url": fmt.Sprintf("%s/repos/%s/pulls/%d", g.URL, ownerRepo, pull), "id": pull, "number": pull,
		"head": map[string]any{"ref": p.Head.Ref, "sha": sha, "repo": g.shortRepoPayload(headRepo(p, ownerRepo))},
		"base": map[string]any{"ref": p.Base.Ref, "sha": sha, "repo": g.shortRepoPayload(ownerRepo)}}}
}

// AddCheckRun records a check run named name on pull request pull's head
// commit, with status (queued, in_progress, completed) and, once
// completed, conclusion, as a CI would through the Checks API, without a
// webhook delivery.
func (g *GitHub) AddCheckRun(t testing.TB, ownerRepo string, pull int, name, status, conclusion string) {
	t.Helper()
	_, sha := g.pullHead(t, ownerRepo, pull)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.addCheckRun(ownerRepo, sha, name, status, conclusion)
}

// addCheckRun keeps a check run. Call with g.mu held.
func (g *GitHub) addCheckRun(ownerRepo, sha, name, status, conclusion string) fakeCheckRun {
	g.iss.nextComment++ // ids from one counter: unique is all a check run's id needs
	run := fakeCheckRun{id: g.iss.nextComment, name: name, sha: sha, status: status, conclusion: conclusion, at: time.Now().UTC().Format(time.RFC3339)}
	repo := strings.ToLower(ownerRepo)
	g.checks.runs[repo] = append(g.checks.runs[repo], run)
	return run
}

// Review delivers the pull_request_review event of login submitting a
// review in state (changes_requested, approved, commented) with body on
// pull request pull of ownerRepo. The REST API lists it from then on.
func (g *GitHub) Review(t testing.TB, ownerRepo string, pull int, login, state, body string) (Delivery, int) {
	t.Helper()
	p, sha := g.pullHead(t, ownerRepo, pull)
	g.mu.Lock()
	rv := g.addReview(ownerRepo, pull, sha, login, state, body)
	repoFull, headFull := g.repoPayload(ownerRepo), g.repoPayload(headRepo(p, ownerRepo))
	payload := map[string]any{"action": "submitted",
		"review": map[string]any{"id": rv.id, "user": g.userPayload(login, false), "body": body, "state": state,
			"submitted_at": rv.at, "author_association": "COLLABORATOR",
			"html_url":         fmt.Sprintf("%s#pullrequestreview-%d", p.HTMLURL, rv.id),
			"pull_request_url": fmt.Sprintf("%s/repos/%s/pulls/%d", g.URL, ownerRepo, pull)},
		"pull_request": map[string]any{"number": pull, "title": p.Title, "state": p.State, "html_url": p.HTMLURL,
			"head": map[string]any{"ref": p.Head.Ref, "label": p.Head.Label, "repo": headFull},
			"base": map[string]any{"ref": p.Base.Ref, "label": p.Base.Label, "repo": repoFull}},
		"repository": repoFull, "sender": g.userPayload(login, false)}
	d := g.newDelivery("pull_request_review", payload)
	g.mu.Unlock()
	return d, g.Deliver(t, d)
}

// AddReview records login's review of pull request pull in state
// (approved, changes_requested, commented, dismissed), without a webhook
// delivery.
func (g *GitHub) AddReview(t testing.TB, ownerRepo string, pull int, login, state string) {
	t.Helper()
	_, sha := g.pullHead(t, ownerRepo, pull)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.addReview(ownerRepo, pull, sha, login, state, "")
}

// addReview keeps a review. Call with g.mu held.
func (g *GitHub) addReview(ownerRepo string, pull int, sha, login, state, body string) fakeReview {
	g.iss.nextComment++
	rv := fakeReview{id: g.iss.nextComment, login: login, state: state, body: body, at: time.Now().UTC().Format(time.RFC3339), sha: sha}
	key := fmt.Sprintf("%s#%d", strings.ToLower(ownerRepo), pull)
	g.checks.reviews[key] = append(g.checks.reviews[key], rv)
	return rv
}

// pullHead is pull request n of ownerRepo with the commit its head branch
// is at now.
func (g *GitHub) pullHead(t testing.TB, ownerRepo string, n int) (fakePull, string) {
	t.Helper()
	g.mu.Lock()
	p := g.pull(t, strings.ToLower(ownerRepo), n)
	g.mu.Unlock()
	return p, g.headSHA(ownerRepo, p)
}

// headSHA is the commit a pull request's head branch is at: the served
// repository's branch when there is one (a push moves it, as on GitHub),
// else the one the pull request was opened with.
func (g *GitHub) headSHA(ownerRepo string, p fakePull) string {
	if p.Head.repo == "" || strings.EqualFold(p.Head.repo, ownerRepo) {
		out, err := exec.Command("git", "-C", filepath.Join(g.gitRoot, strings.ToLower(ownerRepo)+".git"), "rev-parse", "--verify", "-q", "refs/heads/"+p.Head.Ref).Output()
		if err == nil {
			return strings.TrimSpace(string(out))
		}
	}
	return p.Head.SHA
}

// listCheckRuns answers GET /repos/{owner}/{repo}/commits/{ref}/check-runs
// for a token with checks read: the latest run of each name on the commit
// (GitHub's filter=latest, its default), newest first.
func (g *GitHub) listCheckRuns(w http.ResponseWriter, r *http.Request) {
	repo, ok := g.readable(w, r, "check_runs", "checks", http.StatusForbidden)
	if !ok {
		return
	}
	g.mu.Lock()
	runs := slices.Clone(g.checks.runs[repo])
	g.mu.Unlock()
	out := []map[string]any{}
	seen := map[string]bool{}
	for i := len(runs) - 1; i >= 0; i-- {
		c := runs[i]
		if c.sha != r.PathValue("ref") || seen[c.name] {
			continue
		}
		seen[c.name] = true
		var conclusion, completed any
		if c.status == "completed" {
			conclusion, completed = c.conclusion, c.at
		}
		out = append(out, map[string]any{"id": c.id, "name": c.name, "head_sha": c.sha, "status": c.status, "conclusion": conclusion,
			"started_at": c.at, "completed_at": completed, "details_url": fmt.Sprintf("https://ci.example/%s/runs/%d", repo, c.id),
			"html_url": fmt.Sprintf("%s/%s/runs/%d", g.URL, repo, c.id), "app": map[string]any{"slug": "ci"}})
	}
	ghJSON(w, http.StatusOK, map[string]any{"total_count": len(out), "check_runs": out})
}

// listReviews answers GET /repos/{owner}/{repo}/pulls/{n}/reviews for a
// token with pull requests read: every review, oldest first, its state in
// the REST API's capitals (APPROVED, CHANGES_REQUESTED, COMMENTED,
// DISMISSED).
func (g *GitHub) listReviews(w http.ResponseWriter, r *http.Request) {
	repo, ok := g.readable(w, r, "reviews", "pull_requests", http.StatusNotFound)
	if !ok {
		return
	}
	g.mu.Lock()
	rvs := slices.Clone(g.checks.reviews[repo+"#"+r.PathValue("n")])
	g.mu.Unlock()
	out := []map[string]any{}
	for _, rv := range rvs {
		out = append(out, map[string]any{"id": rv.id, "user": map[string]any{"login": rv.login, "type": "User"}, "body": rv.body,
			"state": strings.ToUpper(rv.state), "submitted_at": rv.at, "commit_id": rv.sha, "author_association": "COLLABORATOR"})
	}
	ghJSON(w, http.StatusOK, out)
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
		Head: pullRef{Ref: branch, Label: headOwner + ":" + branch, SHA: fmt.Sprintf("%040x", repoID(head)<<8+int64(n)), repo: headOwner + "/" + name}, Base: pullRef{Ref: "main", Label: owner + ":main"}})
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
