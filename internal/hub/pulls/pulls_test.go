package pulls

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestATrackedPushShowsItsPullRequests: a push the relay reports records
// its branch at once, with a link, and its pull requests once GitHub is
// asked, each change told to the Session's watchers and the new pull
// request told as opened, once; a name that is no branch records nothing.
func TestATrackedPushShowsItsPullRequests(t *testing.T) {
	ctx := context.Background()
	gh, c := pushedWithPull(t)
	st, s := sessionOf(t, gh.RepoURL("acme/app"))
	var mu sync.Mutex
	changed := 0
	var titles []string
	var opened []int
	tr := New(Options{Store: st.Branches, Forge: c, WebURL: gh.URL, Changed: func(id string) {
		mu.Lock()
		defer mu.Unlock()
		if id == s.ID {
			changed++
		}
	}, Titled: func(_ context.Context, id, title string) {
		mu.Lock()
		defer mu.Unlock()
		if id == s.ID {
			titles = append(titles, title)
		}
	}, Opened: func(_ context.Context, id string, p forge.Pull) {
		mu.Lock()
		defer mu.Unlock()
		if id == s.ID {
			opened = append(opened, p.Number)
		}
	}})
	defer tr.Close()

	tr.Pushed(ctx, s.ID, []string{"-rf", "a..b"})
	tr.Pushed(ctx, s.ID, []string{"kndl/test"})
	want := []api.Branch{{Name: "kndl/test", URL: gh.URL + "/acme/app/tree/kndl/test", Pulls: []api.Pull{
		{Number: 1, Title: "Add the thing", URL: gh.URL + "/acme/app/pull/1", State: "open"}}}}
	var got []api.Branch
	testenv.Eventually(t, testenv.WaitShort, "the branch with its pull request", func() bool {
		got, _ = tr.Branches(ctx, s.ID)
		return len(got) == 1 && len(got[0].Pulls) == 1
	})
	got[0].PushedAt = want[0].PushedAt
	if g, w := jsonText(got), jsonText(want); g != w {
		t.Errorf("branches: %s, want %s", g, w)
	}
	// Told once for the branch and once for its pull request; the second
	// may follow the store's write by a moment.
	testenv.Eventually(t, testenv.WaitShort, "watchers told of the branch and its pull request", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return changed == 2
	})
	// One the Hub opens from the view is told as opened too: the next
	// check finds it kept already, so it would not be.
	if err := tr.Opened(ctx, s.ID, "kndl/test", forge.Pull{Number: 2, Title: "From the view", State: "open"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(titles, []string{"Add the thing", "From the view"}) {
		t.Errorf("titles offered: %q, want each pull request's, once", titles)
	}
	if !slices.Equal(opened, []int{1, 2}) {
		t.Errorf("pull requests told as opened: %v, want #1 and #2, once each", opened)
	}
}

// pushedWithPull serves acme/app on a fake GitHub with the App on it,
// and pushes its branch kndl/test with a pull request, #1 "Add the
// thing", open from it; c is the Hub's client of that GitHub.
func pushedWithPull(t *testing.T) (gh *testkit.GitHub, c *github.Client) {
	t.Helper()
	testenv.RequireCommand(t, "git")
	ctx := context.Background()
	gh = testkit.NewGitHub(t)
	gh.InstallApp("acme/app")
	src := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main", src}, {"-C", src, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	gh.ServeRepo(t, "acme/app", src)
	key, _ := github.ParsePrivateKey(gh.KeyPEM)
	var err error
	c, err = github.New(github.Config{URL: gh.URL, APIURL: gh.URL, AppID: gh.AppID, PrivateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := c.RepoToken(ctx, "acme", "app", github.SandboxPermissions)
	push := exec.Command("git", "-C", src, "push", "-q", strings.Replace(gh.RepoURL("acme/app"), "://", "://x-access-token:"+tok.Value+"@", 1), "HEAD:refs/heads/kndl/test")
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("push: %v %s", err, out)
	}
	if status := gh.OpenPull(t, "acme/app", tok.Value, "kndl/test", "Add the thing"); status != http.StatusCreated {
		t.Fatalf("open a pull request: %d", status)
	}
	return gh, c
}

// trackedPushes is pushedWithPull's GitHub, a Session of its acme/app,
// and a Tracker without its worker told of the Session's push of branch.
func trackedPushes(t *testing.T, branches ...string) (*testkit.GitHub, *store.Store, store.Session, *Tracker) {
	gh, c := pushedWithPull(t)
	st, s := sessionOf(t, gh.RepoURL("acme/app"))
	tr := newTracker(Options{Store: st.Branches, Forge: c, WebURL: gh.URL, Changed: func(string) {}})
	tr.Pushed(context.Background(), s.ID, branches)
	return gh, st, s, tr
}

// sessionOf opens a store with a Session of the Repo at repoURL.
func sessionOf(t *testing.T, repoURL string) (*store.Store, store.Session) {
	t.Helper()
	ctx := context.Background()
	st := storetest.Open(t)
	dev, _ := st.Members.DevUser(ctx)
	rn, _, _ := st.Runners.CreateRunner(ctx, "r", dev.ID)
	repo, _ := st.Repos.EnsureRepo(ctx, repoURL, "acme/app")
	s, err := st.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: rn.ID})
	if err != nil {
		t.Fatal(err)
	}
	return st, s
}

// TestASandboxsPushesRecordAtMostMaxBranchesAndAskGitHubOncePerGap:
// 5,000 branches a Sandbox pushed, twice over, record MaxBranches
// branches, logged once, and ask GitHub about each once, not again for the
// pushes seen within the gap (DefaultGap); with GitHub failing, fifty pushes of one
// branch ask it once.
func TestASandboxsPushesRecordAtMostMaxBranchesAndAskGitHubOncePerGap(t *testing.T) {
	ctx := context.Background()
	gh := testkit.NewGitHub(t)
	gh.InstallApp("acme/app")
	key, _ := github.ParsePrivateKey(gh.KeyPEM)
	c, err := github.New(github.Config{URL: gh.URL, APIURL: gh.URL, AppID: gh.AppID, PrivateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	st, s := sessionOf(t, gh.RepoURL("acme/app"))
	var log testkit.Buffer
	// No worker: the test hands it each push, so what it asked is known.
	tr := newTracker(Options{Store: st.Branches, Forge: c, WebURL: gh.URL, Changed: func(string) {}, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	push := func(id string, branches ...string) {
		tr.Pushed(ctx, id, branches)
		for len(tr.soon) > 0 {
			tr.askDue(ctx, <-tr.soon)
		}
	}

	var branches []string
	for i := range 5000 {
		branches = append(branches, fmt.Sprintf("kndl/b%d", i))
	}
	for range 2 {
		for chunk := range slices.Chunk(branches, 500) {
			push(s.ID, chunk...)
		}
	}
	bs, _ := st.Branches.SessionBranches(ctx, s.ID)
	if len(bs) != MaxBranches || bs[0].Branch != "kndl/b0" {
		t.Errorf("recorded %d branches, want the first %d", len(bs), MaxBranches)
	}
	if n := gh.Calls("pulls"); n != MaxBranches {
		t.Errorf("GitHub was asked %d times, want once for each of the %d branches", n, MaxBranches)
	}
	if n := strings.Count(log.String(), "more branches than the Hub keeps"); n != 1 {
		t.Errorf("the cap is in the log %d times, want once:\n%s", n, log.String())
	}

	s2, err := st.Sessions.CreateSession(ctx, store.Session{RepoID: s.RepoID, CreatorID: s.CreatorID, RunnerID: s.RunnerID})
	if err != nil {
		t.Fatal(err)
	}
	gh.SetDown(true)
	asked := gh.Calls("any")
	for range 50 {
		push(s2.ID, "kndl/down")
	}
	if n := gh.Calls("any") - asked; n != 1 {
		t.Errorf("fifty pushes with GitHub down asked it %d times, want once", n)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAPullRequestsChecksAndReviewShowOnItsBranch: an open pull request
// shows its head commit's checks in a word (a failing run failing however
// many pass, one running pending, all passed passing) and its review
// decision (an approval approved, a later request for changes by another
// reviewer changes requested), each question to GitHub once a check of
// the branch; a merged one keeps what was last read, asking no more.
func TestAPullRequestsChecksAndReviewShowOnItsBranch(t *testing.T) {
	ctx := context.Background()
	gh, st, s, tr := trackedPushes(t, "kndl/test")
	checked := func() api.Pull {
		t.Helper()
		bs, _ := st.Branches.SessionBranches(ctx, s.ID)
		tr.check(ctx, bs, 0)
		got, _ := tr.Branches(ctx, s.ID)
		if len(got) != 1 || len(got[0].Pulls) != 1 {
			t.Fatalf("branches %+v, want kndl/test with its pull request", got)
		}
		return got[0].Pulls[0]
	}
	if p := checked(); p.Checks != "" || p.Review != "" {
		t.Errorf("with no check runs nor reviews: checks %q, review %q, want none", p.Checks, p.Review)
	}

	gh.AddCheckRun(t, "acme/app", 1, "lint", "completed", "success")
	gh.AddCheckRun(t, "acme/app", 1, "build", "completed", "failure")
	gh.AddReview(t, "acme/app", 1, "bob", "commented")
	gh.AddReview(t, "acme/app", 1, "bob", "approved")
	if p := checked(); p.Checks != forge.ChecksFailing || p.Review != forge.ReviewApproved {
		t.Errorf("a failing build and bob's approval: checks %q, review %q, want failing, approved", p.Checks, p.Review)
	}
	gh.AddCheckRun(t, "acme/app", 1, "build", "in_progress", "")
	if p := checked(); p.Checks != forge.ChecksPending {
		t.Errorf("the build run again: checks %q, want pending", p.Checks)
	}
	gh.AddCheckRun(t, "acme/app", 1, "build", "completed", "success")
	gh.AddReview(t, "acme/app", 1, "carol", "changes_requested")
	if p := checked(); p.Checks != forge.ChecksPassing || p.Review != forge.ReviewChangesRequested {
		t.Errorf("the build passed, carol requests changes: checks %q, review %q, want passing, changes_requested", p.Checks, p.Review)
	}
	if runs, reviews := gh.Calls("check_runs"), gh.Calls("reviews"); runs != 4 || reviews != 4 {
		t.Errorf("GitHub was asked for checks %d and reviews %d times, want once each a check of the branch (4)", runs, reviews)
	}

	gh.MergePull("acme/app", 1)
	if p := checked(); p.Status() != "merged" || p.Checks != forge.ChecksPassing || p.Review != forge.ReviewChangesRequested {
		t.Errorf("merged: %+v, want merged, keeping passing and changes_requested", p)
	}
	if runs, reviews := gh.Calls("check_runs"), gh.Calls("reviews"); runs != 4 || reviews != 4 {
		t.Errorf("a merged pull request's checks and reviews were asked for (%d, %d), want no more", runs, reviews)
	}
}

// TestARoundAsksGitHubAtMostItsBudget: a timer's round counts each
// question, a branch's pull requests and an open one's checks and
// reviews, and stops at its budget, the branches after left for the next.
func TestARoundAsksGitHubAtMostItsBudget(t *testing.T) {
	ctx := context.Background()
	gh, st, s, tr := trackedPushes(t, "kndl/test", "kndl/x", "kndl/y")
	bs, _ := st.Branches.SessionBranches(ctx, s.ID)
	if len(bs) != 3 || bs[0].Branch != "kndl/test" {
		t.Fatalf("branches %+v, want kndl/test first of three", bs)
	}
	for _, tt := range []struct{ budget, pulls, questions int }{
		{2, 1, 3}, // kndl/test's pull requests, its open one's checks and reviews: over the budget
		{4, 2, 4}, // and kndl/x's
		{0, 3, 5}, // every branch
	} {
		before := gh.Calls("pulls") + gh.Calls("check_runs") + gh.Calls("reviews")
		pulls := gh.Calls("pulls")
		tr.check(ctx, bs, tt.budget)
		if got, asked := gh.Calls("pulls")-pulls, gh.Calls("pulls")+gh.Calls("check_runs")+gh.Calls("reviews")-before; got != tt.pulls || asked != tt.questions {
			t.Errorf("a round of budget %d asked about %d branches in %d questions, want %d in %d", tt.budget, got, asked, tt.pulls, tt.questions)
		}
	}
}

// TestAWebhookHasABranchsPullRequestsReadAgainAtOnceAndOnce: told that a
// pushed branch's pull request changed, the Tracker asks GitHub about it
// again, within the gap after the push's check, once however many times
// it was told before the worker got to it, and its new checks and review
// show; told of a branch no Session pushed, or of the branch on another
// Repo, it asks GitHub nothing.
func TestAWebhookHasABranchsPullRequestsReadAgainAtOnceAndOnce(t *testing.T) {
	ctx := context.Background()
	gh, _, s, tr := trackedPushes(t, "kndl/test")
	tr.askDue(ctx, <-tr.soon) // the push's check: the gap starts
	gh.AddCheckRun(t, "acme/app", 1, "build", "completed", "failure")
	gh.AddReview(t, "acme/app", 1, "bob", "approved")
	questions := func() int { return gh.Calls("pulls") + gh.Calls("check_runs") + gh.Calls("reviews") }

	before := questions()
	for range 5 {
		tr.Reread(ctx, gh.RepoURL("acme/app"), "kndl/test")
	}
	select {
	case <-tr.poke: // as the worker takes it
	default:
		t.Fatal("webhooks for a pushed branch did not wake the worker")
	}
	tr.askStale(ctx)
	if n := questions() - before; n != 3 {
		t.Errorf("five webhooks for the pull request asked GitHub %d questions, want 3: its branch's pull requests, its checks and its reviews, once", n)
	}
	got, _ := tr.Branches(ctx, s.ID)
	if len(got) != 1 || len(got[0].Pulls) != 1 || got[0].Pulls[0].Checks != forge.ChecksFailing || got[0].Pulls[0].Review != forge.ReviewApproved {
		t.Errorf("branches %+v, want kndl/test's pull request failing and approved", got)
	}

	before = gh.Calls("any")
	tr.Reread(ctx, gh.RepoURL("acme/app"), "kndl/other")
	tr.Reread(ctx, gh.RepoURL("acme/fork"), "kndl/test")
	if len(tr.poke) != 0 {
		t.Error("a branch no Session pushed woke the worker")
	}
	tr.askStale(ctx)
	if n := gh.Calls("any") - before; n != 0 {
		t.Errorf("webhooks for pull requests no Session pushed asked GitHub %d times, want none", n)
	}
}
