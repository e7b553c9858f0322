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
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

func TestPushedBranchesReadsGitPushOutput(t *testing.T) {
	tests := []struct {
		name, out string
		want      []string
	}{
		{"a new branch", "To https://github.com/acme/app.git\n * [new branch]      kndl/test -> kndl/test\nbranch 'kndl/test' set up to track 'origin/kndl/test'.", []string{"kndl/test"}},
		{"a fast-forward and a forced update", "To https://github.com/acme/app.git\n   1a2b3c4..5d6e7f8  main -> main\n + 1a2b3c4...5d6e7f8 HEAD -> refs/heads/feat (forced update)\n", []string{"main", "feat"}},
		{"to another name", " * [new branch]      HEAD -> kndl/other", []string{"kndl/other"}},
		{"rejected, deleted, up to date", " ! [rejected]        main -> main (fetch first)\n - [deleted]         old\n = [up to date]      main -> main", nil},
		{"a tag", " * [new tag]         v1 -> v1", nil},
		{"not a branch name", " * [new branch]      x -> -rf\n * [new branch]      x -> a..b", nil},
		{"prose", "I ran git push: main -> main is how it reads", nil},
	}
	for _, tt := range tests {
		if got := PushedBranches(tt.out); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestATrackedPushShowsItsPullRequests: a push in a Session's tool output
// records its branch at once, with a link, and its pull requests once
// GitHub is asked, each change told to the Session's watchers and the new
// pull request told as opened, once; failed tool output records nothing.
func TestATrackedPushShowsItsPullRequests(t *testing.T) {
	ctx := context.Background()
	gh, c := pushedWithPull(t)
	st, s := sessionOf(t, gh.RepoURL("acme/app"))
	var mu sync.Mutex
	changed := 0
	var titles []string
	var opened []int
	tr := New(Options{Store: st, GitHub: c, WebURL: gh.URL, Changed: func(id string) {
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
	}, Opened: func(_ context.Context, id string, p github.Pull) {
		mu.Lock()
		defer mu.Unlock()
		if id == s.ID {
			opened = append(opened, p.Number)
		}
	}})
	defer tr.Close()

	tr.Pushed(ctx, s.ID, []protocol.Event{{Kind: protocol.EventToolResult, IsError: true, Text: " * [new branch]      kndl/failed -> kndl/failed"}})
	tr.Pushed(ctx, s.ID, []protocol.Event{{Kind: protocol.EventToolResult, Text: committed(t, c, "kndl/test")}})
	tr.Pushed(ctx, s.ID, []protocol.Event{{Kind: protocol.EventToolResult, Text: "To " + gh.RepoURL("acme/app") + "\n * [new branch]      kndl/test -> kndl/test"}})
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
	if err := tr.Opened(ctx, s.ID, "kndl/test", github.Pull{Number: 2, Title: "From the view", State: "open"}); err != nil {
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
	push := exec.Command("git", "-C", src, "push", "-q", strings.Replace(gh.RepoURL("acme/app"), "://", "://x-access-token:"+tok.Value+"@", 1),
		"HEAD:refs/heads/kndl/test", "HEAD:refs/heads/kndl/x", "HEAD:refs/heads/kndl/y")
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("push: %v %s", err, out)
	}
	if status := gh.OpenPull(t, "acme/app", tok.Value, "kndl/test", "Add the thing"); status != http.StatusCreated {
		t.Fatalf("open a pull request: %d", status)
	}
	return gh, c
}

// trackedPushes is pushedWithPull's GitHub, a Session of its acme/app,
// and a Tracker without its worker that saw the Session commit the
// branches' head and push them (output), and verified that on GitHub.
func trackedPushes(t *testing.T, output string) (*testkit.GitHub, *store.Store, store.Session, *Tracker) {
	gh, c := pushedWithPull(t)
	st, s := sessionOf(t, gh.RepoURL("acme/app"))
	tr := newTracker(Options{Store: st, GitHub: c, WebURL: gh.URL, Changed: func(string) {}})
	tr.Pushed(context.Background(), s.ID, []protocol.Event{{Kind: protocol.EventToolResult, Text: committed(t, c, "kndl/test") + output}})
	tr.verify(context.Background(), s.ID)
	return gh, st, s, tr
}

// committed is git commit's summary line for the commit branch of
// acme/app is at on GitHub, as a Session that made it prints it.
func committed(t *testing.T, c *github.Client, branch string) string {
	t.Helper()
	head, err := c.BranchHead(context.Background(), "acme", "app", branch)
	if err != nil {
		t.Fatal(err)
	}
	return "[" + branch + " " + head[:7] + "] x\n 1 file changed\n"
}

// sessionOf opens a store with a Session of the Repo at repoURL.
func sessionOf(t *testing.T, repoURL string) (*store.Store, store.Session) {
	t.Helper()
	ctx := context.Background()
	st := storetest.Open(t)
	dev, _ := st.DevUser(ctx)
	rn, _, _ := st.CreateRunner(ctx, "r", dev.ID)
	repo, _ := st.EnsureRepo(ctx, repoURL, "acme/app")
	s, err := st.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: rn.ID})
	if err != nil {
		t.Fatal(err)
	}
	return st, s
}

// TestASandboxsPushLinesRecordAtMostMaxBranchesAndAskGitHubOncePerGap:
// 5,000 push lines a Sandbox printed, twice over, record MaxBranches
// branches, logged once, and ask GitHub about each once, not again for the
// pushes seen within the gap (DefaultGap); with GitHub failing, fifty pushes of one
// branch ask it once.
func TestASandboxsPushLinesRecordAtMostMaxBranchesAndAskGitHubOncePerGap(t *testing.T) {
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
	tr := newTracker(Options{Store: st, GitHub: c, WebURL: gh.URL, Changed: func(string) {}, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	push := func(id, text string) {
		tr.Pushed(ctx, id, []protocol.Event{{Kind: protocol.EventToolResult, Text: text}})
		for len(tr.soon) > 0 {
			tr.askDue(ctx, <-tr.soon)
		}
	}

	var lines strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&lines, " * [new branch]      HEAD -> kndl/b%d\n", i)
	}
	out := lines.String()
	for range 2 {
		for chunk := range slices.Chunk(strings.SplitAfter(out, "\n"), 500) {
			push(s.ID, strings.Join(chunk, ""))
		}
	}
	// None is on GitHub: each is a claim, dropped once GitHub says so.
	tr.mu.Lock()
	claims := len(tr.claims[s.ID])
	_, first := tr.claims[s.ID]["kndl/b0"]
	tr.mu.Unlock()
	if claims != MaxBranches || !first {
		t.Errorf("kept %d claims (kndl/b0 among them: %v), want the first %d", claims, first, MaxBranches)
	}
	if n, pulls := gh.Calls("refs"), gh.Calls("pulls"); n != MaxBranches || pulls != 0 {
		t.Errorf("GitHub was asked for %d heads and %d branches' pull requests, want a head once for each of the %d branches, and no pull requests of a branch not shown", n, pulls, MaxBranches)
	}
	if n := strings.Count(log.String(), "more branches than the Hub keeps"); n != 1 {
		t.Errorf("the cap is in the log %d times, want once:\n%s", n, log.String())
	}

	s2, err := st.CreateSession(ctx, store.Session{RepoID: s.RepoID, CreatorID: s.CreatorID, RunnerID: s.RunnerID})
	if err != nil {
		t.Fatal(err)
	}
	gh.SetDown(true)
	asked := gh.Calls("any")
	for range 50 {
		push(s2.ID, " * [new branch]      HEAD -> kndl/down")
	}
	if n := gh.Calls("any") - asked; n != 1 {
		t.Errorf("fifty pushes with GitHub down asked it %d times, want once", n)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// BenchmarkPushedBranches reads a 64 KiB tool output with one push in it:
// every tool result of every Session passes here on its way to the store.
func BenchmarkPushedBranches(b *testing.B) {
	out := strings.Repeat("compiling kndl.dev/kndl/internal/hub -> ok 0.42s\n", 1300) + " * [new branch]      kndl/test -> kndl/test\n"
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		if len(PushedBranches(out)) != 1 {
			b.Fatal("no branch")
		}
	}
}

// TestAPullRequestsChecksAndReviewShowOnItsBranch: an open pull request
// shows its head commit's checks in a word (a failing run failing however
// many pass, one running pending, all passed passing) and its review
// decision (an approval approved, a later request for changes by another
// reviewer changes requested), each question to GitHub once a check of
// the branch; a merged one keeps what was last read, asking no more.
func TestAPullRequestsChecksAndReviewShowOnItsBranch(t *testing.T) {
	ctx := context.Background()
	gh, st, s, tr := trackedPushes(t, " * [new branch]      kndl/test -> kndl/test")
	checked := func() api.Pull {
		t.Helper()
		bs, _ := st.SessionBranches(ctx, s.ID)
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
	if p := checked(); p.Checks != github.ChecksFailing || p.Review != github.ReviewApproved {
		t.Errorf("a failing build and bob's approval: checks %q, review %q, want failing, approved", p.Checks, p.Review)
	}
	gh.AddCheckRun(t, "acme/app", 1, "build", "in_progress", "")
	if p := checked(); p.Checks != github.ChecksPending {
		t.Errorf("the build run again: checks %q, want pending", p.Checks)
	}
	gh.AddCheckRun(t, "acme/app", 1, "build", "completed", "success")
	gh.AddReview(t, "acme/app", 1, "carol", "changes_requested")
	if p := checked(); p.Checks != github.ChecksPassing || p.Review != github.ReviewChangesRequested {
		t.Errorf("the build passed, carol requests changes: checks %q, review %q, want passing, changes_requested", p.Checks, p.Review)
	}
	if runs, reviews := gh.Calls("check_runs"), gh.Calls("reviews"); runs != 4 || reviews != 4 {
		t.Errorf("GitHub was asked for checks %d and reviews %d times, want once each a check of the branch (4)", runs, reviews)
	}

	gh.MergePull("acme/app", 1)
	if p := checked(); p.Status() != "merged" || p.Checks != github.ChecksPassing || p.Review != github.ReviewChangesRequested {
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
	gh, st, s, tr := trackedPushes(t, " * [new branch]      kndl/test -> kndl/test\n * [new branch]      kndl/x -> kndl/x\n * [new branch]      kndl/y -> kndl/y")
	bs, _ := st.SessionBranches(ctx, s.ID)
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
	gh, _, s, tr := trackedPushes(t, " * [new branch]      kndl/test -> kndl/test")
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
	if len(got) != 1 || len(got[0].Pulls) != 1 || got[0].Pulls[0].Checks != github.ChecksFailing || got[0].Pulls[0].Review != github.ReviewApproved {
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

// TestABranchIsTheFirstSessionGitHubShowsPushedItAndNeverMoves: a push
// line is a claim until GitHub's ref (the fake's refs API) shows the
// branch at a commit the Session named. Another Session's fake lines, one
// naming a commit the branch is not at or a branch GitHub does not have,
// record nothing; the Session that made the commit holds the branch, and
// a later fake line naming the branch's real head, verified on GitHub,
// still moves it to no other Session: its pull request's checks and
// reviews go to the first.
func TestABranchIsTheFirstSessionGitHubShowsPushedItAndNeverMoves(t *testing.T) {
	ctx := context.Background()
	gh, c := pushedWithPull(t)
	st, a := sessionOf(t, gh.RepoURL("acme/app"))
	b, err := st.CreateSession(ctx, store.Session{RepoID: a.RepoID, CreatorID: a.CreatorID, RunnerID: a.RunnerID})
	if err != nil {
		t.Fatal(err)
	}
	// A gap of a nanosecond: each claim is asked about at each push.
	tr := newTracker(Options{Store: st, GitHub: c, WebURL: gh.URL, Changed: func(string) {}, Gap: time.Nanosecond})
	head, err := c.BranchHead(ctx, "acme", "app", "kndl/test")
	if err != nil {
		t.Fatal(err)
	}
	push := func(id, text string) {
		t.Helper()
		tr.Pushed(ctx, id, []protocol.Event{{Kind: protocol.EventToolResult, Text: text}})
		tr.verify(ctx, id)
	}
	holders := func(branch string) []string {
		t.Helper()
		bs, err := st.BranchSessions(ctx, branch)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range bs {
			out = append(out, map[string]string{a.ID: "A", b.ID: "B"}[x.SessionID])
		}
		return out
	}

	for _, tt := range []struct{ name, text string }{
		{"a commit the branch is not at", "   1a2b3c4..5d6e7f8  kndl/test -> kndl/test"},
		{"a new branch with no commit of its own", " * [new branch]      kndl/test -> kndl/test"},
		{"a branch GitHub does not have", "[kndl/none 5d6e7f8] x\n * [new branch]      kndl/none -> kndl/none"},
	} {
		push(b.ID, tt.text)
		if got := holders("kndl/test"); len(got) != 0 {
			t.Fatalf("after B's fake line (%s), kndl/test is held by %v, want no one", tt.name, got)
		}
	}
	if bs, _ := st.SessionBranches(ctx, b.ID); len(bs) != 0 {
		t.Fatalf("B's fake lines recorded %+v, want nothing", bs)
	}

	push(a.ID, committed(t, c, "kndl/test")+"To "+gh.RepoURL("acme/app")+"\n * [new branch]      kndl/test -> kndl/test")
	if got := holders("kndl/test"); !slices.Equal(got, []string{"A"}) {
		t.Fatalf("after A's push, kndl/test is held by %v, want A, whose commit GitHub shows", got)
	}
	push(b.ID, "   1a2b3c4.."+head[:7]+"  kndl/test -> kndl/test")
	push(b.ID, "[kndl/test "+head[:7]+"] x\n * [new branch]      kndl/test -> kndl/test")
	if got := holders("kndl/test"); !slices.Equal(got, []string{"A"}) {
		t.Errorf("after B's fake lines naming the branch's real head, kndl/test is held by %v, want A still", got)
	}
	if bs, _ := st.SessionBranches(ctx, b.ID); len(bs) != 0 {
		t.Errorf("B holds %+v, want nothing", bs)
	}
	if gh.Calls("refs") == 0 {
		t.Error("GitHub's refs API was never asked")
	}
}
