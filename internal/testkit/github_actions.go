package testkit

import (
	"archive/zip"
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The fake GitHub's Actions runs, as `gh run view` reads them through the
// REST API: a run (GET /repos/{owner}/{repo}/actions/runs/{id}), its jobs
// (…/runs/{id}/jobs), artifacts (none) and logs (…/runs/{id}/logs, a
// redirect to a zip at a URL that needs no token, as GitHub signs one),
// its workflow (…/actions/workflows/{id}) and a job's annotations
// (…/check-runs/{id}/annotations, a job being a check run). It checks
// what GitHub checks: a live token that reaches the Repo with actions read
// (checks read for the annotations); a run of another Repo is not found.

// fakeRun is one workflow run with its one job.
type fakeRun struct {
	id, jobID              int64
	workflow, branch, sha  string
	status, conclusion, at string
}

func (g *GitHub) serveActions(mux *http.ServeMux) {
	mux.HandleFunc("GET /repos/{owner}/{repo}/actions/runs/{id}", g.showRun)
	mux.HandleFunc("GET /repos/{owner}/{repo}/actions/runs/{id}/jobs", g.runJobs)
	mux.HandleFunc("GET /repos/{owner}/{repo}/actions/runs/{id}/artifacts", g.runArtifacts)
	mux.HandleFunc("GET /repos/{owner}/{repo}/actions/runs/{id}/logs", g.runLogs)
	mux.HandleFunc("GET /_logs/{owner}/{repo}/{id}", g.runLogsZip)
	mux.HandleFunc("GET /repos/{owner}/{repo}/actions/workflows/{id}", g.showWorkflow)
	mux.HandleFunc("GET /repos/{owner}/{repo}/check-runs/{id}/annotations", g.annotations)
}

// AddWorkflowRun records a run of the workflow named workflow on branch
// of ownerRepo, at sha, completed with conclusion (success, failure), and
// returns its id.
func (g *GitHub) AddWorkflowRun(ownerRepo, workflow, branch, sha, conclusion string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	repo := strings.ToLower(ownerRepo)
	id := int64(len(g.runs[repo])+1) * 1000
	g.runs[repo] = append(g.runs[repo], fakeRun{id: id, jobID: id + 1, workflow: workflow, branch: branch, sha: sha,
		status: "completed", conclusion: conclusion, at: time.Now().UTC().Format(time.RFC3339)})
	return id
}

// findRun is run id of the request's Repo, for a token with perm read;
// it answers the refusal itself.
func (g *GitHub) findRun(w http.ResponseWriter, r *http.Request, endpoint, perm string) (string, fakeRun, bool) {
	repo, ok := g.readable(w, r, endpoint, perm, http.StatusForbidden)
	if !ok {
		return "", fakeRun{}, false
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	g.mu.Lock()
	i := slices.IndexFunc(g.runs[repo], func(f fakeRun) bool { return f.id == id || f.jobID == id })
	var run fakeRun
	if i >= 0 {
		run = g.runs[repo][i]
	}
	g.mu.Unlock()
	if i < 0 {
		ghError(w, http.StatusNotFound, "Not Found")
		return "", fakeRun{}, false
	}
	return repo, run, true
}

func (g *GitHub) showRun(w http.ResponseWriter, r *http.Request) {
	repo, run, ok := g.findRun(w, r, "actions_run", "actions")
	if !ok || run.id != mustID(r) {
		if ok {
			ghError(w, http.StatusNotFound, "Not Found")
		}
		return
	}
	owner, name, _ := strings.Cut(repo, "/")
	api := fmt.Sprintf("%s/repos/%s/actions/runs/%d", g.URL, repo, run.id)
	ghJSON(w, http.StatusOK, map[string]any{"id": run.id, "name": run.workflow, "display_title": run.workflow, "workflow_id": run.id + 2,
		"head_branch": run.branch, "head_sha": run.sha, "status": run.status, "conclusion": run.conclusion, "event": "push",
		"run_attempt": 1, "created_at": run.at, "updated_at": run.at, "run_started_at": run.at, "url": api,
		"html_url": fmt.Sprintf("%s/%s/actions/runs/%d", g.URL, repo, run.id), "jobs_url": api + "/jobs",
		"head_repository": map[string]any{"name": name, "full_name": repo, "owner": map[string]any{"login": owner}}})
}

func (g *GitHub) runJobs(w http.ResponseWriter, r *http.Request) {
	repo, run, ok := g.findRun(w, r, "actions_jobs", "actions")
	if !ok {
		return
	}
	ghJSON(w, http.StatusOK, map[string]any{"total_count": 1, "jobs": []any{map[string]any{
		"id": run.jobID, "run_id": run.id, "name": run.workflow, "status": run.status, "conclusion": run.conclusion,
		"started_at": run.at, "completed_at": run.at, "url": fmt.Sprintf("%s/repos/%s/actions/jobs/%d", g.URL, repo, run.jobID),
		"html_url": fmt.Sprintf("%s/%s/actions/runs/%d/job/%d", g.URL, repo, run.id, run.jobID),
		"steps": []any{map[string]any{"name": "test", "number": 1, "status": run.status, "conclusion": run.conclusion,
			"started_at": run.at, "completed_at": run.at}}}}})
}

func (g *GitHub) runArtifacts(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := g.findRun(w, r, "actions_artifacts", "actions"); ok {
		ghJSON(w, http.StatusOK, map[string]any{"total_count": 0, "artifacts": []any{}})
	}
}

// runLogs redirects to the run's logs, as GitHub does, to a URL whose
// signature is its credential.
func (g *GitHub) runLogs(w http.ResponseWriter, r *http.Request) {
	repo, run, ok := g.findRun(w, r, "actions_logs", "actions")
	if !ok {
		return
	}
	g.mu.Lock()
	g.logSigs[fmt.Sprintf("%s/%d", repo, run.id)] = true
	g.mu.Unlock()
	http.Redirect(w, r, fmt.Sprintf("%s/_logs/%s/%d?sig=%x", g.URL, repo, run.id, run.id*7919), http.StatusFound)
}

// runLogsZip serves a run's logs as GitHub's download does: a zip with a
// file per job's step, JOB/N_STEP.txt, and one per job.
func (g *GitHub) runLogsZip(w http.ResponseWriter, r *http.Request) {
	repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	id := mustID(r)
	g.mu.Lock()
	signed := g.logSigs[fmt.Sprintf("%s/%d", repo, id)] && r.URL.Query().Get("sig") == fmt.Sprintf("%x", id*7919)
	i := slices.IndexFunc(g.runs[repo], func(f fakeRun) bool { return f.id == id })
	var run fakeRun
	if i >= 0 {
		run = g.runs[repo][i]
	}
	g.mu.Unlock()
	if !signed || i < 0 {
		http.Error(w, "the signature is not valid", http.StatusForbidden)
		return
	}
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for _, name := range []string{run.workflow + "/1_test.txt", "0_" + run.workflow + ".txt"} {
		f, _ := z.Create(name)
		fmt.Fprintf(f, "%s test: %s\n", run.at, run.conclusion)
	}
	z.Close()
	w.Header().Set("Content-Type", "application/zip")
	w.Write(b.Bytes())
}

func (g *GitHub) showWorkflow(w http.ResponseWriter, r *http.Request) {
	repo, ok := g.readable(w, r, "actions_workflow", "actions", http.StatusForbidden)
	if !ok {
		return
	}
	id := mustID(r)
	g.mu.Lock()
	i := slices.IndexFunc(g.runs[repo], func(f fakeRun) bool { return f.id+2 == id })
	var run fakeRun
	if i >= 0 {
		run = g.runs[repo][i]
	}
	g.mu.Unlock()
	if i < 0 {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	ghJSON(w, http.StatusOK, map[string]any{"id": id, "name": run.workflow, "path": ".github/workflows/ci.yml", "state": "active"})
}

func (g *GitHub) annotations(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := g.findRun(w, r, "annotations", "checks"); ok {
		ghJSON(w, http.StatusOK, []any{})
	}
}

func mustID(r *http.Request) int64 {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id
}
