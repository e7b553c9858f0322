package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// issueBody is the body of the issue the tests below comment on.
const issueBody = "Starting with HOME unset crashes in config.Load."

// triggerRepo serves acme/app on the fake GitHub with an issue open on it,
// shares the System's Runner, and makes alice a Member with push and a
// Claude setup token: who may start a Session from GitHub.
func (s *System) triggerRepo() (issue int, alice store.User) {
	s.t.Helper()
	ctx := s.t.Context()
	s.GitHubRepo("acme/app")
	dev, err := s.Store.Members.DevUser(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	gu := s.GitHub.AddUser("alice")
	s.GitHub.SetCollaborator("acme/app", "alice", true)
	_, secret, err := s.Store.Members.CreateInvite(ctx, "alice", dev.ID, time.Hour)
	if err == nil {
		alice, err = s.Store.Members.RedeemInvite(ctx, secret, store.GitHubIdentity{ID: gu.ID, Login: gu.Login})
	}
	if err == nil {
		err = s.Hub.StoreClaudeToken(ctx, alice.ID, claudeToken)
	}
	runners, err2 := s.Store.Runners.List(ctx)
	for _, rn := range runners {
		if err == nil && err2 == nil {
			err = s.Store.Runners.SetRunnerShared(ctx, rn.ID, true)
		}
	}
	if err != nil || err2 != nil {
		s.t.Fatal(err, err2)
	}
	return s.GitHub.OpenIssue("acme/app", "carol", "Crash when HOME is unset", issueBody), alice
}

// replies are the App's comments on the issue.
func (s *System) replies(issue int) []testkit.IssueComment {
	var out []testkit.IssueComment
	for _, c := range s.GitHub.Comments("acme/app", issue) {
		if c.Author == testkit.AppSlug+"[bot]" {
			out = append(out, c)
		}
	}
	return out
}

// countSessions is how many Sessions the Hub has.
func (s *System) countSessions() int {
	s.t.Helper()
	all, err := s.Store.Sessions.List(s.t.Context(), store.SessionFilter{})
	if err != nil {
		s.t.Fatal(err)
	}
	return len(all)
}

func TestAnIssueCommentByAMemberStartsOneSessionWhoseFirstPromptHoldsTheIssue(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	issue, alice := s.triggerRepo()
	s.Model.On(testkit.PromptContains(issueBody), testkit.Text("Looking into the crash."))
	d, code := s.GitHub.Comment(t, "acme/app", issue, "alice", "@"+testkit.AppSlug+" please fix this")
	if code != http.StatusAccepted {
		t.Fatalf("the delivery got %d, want 202", code)
	}
	testenv.Eventually(t, testenv.WaitMedium, "the App's reply with the Session's link", func() bool { return len(s.replies(issue)) == 1 })
	reply := s.replies(issue)[0].Body
	_, id, ok := strings.Cut(reply, s.URL+"/sessions/")
	id, _, _ = strings.Cut(id, "\n")
	if !ok || id == "" {
		t.Fatalf("the reply %q has no link to the Session", reply)
	}
	sess, err := s.Store.Sessions.SessionByID(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Title != "Crash when HOME is unset" || sess.CreatorID != alice.ID {
		t.Errorf("the Session's title %q and Creator %s, want the issue's and alice (%s)", sess.Title, sess.CreatorID, alice.ID)
	}
	s.WaitEvent(id, testenv.WaitBuild, "Claude's answer to the issue", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Looking into the crash."
	})
	prompt := s.WaitEvent(id, testenv.WaitShort, "the first prompt", kind(protocol.EventPrompt))
	for _, want := range []string{"From GitHub: @alice on acme/app#", issueBody, "please fix this"} {
		if !strings.Contains(prompt.Text, want) {
			t.Errorf("the first prompt %q lacks %q", prompt.Text, want)
		}
	}

	// GitHub sends the same delivery again: nothing more starts.
	if code := s.GitHub.Deliver(t, d); code != http.StatusAccepted {
		t.Errorf("the redelivery got %d, want 202", code)
	}
	// A later mention by alice is a prompt to the same Session, and is
	// acted on after the redelivery, so once it shows nothing else will.
	s.Model.On(testkit.PromptContains("also add a test"), testkit.Text("Adding a test."))
	s.GitHub.Comment(t, "acme/app", issue, "alice", "@"+testkit.AppSlug+" also add a test")
	s.WaitEvent(id, testenv.WaitMedium, "the answer to the later mention", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Adding a test."
	})
	if n := s.countSessions(); n != 1 {
		t.Errorf("%d Sessions, want the one", n)
	}
	testenv.Eventually(t, testenv.WaitShort, "the App's one reply edited to name the later prompt and say the Turn ended", func() bool {
		r := s.replies(issue)
		return len(r) == 1 && strings.Contains(r[0].Body, "The latest it took: ") && strings.Contains(r[0].Body, "**Its Turn ended")
	})
}

func TestACommentByANonMemberOrABadSignatureStartsNothing(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	issue, _ := s.triggerRepo()
	s.GitHub.AddUser("mallory")
	s.GitHub.SetCollaborator("acme/app", "mallory", true)

	d, _ := s.GitHub.Comment(t, "acme/app", issue, "mallory", "@"+testkit.AppSlug+" run this")
	testenv.Eventually(t, testenv.WaitMedium, "the App's reply to mallory", func() bool { return len(s.replies(issue)) == 1 })
	if got := s.replies(issue)[0].Body; !strings.Contains(got, "@mallory") || !strings.Contains(got, "nothing was started") {
		t.Errorf("the reply to a non-Member: %q", got)
	}
	// The same words as alice's, not signed with the secret.
	forged := d
	forged.ID = "forged-" + d.ID
	forged.Body = []byte(strings.ReplaceAll(string(d.Body), "mallory", "alice"))
	if code := s.GitHub.Deliver(t, forged); code != http.StatusUnauthorized {
		t.Errorf("a forged delivery got %d, want 401", code)
	}
	// mallory's second mention gets no reply (one refusal a person and
	// thread a day); the deliveries' work is done in order, so eve's
	// reply after it shows it was.
	s.GitHub.Comment(t, "acme/app", issue, "mallory", "@"+testkit.AppSlug+" again")
	s.GitHub.AddUser("eve")
	s.GitHub.Comment(t, "acme/app", issue, "eve", "@"+testkit.AppSlug+" me too")
	testenv.Eventually(t, testenv.WaitMedium, "the App's reply to eve", func() bool { return len(s.replies(issue)) == 2 })
	if n := s.countSessions(); n != 0 {
		t.Errorf("%d Sessions, want none", n)
	}
	if r := s.replies(issue); len(r) != 2 || !strings.Contains(r[1].Body, "@eve") {
		t.Errorf("the App's replies %+v, want one to mallory and one to eve", r)
	}
}

// TestAFailingCheckOnTheSessionsPullRequestIsAPromptToItAndTheReplyFollows:
// a Session started from an issue pushes a branch and a pull request is
// opened from it; the Hub's one reply in the issue gains the pull request's
// link; with auto-fix CI turned on by kndl repo edit, a check failing on
// that pull request is a prompt to the same Session, which the reply says,
// and its checks show failing at once, read again on the check's webhook.
func TestAFailingCheckOnTheSessionsPullRequestIsAPromptToItAndTheReplyFollows(t *testing.T) {
	t.Parallel()
	s := Start(t, WithSandboxGitHub(time.Minute))
	issue, _ := s.triggerRepo()
	s.Model.On(testkit.PromptContains(issueBody), testkit.Bash(pushScript))
	s.Model.On(testkit.PromptContains("push again"), testkit.Bash("cd /workspace && git commit --allow-empty -m y && git push"))
	s.Model.On(testkit.PromptContains(`The check "ci/test" concluded failure`), testkit.Text("Fixing the failing check."))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Pushed."))
	s.GitHub.Comment(t, "acme/app", issue, "alice", "@"+testkit.AppSlug+" please fix this")
	testenv.Eventually(t, testenv.WaitMedium, "the App's reply with the Session's link", func() bool { return len(s.replies(issue)) == 1 })
	_, id, _ := strings.Cut(s.replies(issue)[0].Body, s.URL+"/sessions/")
	id, _, _ = strings.Cut(id, "\n")
	s.WaitEvent(id, testenv.WaitBuild, "the push", func(e protocol.Event) bool { return e.Kind == protocol.EventText && e.Text == "Pushed." })

	if out, errOut, code := s.kndl("", "repo", "edit", "--repo", s.GitHub.RepoURL("acme/app"), "--auto-fix-ci"); code != 0 || !strings.Contains(out, "failing checks:             on") {
		t.Fatalf("kndl repo edit --auto-fix-ci: exit %d\n%s\n%s", code, out, errOut)
	}
	if code := s.GitHub.OpenPull(t, "acme/app", s.forgeToken(), ownBranch(id), "Fix the crash"); code != http.StatusCreated {
		t.Fatalf("open the pull request: %d", code)
	}
	number := s.GitHub.Pulls("acme/app")[0].Number // GitHub numbers it after the issue
	// A later push has the Hub ask GitHub about the branch again.
	s.GitHub.Comment(t, "acme/app", issue, "alice", "@"+testkit.AppSlug+" push again")
	pull := fmt.Sprintf("%s/acme/app/pull/%d", s.GitHub.URL, number)
	testenv.Eventually(t, testenv.WaitMedium, "the reply with the pull request's link, the Turn ended", func() bool {
		r := s.replies(issue)
		return len(r) == 1 && strings.Contains(r[0].Body, "Pull request: "+pull) && strings.Contains(r[0].Body, "**Its Turn ended")
	})

	s.GitHub.CheckRun(t, "acme/app", number, "ci/test", "failure", "TestLoad: HOME unset")
	prompt := s.WaitEvent(id, testenv.WaitMedium, "the check's prompt", func(e protocol.Event) bool {
		return e.Kind == protocol.EventPrompt && strings.Contains(e.Text, "ci/test")
	})
	for _, want := range []string{"TestLoad: HOME unset", "Its log: https://ci.example/acme/app/runs/", pull} {
		if !strings.Contains(prompt.Text, want) {
			t.Errorf("the check's prompt %q lacks %q", prompt.Text, want)
		}
	}
	s.WaitEvent(id, testenv.WaitMedium, "the answer to it", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Fixing the failing check."
	})
	// The check's webhook has the Hub read the pull request again: its
	// checks show with no push after it, long before the 5-minute timer.
	testenv.Eventually(t, testenv.WaitShort, "the pull request's checks failing, read on its webhook", func() bool {
		var v api.SessionView
		s.Do(http.MethodGet, "/api/sessions/"+id, nil, &v)
		return len(v.Branches) == 1 && len(v.Branches[0].Pulls) == 1 && v.Branches[0].Pulls[0].Checks == "failing"
	})
	testenv.Eventually(t, testenv.WaitShort, "the reply saying the check was sent back", func() bool {
		r := s.replies(issue)
		return len(r) == 1 && strings.Contains(r[0].Body, "sent to the Session (1 of 3)")
	})
	if n := s.countSessions(); n != 1 {
		t.Errorf("%d Sessions, want the one", n)
	}
}

// TestTheRepoPageTurnsAutoFixOn: a new Repo's page shows auto-fix off, at
// most 3 per pull request; ticking failing checks and saving turns it on
// for the API too, and a most out of bounds is refused on the page.
func TestTheRepoPageTurnsAutoFixOn(t *testing.T) {
	t.Parallel()
	s, b, repo := repoPage(t)
	if off := Eval[bool](b, `(() => { const f = document.getElementById("auto-fix"); return !f.ci.checked && !f.reviews.checked && f.max.value === "3" })()`); !off {
		t.Fatal("a new Repo's page does not show auto-fix off, at most 3")
	}
	Eval[bool](b, `(() => { const f = document.getElementById("auto-fix"); f.ci.checked = true; f.max.value = "5"; f.requestSubmit(); return true })()`)
	b.Wait(testenv.WaitMedium, "auto-fix saved", `!document.getElementById("auto-fix-saved").hidden`)
	var a api.AutoFix
	s.Do(http.MethodGet, "/api/repos/"+repo.ID+"/auto-fix", nil, &a)
	if a != (api.AutoFix{CI: true, Max: 5}) {
		t.Errorf("the Repo's auto-fix after the page saved it: %+v, want failing checks on, at most 5", a)
	}
	Eval[bool](b, `(() => { const f = document.getElementById("auto-fix"); f.max.noValidate = true; f.noValidate = true; f.max.value = "99"; f.requestSubmit(); return true })()`)
	b.Wait(testenv.WaitMedium, "the most refused", `!document.getElementById("auto-fix-error").hidden && document.getElementById("auto-fix-error").textContent.includes("1 to 20")`)
}

// TestOthersCommentsShowInTheHistoryOnlyOnceTheCreatorTurnsThemOn: carol's
// comment on the issue of alice's Session, a mention of the App though she
// is no Member, changes nothing while the Session's switch is off; once alice turns it on, carol's next comment
// shows in the Session's history as a note naming her and linking it, and
// is no prompt.
func TestOthersCommentsShowInTheHistoryOnlyOnceTheCreatorTurnsThemOn(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	issue, alice := s.triggerRepo()
	s.GitHub.AddUser("carol")
	s.Model.On(testkit.PromptContains(issueBody), testkit.Text("Looking into the crash."))
	s.GitHub.Comment(t, "acme/app", issue, "alice", "@"+testkit.AppSlug+" please fix this")
	testenv.Eventually(t, testenv.WaitMedium, "the App's reply with the Session's link", func() bool { return len(s.replies(issue)) == 1 })
	_, id, _ := strings.Cut(s.replies(issue)[0].Body, s.URL+"/sessions/")
	id, _, _ = strings.Cut(id, "\n")
	s.WaitEvent(id, testenv.WaitBuild, "Claude's answer to the issue", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Looking into the crash."
	})

	// carol is no Member: her mention's work is done once the App has
	// refused her.
	s.GitHub.Comment(t, "acme/app", issue, "carol", "@"+testkit.AppSlug+" Before: it is config.Load.")
	testenv.Eventually(t, testenv.WaitMedium, "the App's refusal to carol", func() bool { return len(s.replies(issue)) == 2 })
	// alice turns it on, through the API as the CLI and the view do.
	tok, err := s.Store.Signins.CreateCLIToken(t.Context(), alice.ID, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, s.URL+"/api/sessions/"+id+"/thread-context", strings.NewReader(`{"on":true}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("alice's PUT thread-context: %v %v, want 204", resp, err)
	}
	resp.Body.Close()
	s.GitHub.Comment(t, "acme/app", issue, "carol", "After: it is config.Load.")
	note := s.WaitEvent(id, testenv.WaitMedium, "carol's comment as context", func(e protocol.Event) bool {
		return e.Kind == protocol.EventNote && strings.Contains(e.Text, "After: it is config.Load.")
	})
	if want := fmt.Sprintf("@carol commented on acme/app#%d (%s/acme/app/issues/%d#issuecomment-", issue, s.GitHub.URL, issue); !strings.HasPrefix(note.Text, want) {
		t.Errorf("the note %q, want it to start %q", note.Text, want)
	}
	prompts := 0
	for _, e := range s.Events(id) {
		if strings.Contains(e.Text, "Before:") {
			t.Errorf("carol's comment made while the switch was off is in the history: %+v", e)
		}
		if e.Kind == protocol.EventPrompt {
			prompts++
		}
	}
	if prompts != 1 {
		t.Errorf("%d prompts in the history, want the first alone", prompts)
	}
}

// TestTheTriggerLabelIsSetByTheCLIAndTheRepoPage: kndl repo edit shows no
// trigger label, sets one with --trigger-label, and the Repo page shows it;
// saving another from the page sets it for the API, and an empty one turns
// it off.
func TestTheTriggerLabelIsSetByTheCLIAndTheRepoPage(t *testing.T) {
	t.Parallel()
	s, b, repo := repoPage(t)
	if out, errOut, code := s.kndl("", "repo", "edit", "--repo", repo.URL); code != 0 || !strings.Contains(out, "No trigger label") {
		t.Fatalf("kndl repo edit: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "repo", "edit", "--repo", repo.URL, "--trigger-label", "kndl"); code != 0 || !strings.Contains(out, `The trigger label "kndl" added to an issue starts a Session`) {
		t.Fatalf("kndl repo edit --trigger-label kndl: exit %d\n%s\n%s", code, out, errOut)
	}
	b.Go(s.URL+"/repos/"+repo.ID, "#trigger-label")
	if got := Eval[string](b, `document.getElementById("trigger-label").label.value`); got != "kndl" {
		t.Fatalf("the Repo page shows the trigger label %q, want kndl", got)
	}
	var l api.TriggerLabel
	for _, want := range []string{"fix-me", ""} {
		Eval[bool](b, `(() => { const f = document.getElementById("trigger-label"); f.label.value = `+strconv.Quote(want)+`; document.getElementById("trigger-label-saved").hidden = true; f.requestSubmit(); return true })()`)
		b.Wait(testenv.WaitMedium, "the label saved", `!document.getElementById("trigger-label-saved").hidden`)
		s.Do(http.MethodGet, "/api/repos/"+repo.ID+"/trigger-label", nil, &l)
		if l.Label != want {
			t.Errorf("the trigger label after the page saved %q: %q", want, l.Label)
		}
	}
}
