package gitrelay_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/gitrelay"
	"kndl.dev/kndl/internal/testenv"
)

// apiFront is what the Runner's relay does for gh: a request for
// gitrelay.APIHost (by Host, or in absolute form behind HTTP_PROXY) with
// the Session token as gh sends a token, handed to the API route. It
// returns the front's URL, which gh takes as its HTTP_PROXY.
func (r *rig) apiFront(t *testing.T) string {
	t.Helper()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		host := req.Host
		if req.URL.Host != "" {
			host = req.URL.Host
		}
		if host != gitrelay.APIHost || req.Header.Get("Authorization") != "token "+sessionToken {
			http.Error(w, "not the API host, or no Session token", http.StatusUnauthorized)
			return
		}
		r.relay.ServeAPI(w, req, sessionID)
	}))
	t.Cleanup(front.Close)
	return front.URL
}

// call makes one API call through the front, as gh does.
func call(t *testing.T, front, method, path, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, front+path, rd)
	req.Host = gitrelay.APIHost
	req.Header.Set("Authorization", "token "+sessionToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestTheAPIRelayForwardsItsTableAndRefusesTheRest walks every row of the
// API route's table, each forwarded to the fake GitHub (its answer, not
// the relay's refusal), and a list of calls outside it, each refused 403
// in GitHub's error shape, with the fake asked nothing.
func TestTheAPIRelayForwardsItsTableAndRefusesTheRest(t *testing.T) {
	r := newRig(t)
	front := r.apiFront(t)
	if got := r.gh.OpenPull(t, "acme/app", r.token, prefix+"found", "own"); got != http.StatusCreated {
		t.Fatalf("open pull request #1: got %d, want 201", got)
	}
	if got := r.gh.OpenPull(t, "acme/app", r.token, "other", "not own"); got != http.StatusCreated {
		t.Fatalf("open pull request #2: got %d, want 201", got)
	}
	bodies := map[string]string{
		"POST pulls":                         `{"title":"t","head":"` + prefix + `found","base":"other"}`,
		"PATCH pulls/{n}":                    `{"title":"new title"}`,
		"POST pulls/{n}/requested_reviewers": `{"reviewers":["octocat"]}`,
		"POST issues/{n}/comments":           `{"body":"hello"}`,
		"POST pulls/{n}/comments":            `{"body":"hello"}`,
	}
	for _, rt := range gitrelay.APIRoutes() {
		path := strings.NewReplacer("{n}", "1", "{s}", "main").Replace(rt[1])
		full := "/repos/acme/app"
		if path != "" {
			full += "/" + path
		}
		resp, body := call(t, front, rt[0], full, bodies[rt[0]+" "+rt[1]])
		if resp.Header.Get("X-Kndl-Refused") != "" {
			t.Errorf("%s %s: refused %d %s, want it forwarded", rt[0], full, resp.StatusCode, body)
		}
	}
	before := r.gh.Calls("any")
	refused := []struct{ method, path, body, want string }{
		{"GET", "/repos/acme/other", "", "for acme/app alone"},
		{"GET", "/repos/acme/other/pulls", "", "for acme/app alone"},
		{"GET", "/gists", "", "for acme/app alone"},
		{"POST", "/gists", `{"files":{"a":{"content":"x"}}}`, "for acme/app alone"},
		{"GET", "/user", "", "for acme/app alone"},
		{"PATCH", "/repos/acme/app", `{"private":false}`, "not among the calls"},
		{"DELETE", "/repos/acme/app", "", "not among the calls"},
		{"PUT", "/repos/acme/app/pulls/1/merge", "", "not among the calls"},
		{"DELETE", "/repos/acme/app/git/refs/heads/main", "", "not among the calls"},
		{"POST", "/repos/acme/app/git/refs", `{"ref":"refs/heads/x","sha":"0"}`, "not among the calls"},
		{"PUT", "/repos/acme/app/contents/README", `{"message":"m","content":""}`, "not among the calls"},
		{"POST", "/repos/acme/app/releases", `{"tag_name":"v1"}`, "not among the calls"},
		{"GET", "/repos/acme/app/releases", "", "not among the calls"},
		{"POST", "/repos/acme/app/hooks", `{}`, "not among the calls"},
		{"PUT", "/repos/acme/app/collaborators/mallory", "", "not among the calls"},
		{"GET", "/repos/acme/app/actions/secrets", "", "not among the calls"},
		{"POST", "/repos/acme/app/pulls/1/reviews", `{"event":"APPROVE"}`, "not among the calls"},
		{"POST", "/repos/acme/app/issues", `{"title":"x"}`, "not among the calls"},
		{"PATCH", "/repos/acme/app/issues/1", `{"state":"closed"}`, "not among the calls"},
		{"GET", "/repos/acme/app/pulls/1/../../../other", "", "plain paths"},
		{"GET", "/repos/acme/app/pulls/%31", "", "plain paths"},
		{"POST", "/repos/acme/app/pulls", `{"title":"t","head":"main","base":"other"}`, "only from its own branches"},
		{"POST", "/repos/acme/app/pulls", `{"title":"t","head":"mallory:` + prefix + `x","base":"main"}`, "not mallory:"},
		{"POST", "/repos/acme/app/pulls", `{"title":"t","head":"main","head":"` + prefix + `x","base":"main"}`, ""},
		{"PATCH", "/repos/acme/app/pulls/1", `{"maintainer_can_modify":true}`, "not \"maintainer_can_modify\""},
		{"GRAPHQL", "", `{"query":"mutation M { mergePullRequest(input: {pullRequestId: \"1\"}) { clientMutationId } }"}`, "not mutation M"},
	}
	for _, tt := range refused {
		method, path := tt.method, tt.path
		if method == "GRAPHQL" {
			method, path = "POST", "/graphql"
		}
		resp, body := call(t, front, method, path, tt.body)
		var e struct {
			Message          string `json:"message"`
			DocumentationURL string `json:"documentation_url"`
		}
		if resp.StatusCode == http.StatusForbidden && tt.want == "" {
			// Duplicate keys: the relay forwards what it judged, the last
			// one, once; this one is its own and goes through.
			t.Errorf("%s %s: got 403 %s, want it forwarded as judged", tt.method, tt.path, body)
			continue
		}
		if tt.want == "" {
			continue
		}
		if json.Unmarshal([]byte(body), &e) != nil || resp.StatusCode/100 != 4 || !strings.Contains(e.Message, tt.want) || e.DocumentationURL == "" {
			t.Errorf("%s %s: got %d %s, want 4xx in GitHub's shape saying %q", tt.method, tt.path, resp.StatusCode, body, tt.want)
		}
	}
	// Reading pull request #1 and #2 to judge the PATCH is asked of the
	// fake; nothing else is.
	if got := r.gh.Calls("any") - before; got > 2 {
		t.Errorf("the fake was asked %d times for refused calls, want at most 2 (the duplicate-key pull request and the head it judged)", got)
	}
	if got := r.gh.Pulls("acme/app"); len(got) < 3 || got[2].Head != prefix+"x" {
		t.Logf("pulls: %+v", got)
	}
	if resp, body := call(t, front, "PATCH", "/repos/acme/app/pulls/2", `{"title":"taken"}`); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "is not this Session's") {
		t.Errorf("PATCH another's pull request: got %d %s, want 403 naming it not the Session's", resp.StatusCode, body)
	}
	if resp, body := call(t, front, "POST", "/repos/acme/app/pulls/2/requested_reviewers", `{"reviewers":["a"]}`); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "is not this Session's") {
		t.Errorf("request reviewers on another's pull request: got %d %s, want 403", resp.StatusCode, body)
	}
}

// ghRun runs the real gh (Debian's 2.23, the test image's) in dir against
// the relay: GH_HOST github.localhost, whose API gh calls over plain HTTP,
// HTTP_PROXY the front, and the Session token as GH_TOKEN.
func ghRun(t *testing.T, dir, front string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("gh", args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "GH_CONFIG_DIR="+home, "GH_HOST="+gitrelay.GHHost, "GH_TOKEN="+sessionToken,
		"HTTP_PROXY="+front, "GH_PROMPT_DISABLED=1", "GH_NO_UPDATE_NOTIFIER=1", "NO_COLOR=1", "GIT_CONFIG_NOSYSTEM=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestGhOpensThePullRequestOfTheSessionsBranchAndIsRefusedTheRest runs the
// real gh through the API route in front of the fake GitHub: gh pr create
// from the Session's own branch opens it (GraphQL: RepositoryInfo,
// PullRequestForBranch, PullRequestCreate); from another branch, gh api
// on another Repo and on gists are refused, gh printing the relay's
// message.
func TestGhOpensThePullRequestOfTheSessionsBranchAndIsRefusedTheRest(t *testing.T) {
	testenv.RequireCommand(t, "gh")
	r := newRig(t)
	front := r.apiFront(t)
	dir := r.clone(t)
	// gh finds its Repo by a remote on its host: the Sandbox's origin, as
	// gh reads it.
	gitOK(t, dir, "remote", "set-url", "origin", "http://"+gitrelay.GHHost+"/acme/app")
	gitOK(t, dir, "checkout", "-q", prefix+"found")

	out, err := ghRun(t, dir, front, "pr", "create", "--title", "From the Session", "--body", "b", "--head", prefix+"found", "--base", "main")
	if err != nil {
		t.Fatalf("gh pr create: %v\n%s", err, out)
	}
	pulls := r.gh.Pulls("acme/app")
	if len(pulls) != 1 || pulls[0].Head != prefix+"found" || pulls[0].Title != "From the Session" || !strings.Contains(out, "/acme/app/pull/1") {
		t.Fatalf("gh pr create: got %+v, printed %q, want pull request #1 from %sfound", pulls, out, prefix)
	}
	t.Logf("gh pr create sent %v", r.gh.GraphQLOps())

	refused := []struct {
		args []string
		want string
	}{
		{[]string{"pr", "create", "--title", "t", "--body", "b", "--head", "other", "--base", "main"}, "only from its own branches, under " + prefix},
		{[]string{"api", "repos/acme/other"}, "gh: kndl: this Session reaches GitHub's API for acme/app alone"},
		{[]string{"api", "gists"}, "gh: kndl: this Session reaches GitHub's API for acme/app alone"},
		{[]string{"api", "-X", "PUT", "repos/acme/app/pulls/1/merge"}, "gh: kndl: PUT /repos/acme/app/pulls/1/merge is not among the calls"},
	}
	for _, tt := range refused {
		out, err := ghRun(t, dir, front, tt.args...)
		if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("gh %v: got %v\n%s\nwant it refused, printing %q", tt.args, err, out, tt.want)
		}
	}
	if got := len(r.gh.Pulls("acme/app")); got != 1 {
		t.Errorf("pull requests after the refusals: got %d, want 1", got)
	}
}

// TestGraphQLIsForwardedByOperationAlone: gh's operations for the five
// commands go through; a mutation other than PullRequestCreate, an
// operation under an allowed name that selects something else (or through
// an alias or a top-level fragment), a second operation, another Repo's
// variables and a pull request from another branch are refused.
func TestGraphQLIsForwardedByOperationAlone(t *testing.T) {
	q := func(doc string, vars string) []byte {
		b, _ := json.Marshal(map[string]any{"query": doc, "variables": json.RawMessage(vars)})
		return b
	}
	create := "mutation PullRequestCreate($input: CreatePullRequestInput!) { createPullRequest(input: $input) { pullRequest { id url } } }"
	tests := []struct {
		name string
		body []byte
		want string // "" forwarded, else part of the refusal
	}{
		{"RepositoryInfo", q("fragment repo on Repository { id }\nquery RepositoryInfo($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { ...repo parent { ...repo } } }", `{"owner":"acme","name":"app"}`), ""},
		{"PullRequestForBranch", q(`query PullRequestForBranch($owner: String!, $repo: String!, $headRefName: String!, $states: [PullRequestState!]) { repository(owner: $owner, name: $repo) { pullRequests(headRefName: $headRefName, states: $states, first: 30, orderBy: { field: CREATED_AT, direction: DESC }) { nodes { number } } } }`, `{"owner":"acme","repo":"app","headRefName":"x"}`), ""},
		{"PullRequestStatusChecks", q(`query PullRequestStatusChecks($id: ID!, $endCursor: String) { node(id: $id) { ...on PullRequest { id } } }`, `{"id":"PR_1"}`), ""},
		{"PullRequestCreate from its own branch", q(create, `{"input":{"repositoryId":"R_1","headRefName":"kndl/1a2b3c4d/x","baseRefName":"main","title":"t"}}`), ""},
		{"PullRequestCreate from main", q(create, `{"input":{"repositoryId":"R_1","headRefName":"main","baseRefName":"x","title":"t"}}`), "only from its own branches"},
		{"PullRequestCreate from a fork", q(create, `{"input":{"repositoryId":"R_1","headRefName":"kndl/1a2b3c4d/x","headRepositoryId":"R_2","title":"t"}}`), "another repository"},
		{"a merge", q(`mutation MergePullRequest { mergePullRequest(input: {pullRequestId: "1"}) { clientMutationId } }`, `{}`), "not mutation MergePullRequest"},
		{"a merge under an allowed name", q(`mutation PullRequestCreate { mergePullRequest(input: {pullRequestId: "1"}) { clientMutationId } }`, `{"input":{"headRefName":"kndl/1a2b3c4d/x"}}`), "selects mergePullRequest"},
		{"a merge aliased", q(`mutation PullRequestCreate($input: CreatePullRequestInput!) { createPullRequest: mergePullRequest(input: {pullRequestId: "1"}) { clientMutationId } }`, `{"input":{"headRefName":"kndl/1a2b3c4d/x"}}`), "selects mergePullRequest"},
		{"a merge beside the create", q(`mutation PullRequestCreate($input: CreatePullRequestInput!) { createPullRequest(input: $input) { clientMutationId } mergePullRequest(input: {pullRequestId: "1"}) { clientMutationId } }`, `{"input":{"headRefName":"kndl/1a2b3c4d/x"}}`), "selects mergePullRequest"},
		{"a query named as a mutation", q(`mutation RepositoryInfo { deleteRef(input: {refId: "1"}) { clientMutationId } }`, `{}`), "not mutation RepositoryInfo"},
		{"a top-level fragment", q(`fragment f on Mutation { mergePullRequest(input: {pullRequestId: "1"}) { clientMutationId } } mutation PullRequestCreate($input: CreatePullRequestInput!) { ...f }`, `{"input":{"headRefName":"kndl/1a2b3c4d/x"}}`), "spreads a fragment"},
		{"two operations", q(`query RepositoryInfo { repository(owner: "acme", name: "app") { id } } mutation M { mergePullRequest(input: {}) { clientMutationId } }`, `{}`), "one operation"},
		{"an anonymous query", q(`{ viewer { login } }`, `{}`), "named operations"},
		{"another Repo", q(`query IssueByNumber($owner: String!, $repo: String!, $number: Int!) { repository(owner: $owner, name: $repo) { issue(number: $number) { title } } }`, `{"owner":"acme","repo":"other","number":1}`), "acme/app alone"},
		{"another field", q(`query IssueByNumber { viewer { login } }`, `{}`), "selects viewer"},
		{"a subscription", q(`subscription IssueByNumber { repository { id } }`, `{}`), "named operations"},
		{"a string hiding braces", q(`query IssueByNumber($owner: String! = "}{ mergePullRequest") { repository(owner: $owner, name: "app") { id } }`, `{}`), ""},
	}
	for _, tt := range tests {
		got := gitrelay.JudgeGraphQL(tt.body, prefix)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestGhReadsThroughTheRelayWhatItsAllowlistNames runs the real gh's read
// commands whose calls the relay forwards, against the fake GitHub with
// the token the Hub mints for a Creator who may push: gh pr view (of the
// branch and by number), gh pr checks, gh issue view, gh run view and its
// failed steps' log. Each prints what GitHub holds; gh run view follows
// the run's jobs_url, which the relay points at itself; the log comes
// through the download the forge redirects to.
func TestGhReadsThroughTheRelayWhatItsAllowlistNames(t *testing.T) {
	testenv.RequireCommand(t, "gh")
	r := newRig(t)
	front := r.apiFront(t)
	dir := r.clone(t)
	gitOK(t, dir, "remote", "set-url", "origin", "http://"+gitrelay.GHHost+"/acme/app")
	gitOK(t, dir, "checkout", "-q", prefix+"found")
	if got := r.gh.OpenPull(t, "acme/app", r.token, prefix+"found", "The Session's work"); got != http.StatusCreated {
		t.Fatalf("open pull request #1: got %d, want 201", got)
	}
	issue := r.gh.OpenIssue("acme/app", "octocat", "Crash on start", "It crashes when started.")
	r.gh.AddCheckRun(t, "acme/app", 1, "lint", "completed", "success")
	r.gh.AddCheckRun(t, "acme/app", 1, "test", "completed", "failure")
	run := r.gh.AddWorkflowRun("acme/app", "CI", prefix+"found", strings.Repeat("a", 40), "failure")
	runID := strconv.FormatInt(run, 10)

	tests := []struct {
		args   []string
		failed bool // gh exits non-zero: a failing check
		want   []string
	}{
		{[]string{"pr", "view"}, false, []string{"title:\tThe Session's work", "state:\tOPEN", "number:\t1"}},
		{[]string{"pr", "view", "1"}, false, []string{"title:\tThe Session's work", "number:\t1"}},
		{[]string{"pr", "checks"}, true, []string{"test\tfail\t", "lint\tpass\t", "https://ci.example/acme/app/runs/"}},
		{[]string{"issue", "view", strconv.Itoa(issue)}, false, []string{"title:\tCrash on start", "author:\toctocat", "It crashes when started."}},
		{[]string{"run", "view", runID}, false, []string{"X " + prefix + "found CI · " + runID, "JOBS", "X CI in", "X test"}},
		{[]string{"run", "view", runID, "--log-failed"}, false, []string{"CI\ttest\t", "test: failure"}},
	}
	for _, tt := range tests {
		out, err := ghRun(t, dir, front, tt.args...)
		if (err != nil) != tt.failed {
			t.Errorf("gh %v: got %v, want failed %v\n%s", tt.args, err, tt.failed, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("gh %v printed:\n%s\nwant a line with %q", tt.args, out, w)
			}
		}
	}
	for _, op := range []string{"PullRequestForBranch", "PullRequestByNumber", "PullRequestStatusChecks", "IssueByNumber"} {
		if !slices.Contains(r.gh.GraphQLOps(), op) {
			t.Errorf("the GraphQL operations gh sent: %v, want %s among them", r.gh.GraphQLOps(), op)
		}
	}
}
