package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// attemptCode is what the scripted model writes in each attempt of the
// set, by place: answer.sh, one, two and three lines long; the third
// alone prints what the check wants.
var attemptCode = []string{
	`printf 'echo 41\n'`,
	`printf '# a sum\necho $((20 + 20))\n'`,
	`printf '# the answer\n# to everything\necho $((6 * 7))\n'`,
}

// TestAnAttemptSetRanksTheOneWhoseCheckPassedFirstAndKeepOpensItsPull:
// an attempt set of 3 on a Repo whose Environment names a check; the
// scripted model writes different code in each, and only the third
// attempt's passes the check, though its diff is the largest. The API
// and the set's page rank it first, then the others by the smaller diff;
// keeping it puts the others to sleep, and its pull request opens on the
// fake GitHub from the branch it pushed, which the set then shows; keeping
// it again with the page's other choice archives the others.
func TestAnAttemptSetRanksTheOneWhoseCheckPassedFirstAndKeepOpensItsPull(t *testing.T) {
	t.Parallel()
	s := Start(t, WithSandboxGitHub(time.Minute))
	repo := s.GitHubRepo("acme/app")
	const check = `test "$(sh answer.sh)" = 42`
	if out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--check", check); code != 0 {
		t.Fatalf("kndl env edit --check: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 {
		t.Fatalf("kndl env apply: exit %d\n%s\n%s", code, out, errOut)
	}

	// Every attempt gets the same prompt: the model first asks which
	// Session it is in, then writes its place's code, commits it and
	// pushes the Session's own branch. Until the set's Sessions are known
	// the code's rules hold the model's answer back.
	var ids []string
	known := make(chan struct{})
	s.Model.On(testkit.PromptContains("make answer.sh print 42"), testkit.Bash("echo attempt $KNDL_SESSION_ID"))
	for i, code := range attemptCode {
		s.Model.On(func(r *testkit.Request) bool {
			select {
			case <-known:
			case <-time.After(testenv.WaitMedium):
				return false
			}
			return testkit.ToolResultContains("attempt " + ids[i])(r)
		}, testkit.Bash(code+" > answer.sh && git add answer.sh && "+pushScript))
	}
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Done."))
	var set api.AttemptSet
	if code := s.Do(http.MethodPost, "/api/attempts", api.NewAttempts{NewSession: api.NewSession{Repo: repo, Prompt: "make answer.sh print 42"}, Attempts: 3}, &set); code != http.StatusCreated {
		t.Fatalf("new attempt set: got %d, want 201", code)
	}
	for _, a := range set.Attempts {
		ids = append(ids, a.Session.ID)
	}
	close(known)
	if len(ids) != 3 || set.Check != check {
		t.Fatalf("the attempt set: got %+v, want 3 attempts and the check %q", set, check)
	}

	// Each attempt's first Turn ends, then its check runs in its Sandbox.
	testenv.EventuallyShowing(t, testenv.WaitBuild, func() bool {
		s.Do(http.MethodGet, "/api/attempts/"+set.ID, nil, &set)
		return !slices.ContainsFunc(set.Attempts, func(a api.Attempt) bool { return a.Check == nil })
	}, func() string { return fmt.Sprintf("got the set %+v, want every attempt's check run", set) })
	var places, diffs []int
	var passed []bool
	for _, a := range set.Attempts {
		places, diffs, passed = append(places, a.Place), append(diffs, a.DiffLines), append(passed, a.Check.Passed)
	}
	if !slices.Equal(places, []int{3, 1, 2}) || !slices.Equal(diffs, []int{3, 1, 2}) || !slices.Equal(passed, []bool{true, false, false}) {
		t.Fatalf("the ranking: got places %v, diff lines %v, passed %v; want the third (3 lines, passed) first, then the first and second by diff\n%+v", places, diffs, passed, set)
	}
	if c := set.Attempts[1].Check; c.ExitCode != 1 || c.Error != "" {
		t.Errorf("a failed check: got %+v, want exit 1 as the Runner saw it", c)
	}

	// The set's page, as the Creator gets it, in the same order.
	page := pageHTML(t, s, "/attempts/"+set.ID)
	at := func(id string) int { return strings.Index(page, `<tr data-id="`+id+`">`) }
	if first, second, third := at(ids[2]), at(ids[0]), at(ids[1]); first < 0 || !(first < second && second < third) || !strings.Contains(page, "passed in") {
		t.Fatalf("the set's page ranks rows at %d, %d, %d, want the third attempt first, its check passed:\n%s", first, second, third, page)
	}

	// Keep this one: the others sleep; its pull request opens from its
	// view (the API its button calls), from the branch it pushed.
	kept := ids[2]
	if code := s.Do(http.MethodPost, "/api/attempts/"+set.ID+"/keep", api.KeepAttempt{SessionID: kept, Others: "sleep"}, &set); code != http.StatusOK {
		t.Fatalf("keep: got %d, want 200", code)
	}
	for _, id := range ids[:2] {
		s.waitState(id, api.Asleep)
	}
	var pull api.Pull
	if code := s.Do(http.MethodPost, "/api/sessions/"+kept+"/pulls", api.NewPull{Branch: ownBranch(kept), Title: "Answer 42"}, &pull); code != http.StatusCreated {
		t.Fatalf("open the kept attempt's pull request: got %d, want 201", code)
	}
	if got := s.GitHub.Pulls("acme/app"); len(got) != 1 || got[0].Head != ownBranch(kept) || got[0].Base != "main" || got[0].Title != "Answer 42" {
		t.Fatalf("the fake GitHub's pull requests: got %+v, want one from %s into main", got, ownBranch(kept))
	}
	s.Do(http.MethodGet, "/api/attempts/"+set.ID, nil, &set)
	if a := set.Attempts[0]; a.Session.ID != kept || a.Session.Pull == nil || a.Session.Pull.Number != pull.Number || a.Session.State == api.Asleep {
		t.Errorf("the set after keeping: got its first %+v, want the kept attempt, awake, with pull request #%d", a.Session, pull.Number)
	}

	// The page's other choice, archive the rest (its button's call): the
	// others are archived, their disks and Workspace kept on the Runner,
	// and the kept one goes on awake.
	keep := `data-action="keep" data-set="` + set.ID + `" data-id="` + kept + `" data-others="`
	if page := pageHTML(t, s, "/attempts/"+set.ID); !strings.Contains(page, keep+`sleep"`) || !strings.Contains(page, keep+`archive"`) {
		t.Fatalf("the set's page offers no sleep and archive choices to keep %s:\n%s", kept, page)
	}
	if code := s.Do(http.MethodPost, "/api/attempts/"+set.ID+"/keep", api.KeepAttempt{SessionID: kept, Others: "archive"}, &set); code != http.StatusOK {
		t.Fatalf("keep, archiving the rest: got %d, want 200", code)
	}
	for _, a := range set.Attempts {
		archived := a.Session.State == api.Archived && !a.Session.ArchivedAt.IsZero()
		if _, err := os.Stat(filepath.Join(s.Home, "sessions", a.Session.ID, "archived")); archived != (a.Session.ID != kept) || (err == nil) != archived {
			t.Errorf("attempt %s after archiving the rest: %s, archived at %v, the Runner's mark %v; want the others archived, the kept one %s awake", a.Session.ID, a.Session.State, a.Session.ArchivedAt, err, kept)
		}
	}
}
