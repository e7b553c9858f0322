package github_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

func client(t *testing.T, gh *testkit.GitHub, app bool) *github.Client {
	t.Helper()
	cfg := github.Config{URL: gh.URL, APIURL: gh.URL, ClientID: gh.ClientID, ClientSecret: gh.ClientSecret}
	if app {
		key, err := github.ParsePrivateKey(gh.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.AppID, cfg.PrivateKey = gh.AppID, key
	}
	c, err := github.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseRepoKnowsOnlyThisGitHubsRepos(t *testing.T) {
	c, err := github.New(github.Config{URL: "https://github.com", APIURL: "https://api.github.com"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url, owner, name string
		ok               bool
	}{
		{"https://github.com/Acme/App.git", "acme", "app", true},
		{"https://github.com/acme/app", "acme", "app", true},
		{"https://github.com/acme/app/", "acme", "app", true},
		{"git@github.com:acme/app.git", "acme", "app", true},
		{"ssh://git@github.com/acme/app.git", "acme", "app", true},
		{"https://gitlab.com/acme/app.git", "", "", false},
		{"https://github.com.evil.example/acme/app.git", "", "", false},
		{"git@evil.example:acme/app.git", "", "", false},
		{"https://github.com/acme/app/tree/main", "", "", false},
		{"https://github.com/acme", "", "", false},
		{"https://github.com/acme/..", "", "", false},
		{"https://github.com/-acme/app", "", "", false},
		{"/home/me/src/app", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		owner, name, ok := c.ParseRepo(tt.url)
		if owner != tt.owner || name != tt.name || ok != tt.ok {
			t.Errorf("ParseRepo(%q) = %q, %q, %v; want %q, %q, %v", tt.url, owner, name, ok, tt.owner, tt.name, tt.ok)
		}
	}
}

func TestIsCollaboratorAsksAsTheAppsInstallation(t *testing.T) {
	gh := testkit.NewGitHub(t)
	c := client(t, gh, true)
	ctx := context.Background()
	gh.InstallApp("acme/app")
	gh.SetCollaborator("acme/app", "bob", true)
	gh.SetCollaborator("acme/bare", "bob", true) // no App there
	tests := []struct {
		repo, login string
		want        bool
	}{
		{"app", "bob", true},
		{"app", "carol", false},
		{"bare", "bob", false},
	}
	for _, tt := range tests {
		got, err := c.IsCollaborator(ctx, "acme", tt.repo, tt.login)
		if err != nil || got != tt.want {
			t.Errorf("%s on acme/%s: %v, %v; want %v", tt.login, tt.repo, got, err, tt.want)
		}
	}
	if n := gh.Calls("installation_token"); n != 1 {
		t.Errorf("minted %d installation tokens, want 1 reused", n)
	}
	gh.SetDown(true)
	if _, err := c.IsCollaborator(ctx, "acme", "app", "bob"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("with GitHub down: %v, want ErrUnavailable, never a no", err)
	}
	if got, err := client(t, gh, false).IsCollaborator(ctx, "acme", "app", "bob"); got || err != nil {
		t.Errorf("without the App: %v, %v; want no access", got, err)
	}
}

// gitRepo makes a repository with one commit in a fresh directory.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main", dir}, {"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return dir
}

// gitWith runs git in dir with the remote URL carrying tok as its password
// (the placeholder REMOTE in args), and reports whether it succeeded.
func gitWith(t *testing.T, dir, url, tok string, args ...string) bool {
	t.Helper()
	u := strings.Replace(url, "://", "://x-access-token:"+tok+"@", 1)
	argv := []string{"-C", dir}
	for _, a := range args {
		argv = append(argv, strings.ReplaceAll(a, "REMOTE", u))
	}
	cmd := exec.Command("git", argv...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	return cmd.Run() == nil
}

// servedApp is a fake GitHub serving a fresh repository as acme/app with
// the App on it, the App's client, and the repository's directory.
func servedApp(t *testing.T) (*testkit.GitHub, *github.Client, string) {
	t.Helper()
	testenv.RequireCommand(t, "git")
	gh := testkit.NewGitHub(t)
	gh.InstallApp("acme/app")
	src := gitRepo(t)
	gh.ServeRepo(t, "acme/app", src)
	return gh, client(t, gh, true), src
}

func TestRepoTokenIsForOneRepoWithWhatWasAsked(t *testing.T) {
	gh, c, src := servedApp(t)
	ctx := context.Background()
	gh.InstallApp("acme/other")
	gh.ServeRepo(t, "acme/other", src)
	gh.SetPrivate("acme/app", true)

	push, err := c.RepoToken(ctx, "acme", "app", github.SandboxPermissions)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := gh.Token(push.Value)
	if !slices.Equal(info.Repos, []string{"app"}) || info.Permissions["contents"] != "write" || info.Permissions["pull_requests"] != "write" || len(info.Permissions) != 3 {
		t.Errorf("the Sandbox token's grant: %+v, want acme/app alone with contents and pull requests write (and metadata)", info)
	}
	if time.Until(push.Expires) < 50*time.Minute {
		t.Errorf("expires %v, want about an hour from now", push.Expires)
	}
	read, err := c.RepoToken(ctx, "acme", "app", github.ClonePermissions)
	if err != nil {
		t.Fatal(err)
	}
	gh.SetTokenLifetime(time.Millisecond)
	expired, err := c.RepoToken(ctx, "acme", "app", github.SandboxPermissions)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the token's own lifetime, not a wait for a condition
	app, other := gh.RepoURL("acme/app"), gh.RepoURL("acme/other")
	tests := []struct {
		name, url, tok string
		args           []string
		want           bool
	}{
		{"push with the Sandbox token", app, push.Value, []string{"push", "-q", "REMOTE", "HEAD:refs/heads/probe"}, true},
		{"push with the read-only clone token", app, read.Value, []string{"push", "-q", "REMOTE", "HEAD:refs/heads/probe"}, false},
		{"push with an expired token", app, expired.Value, []string{"push", "-q", "REMOTE", "HEAD:refs/heads/probe"}, false},
		{"push to another Repo", other, push.Value, []string{"push", "-q", "REMOTE", "HEAD:refs/heads/probe"}, false},
		{"fetch the private Repo with the clone token", app, read.Value, []string{"ls-remote", "-q", "REMOTE"}, true},
		{"fetch the private Repo without a token", app, "", []string{"ls-remote", "-q", "REMOTE"}, false},
	}
	for _, tt := range tests {
		if got := gitWith(t, src, tt.url, tt.tok, tt.args...); got != tt.want {
			t.Errorf("%s: succeeded %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := gh.Branches(t, "acme/app"); !slices.Contains(got, "probe") {
		t.Errorf("acme/app's branches %v, want the pushed probe", got)
	}
	if _, err := c.RepoToken(ctx, "acme", "app", map[string]string{"checks": "write"}); err == nil {
		t.Error("a token with a permission the installation lacks was minted")
	}
	if _, err := c.RepoToken(ctx, "acme", "absent", github.ClonePermissions); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a Repo without the App: %v, want ErrNotFound", err)
	}
	if _, err := client(t, gh, false).RepoToken(ctx, "acme", "app", github.ClonePermissions); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("without the App: %v, want ErrNotFound", err)
	}
}

// TestARevokedTokenIsRefusedAtOnce: RevokeToken ends a token before its
// expiry, so git is refused with it; revoking it again, or an expired
// one, is no error: it is ended already.
func TestARevokedTokenIsRefusedAtOnce(t *testing.T) {
	gh, c, src := servedApp(t)
	ctx := context.Background()
	push, err := c.RepoToken(ctx, "acme", "app", github.SandboxPermissions)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RevokeToken(ctx, push.Value); err != nil {
		t.Fatal(err)
	}
	if info, _ := gh.Token(push.Value); info.Revoked.IsZero() || !info.Revoked.Before(push.Expires) {
		t.Fatalf("the fake's record of the token: %+v, want it revoked before its expiry", info)
	}
	if gitWith(t, src, gh.RepoURL("acme/app"), push.Value, "push", "-q", "REMOTE", "HEAD:refs/heads/probe") {
		t.Error("a push with a revoked token was accepted")
	}
	if err := c.RevokeToken(ctx, push.Value); err != nil {
		t.Errorf("revoking it again: %v, want no error", err)
	}
}

func TestPullsListsThoseOpenedFromABranch(t *testing.T) {
	gh, c, src := servedApp(t)
	ctx := context.Background()
	push, _ := c.RepoToken(ctx, "acme", "app", github.SandboxPermissions)
	read, _ := c.RepoToken(ctx, "acme", "app", github.ClonePermissions)
	for _, br := range []string{"kndl/one", "kndl/two"} {
		if !gitWith(t, src, gh.RepoURL("acme/app"), push.Value, "push", "-q", "REMOTE", "HEAD:refs/heads/"+br) {
			t.Fatalf("push %s", br)
		}
	}
	if code := gh.OpenPull(t, "acme/app", read.Value, "kndl/one", "Read-only"); code != http.StatusForbidden {
		t.Errorf("a pull request with the read-only token: %d, want 403", code)
	}
	// GitHub opens one pull request at a time from a branch into another:
	// the first is merged before the second.
	for i, title := range []string{"First", "Second"} {
		if code := gh.OpenPull(t, "acme/app", push.Value, "kndl/one", title); code != http.StatusCreated {
			t.Fatalf("open %q: %d", title, code)
		}
		if i == 0 {
			gh.MergePull("acme/app", 1)
		}
	}
	gh.OpenPull(t, "acme/app", push.Value, "kndl/two", "Other branch")
	got, err := c.Pulls(ctx, "acme", "app", "kndl/one")
	if err != nil {
		t.Fatal(err)
	}
	head := forge.PullHead{SHA: headOf(t, src)}
	want := []forge.Pull{
		{Number: 2, Title: "Second", URL: gh.URL + "/acme/app/pull/2", State: "open", Head: head},
		{Number: 1, Title: "First", URL: gh.URL + "/acme/app/pull/1", State: "closed", Merged: true, Head: head},
	}
	if !slices.Equal(got, want) {
		t.Errorf("pulls from kndl/one: %+v, want %+v", got, want)
	}
	if got, err := client(t, gh, false).Pulls(ctx, "acme", "app", "kndl/one"); err != nil || len(got) != 0 {
		t.Errorf("without the App: %v %v, want none", got, err)
	}
}

// headOf is the commit the repository at dir is at.
func headOf(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestChecksAndReviewsAreReadAsTheAppWithOrWithoutTheChecksPermission: a
// pull request's head commit's check runs sum to a word and its reviews
// to a decision, read as the App; an App whose owner did not grant it
// Checks reads no checks (none, no error) and everything else as before.
func TestChecksAndReviewsAreReadAsTheAppWithOrWithoutTheChecksPermission(t *testing.T) {
	gh, c, src := servedApp(t)
	ctx := context.Background()
	push, _ := c.RepoToken(ctx, "acme", "app", github.SandboxPermissions)
	if !gitWith(t, src, gh.RepoURL("acme/app"), push.Value, "push", "-q", "REMOTE", "HEAD:refs/heads/kndl/one") ||
		gh.OpenPull(t, "acme/app", push.Value, "kndl/one", "One") != http.StatusCreated {
		t.Fatal("push kndl/one and open its pull request")
	}
	gh.AddCheckRun(t, "acme/app", 1, "build", "completed", "timed_out")
	gh.AddReview(t, "acme/app", 1, "bob", "approved")
	sha := headOf(t, src)
	if got, err := c.ChecksOf(ctx, "acme", "app", sha); err != nil || got != forge.ChecksFailing {
		t.Errorf("checks with a timed-out build: %q %v, want failing", got, err)
	}
	if got, err := c.ReviewOf(ctx, "acme", "app", 1); err != nil || got != forge.ReviewApproved {
		t.Errorf("review with bob's approval: %q %v, want approved", got, err)
	}

	gh2, c2, src2 := servedApp(t)
	gh2.Grant("checks", "")
	push2, _ := c2.RepoToken(ctx, "acme", "app", github.SandboxPermissions)
	if !gitWith(t, src2, gh2.RepoURL("acme/app"), push2.Value, "push", "-q", "REMOTE", "HEAD:refs/heads/kndl/one") ||
		gh2.OpenPull(t, "acme/app", push2.Value, "kndl/one", "One") != http.StatusCreated {
		t.Fatal("push kndl/one and open its pull request")
	}
	gh2.AddCheckRun(t, "acme/app", 1, "build", "completed", "failure")
	if got, err := c2.ChecksOf(ctx, "acme", "app", headOf(t, src2)); err != nil || got != "" {
		t.Errorf("checks without the Checks permission: %q %v, want none and no error", got, err)
	}
	if ps, err := c2.Pulls(ctx, "acme", "app", "kndl/one"); err != nil || len(ps) != 1 {
		t.Errorf("pull requests without the Checks permission: %v %v, want the one", ps, err)
	}
}

// TestCheckRunsSumToAWordAndReviewsToADecision: one failing run makes the
// checks failing, else one not done pending; each reviewer's latest
// approval, request for changes or dismissal counts, a request for
// changes over any approval.
func TestCheckRunsSumToAWordAndReviewsToADecision(t *testing.T) {
	run := func(status, conclusion string) github.CheckRun {
		return github.CheckRun{Status: status, Conclusion: conclusion}
	}
	checks := []struct {
		runs []github.CheckRun
		want string
	}{
		{nil, ""},
		{[]github.CheckRun{run("completed", "success"), run("completed", "skipped"), run("completed", "neutral")}, forge.ChecksPassing},
		{[]github.CheckRun{run("completed", "success"), run("in_progress", "")}, forge.ChecksPending},
		{[]github.CheckRun{run("queued", ""), run("completed", "cancelled")}, forge.ChecksFailing},
	}
	for _, tt := range checks {
		if got := github.CombinedChecks(tt.runs); got != tt.want {
			t.Errorf("CombinedChecks(%+v) = %q, want %q", tt.runs, got, tt.want)
		}
	}
	review := func(login, state string) github.Review {
		var r github.Review
		r.User.Login, r.State = login, state
		return r
	}
	reviews := []struct {
		name string
		rs   []github.Review
		want string
	}{
		{"none", nil, ""},
		{"a comment alone", []github.Review{review("bob", "COMMENTED")}, ""},
		{"an approval, then a comment", []github.Review{review("bob", "APPROVED"), review("bob", "COMMENTED")}, forge.ReviewApproved},
		{"changes requested, then approved by the same reviewer", []github.Review{review("bob", "CHANGES_REQUESTED"), review("Bob", "APPROVED")}, forge.ReviewApproved},
		{"one approves, another requests changes", []github.Review{review("bob", "APPROVED"), review("carol", "CHANGES_REQUESTED")}, forge.ReviewChangesRequested},
		{"a request for changes dismissed", []github.Review{review("carol", "CHANGES_REQUESTED"), review("carol", "DISMISSED")}, ""},
	}
	for _, tt := range reviews {
		if got := github.ReviewDecision(tt.rs); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestOpenPullOpensAsTheAppIntoTheDefaultBranchAndSaysWhyGitHubRefused:
// the App opens the pull request on a token of its own, pull requests
// write alone, revoked once done; with no base, into the Repo's default
// branch; GitHub's refusals come back as ErrInvalid in GitHub's words.
func TestOpenPullOpensAsTheAppIntoTheDefaultBranchAndSaysWhyGitHubRefused(t *testing.T) {
	gh, c, src := servedApp(t)
	ctx := context.Background()
	push, _ := c.RepoToken(ctx, "acme", "app", github.SandboxPermissions)
	if !gitWith(t, src, gh.RepoURL("acme/app"), push.Value, "push", "-q", "REMOTE", "HEAD:refs/heads/kndl/fix") {
		t.Fatal("push kndl/fix")
	}
	before := len(gh.Tokens())
	p, err := c.OpenPull(ctx, "acme", "app", github.NewPull{Title: "Fix it", Body: "Why.", Head: "kndl/fix"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Number != 1 || p.State != "open" || p.URL != gh.URL+"/acme/app/pull/1" {
		t.Errorf("the pull request: %+v, want #1, open, with its link", p)
	}
	got := gh.Pulls("acme/app")
	if len(got) != 1 || got[0].Head != "kndl/fix" || got[0].Base != "main" || got[0].Body != "Why." || got[0].By != testkit.AppSlug+"[bot]" {
		t.Errorf("the fake received %+v, want kndl/fix into main, opened by the App", got)
	}
	toks := gh.Tokens()[before:]
	if len(toks) != 1 {
		t.Fatalf("tokens minted to open it: %d, want 1", len(toks))
	}
	if info, _ := gh.Token(toks[0]); info.Permissions["pull_requests"] != "write" || len(info.Permissions) != 2 || info.Revoked.IsZero() {
		t.Errorf("the token it opened with: %+v, want pull requests write (and metadata) alone, revoked", info)
	}

	refusals := []struct {
		pull github.NewPull
		says string
	}{
		{github.NewPull{Title: "Again", Head: "kndl/fix", Base: "main"}, "A pull request already exists for acme:kndl/fix."},
		{github.NewPull{Title: "Nowhere", Head: "kndl/none", Base: "main"}, "head invalid"},
		{github.NewPull{Title: "Into nothing", Head: "kndl/fix", Base: "nope"}, "base invalid"},
	}
	for _, tt := range refusals {
		_, err := c.OpenPull(ctx, "acme", "app", tt.pull)
		if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%+v: %v, want ErrInvalid saying %q", tt.pull, err, tt.says)
		}
	}
	if _, err := c.OpenPull(ctx, "acme", "other", github.NewPull{Title: "x", Head: "kndl/fix"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a Repo without the App: %v, want ErrNotFound", err)
	}
}

// TestAPullRequestsHeadNamesItsBranchAndTheRepositoryItIsIn: GitHub numbers
// pull requests with the issues; a pull request's head is its branch and
// the repository that branch is in, a fork's for one from a fork; a number
// with no pull request, or the App not on the Repo, is not found.
func TestAPullRequestsHeadNamesItsBranchAndTheRepositoryItIsIn(t *testing.T) {
	gh := testkit.NewGitHub(t)
	gh.InstallApp("acme/app")
	ctx := context.Background()
	c := client(t, gh, true)
	issue := gh.OpenIssue("acme/app", "carol", "A bug", "")
	own := gh.AddPull("acme/app", "alice", "kndl/fix", "Fix")
	fork := gh.AddPull("acme/app", "mallory", "mallory:kndl/fix", "Fix, from a fork")
	if issue != 1 || own != 2 || fork != 3 {
		t.Fatalf("numbers %d, %d, %d; want 1, 2, 3: one count for issues and pull requests", issue, own, fork)
	}
	branch, ownRepo, err := c.PullHead(ctx, "acme", "app", own)
	if err != nil || branch != "kndl/fix" {
		t.Fatalf("the pull request's head: %q %v, want kndl/fix", branch, err)
	}
	branch, forkRepo, err := c.PullHead(ctx, "acme", "app", fork)
	if err != nil || branch != "kndl/fix" || forkRepo == ownRepo {
		t.Errorf("the fork's pull request's head: %q in %d (%v), want kndl/fix in another repository than %d", branch, forkRepo, err, ownRepo)
	}
	if _, _, err := c.PullHead(ctx, "acme", "app", issue); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("an issue's number as a pull request: %v, want not found", err)
	}
	if _, _, err := c.PullHead(ctx, "acme", "other", 1); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a pull request where the App is not: %v, want not found", err)
	}
}

// TestMintTokenAsksForGhsPermissionsWhereTheAppHasThem: a Session's token
// also reads issues, checks and Actions runs, and comments for a Creator
// who may push, for what the git relay forwards from gh; an App not
// granted one of them (Actions, here) still mints the token, without
// them, rather than none; a clone's is contents read alone.
func TestMintTokenAsksForGhsPermissionsWhereTheAppHasThem(t *testing.T) {
	gh, c, _ := servedApp(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		access forge.Access
		take   string // the App's permission taken away first
		want   map[string]string
	}{
		{"push", forge.Push, "", map[string]string{"metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write", "checks": "read", "actions": "read"}},
		{"read", forge.Read, "", map[string]string{"metadata": "read", "contents": "read", "pull_requests": "read", "issues": "read", "checks": "read", "actions": "read"}},
		{"clone", forge.Clone, "", map[string]string{"metadata": "read", "contents": "read"}},
		{"push, the App without Actions", forge.Push, "actions", map[string]string{"metadata": "read", "contents": "write", "pull_requests": "write"}},
	}
	for _, tt := range tests {
		if tt.take != "" {
			gh.Grant(tt.take, "")
		}
		tok, err := c.MintToken(ctx, "acme", "app", tt.access)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if info, _ := gh.Token(tok.Value); !maps.Equal(info.Permissions, tt.want) || !slices.Equal(info.Repos, []string{"app"}) {
			t.Errorf("%s: got %v on %v, want %v on acme/app alone", tt.name, info.Permissions, info.Repos, tt.want)
		}
	}
}
