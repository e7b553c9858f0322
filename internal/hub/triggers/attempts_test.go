package triggers

import (
	"fmt"
	"strings"
	"testing"
)

// TestAMentionWithAttemptsStartsASetOnlyWhereTheRepoAllowsIt: attempts=N
// in a mention starts an attempt set of N Sessions, each with its reply
// linking the set, once the Repo allows it; before, and for a count out
// of 2 to 8, one reply names the setting or the range, and nothing
// starts.
func TestAMentionWithAttemptsStartsASetOnlyWhereTheRepoAllowsIt(t *testing.T) {
	f := newFixture(t)
	f.gh.Comment(t, "acme/app", 1, "alice", "@kndl-test attempts=3 please fix this")
	replies := f.waitReplies(1)
	if want := fmt.Sprintf(attemptsOffText, "alice", "https://hub.example/"); replies[0].Body != want {
		t.Errorf("on a Repo the Hub does not have: got the reply %q, want %q", replies[0].Body, want)
	}
	repo, err := f.st.Repos.EnsureRepo(t.Context(), f.gh.RepoURL("acme/app"), "app")
	if err != nil {
		t.Fatal(err)
	}
	f.gh.Comment(t, "acme/app", 1, "alice", "@kndl-test attempts=3")
	replies = f.waitReplies(2)
	if want := fmt.Sprintf(attemptsOffText, "alice", "https://hub.example/repos/"+repo.ID); replies[1].Body != want {
		t.Errorf("on a Repo that does not allow it: got the reply %q, want %q", replies[1].Body, want)
	}
	if started, _ := f.settle(); started != 0 {
		t.Fatalf("got %d Sessions started while the Repo does not allow attempt sets, want none", started)
	}

	l, err := f.st.Repos.RepoLimits(t.Context(), repo.ID)
	if err == nil {
		l.GitHubAttempts = true
		err = f.st.Repos.SetRepoLimits(t.Context(), repo.ID, l)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, body := range []string{"@kndl-test attempts=9", "@kndl-test attempts=1", "@kndl-test attempts=0", "@kndl-test attempts=three"} {
		f.gh.Comment(t, "acme/app", 1, "alice", body)
		if got, want := f.waitReplies(3 + i)[2+i].Body, fmt.Sprintf(attemptsRangeText, "alice", 2, 8, 2, 8); got != want {
			t.Errorf("%q: got the reply %q, want %q", body, got, want)
		}
	}
	if started, _ := f.settle(); started != 0 {
		t.Fatalf("got %d Sessions started for counts out of range, want none", started)
	}

	f.gh.Comment(t, "acme/app", 1, "alice", "@kndl-test ATTEMPTS=3 please fix this")
	f.waitReplies(9)
	f.waitWork()
	if started, _ := f.sessions.counts(); started != 3 {
		t.Fatalf("got %d Sessions started, want the set's 3", started)
	}
	f.sessions.mu.Lock()
	sets, first := f.sessions.sets, f.sessions.started[0]
	f.sessions.mu.Unlock()
	if len(sets) != 1 || sets[0] != 3 || !strings.Contains(first, "please fix this") {
		t.Errorf("got the sets %v with the first prompt %q, want one of 3 with the comment", sets, first)
	}
	threads, err := f.st.Threads.ThreadSessions(t.Context(), "acme/app", 1)
	if err != nil || len(threads) != 3 {
		t.Fatalf("got the thread's Sessions %+v (%v), want the 3 attempts", threads, err)
	}
	for _, th := range threads {
		if th.ReplyID == 0 {
			t.Errorf("the attempt %s has no reply in the thread", th.SessionID)
		}
	}
}
