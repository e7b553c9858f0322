package e2e

import (
	"net/http"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestATriggeredSessionPastItsRepositorysTurnLimitSleepsAndTheThreadIsTold:
// with the Repo's limit at one Turn, alice's later mention is queued but
// never typed: the Session sleeps, its history and the App's reply in the
// thread name the limit and the way on.
func TestATriggeredSessionPastItsRepositorysTurnLimitSleepsAndTheThreadIsTold(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	issue, _ := s.triggerRepo()
	repo, err := s.Store.Repos.EnsureRepo(t.Context(), s.GitHub.RepoURL("acme/app"), "app")
	if err == nil {
		err = s.Store.Repos.SetRepoLimits(t.Context(), repo.ID, store.RepoLimits{MaxTurns: 1, MaxTurnHours: 2})
	}
	if err != nil {
		t.Fatal(err)
	}
	s.Model.On(testkit.PromptContains(issueBody), testkit.Text("Looking into the crash."))
	if _, code := s.GitHub.Comment(t, "acme/app", issue, "alice", "@"+testkit.AppSlug+" please fix this"); code != http.StatusAccepted {
		t.Fatalf("the delivery got %d, want 202", code)
	}
	testenv.Eventually(t, testenv.WaitMedium, "the App's reply", func() bool { return len(s.replies(issue)) == 1 })
	_, id, _ := strings.Cut(s.replies(issue)[0].Body, s.URL+"/sessions/")
	id, _, _ = strings.Cut(id, "\n")
	s.WaitEvent(id, testenv.WaitBuild, "Claude's answer", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Looking into the crash."
	})
	s.WaitEvent(id, testenv.WaitMedium, "the first Turn's end", kind(protocol.EventTurnEnd))

	s.Model.On(testkit.PromptContains("a second Turn"), testkit.Text("This must never run."))
	s.GitHub.Comment(t, "acme/app", issue, "alice", "@"+testkit.AppSlug+" a second Turn, please")
	limit := s.WaitEvent(id, testenv.WaitMedium, "the limit reached", kind(protocol.EventLimit))
	if !strings.Contains(limit.Text, "limit of 1 Turns") || !strings.Contains(limit.Text, "kndl repo edit") {
		t.Errorf("the limit's Event: %q", limit.Text)
	}
	testenv.Eventually(t, testenv.WaitMedium, "the Session asleep", func() bool {
		sess, err := s.Store.Sessions.SessionByID(t.Context(), id)
		return err == nil && sess.State == store.Asleep
	})
	testenv.Eventually(t, testenv.WaitMedium, "the thread told", func() bool {
		r := s.replies(issue)
		return len(r) == 1 && strings.Contains(r[0].Body, "Limit reached")
	})
	prompts, err := s.Store.Prompts.List(t.Context(), id)
	if err != nil || len(prompts) != 1 {
		t.Errorf("the queue: %d prompts (%v), want the second mention still waiting", len(prompts), err)
	}
	for _, ev := range s.Events(id) {
		if ev.Kind == protocol.EventText && ev.Text == "This must never run." {
			t.Error("the second Turn ran past the limit")
		}
	}
}
