package e2e

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestASessionSleptMidTurnKeepsItsPrompt: slept a moment after its prompt
// reached the model, the Session wakes with that prompt in Claude's
// conversation, or delivers it again: it is never lost.
func TestASessionSleptMidTurnKeepsItsPrompt(t *testing.T) {
	s := Start(t)
	v := s.Ready("first of all", "one")
	s.Model.On(testkit.PromptContains("cut me short"), testkit.Text("The cut prompt's answer.").Slow(4*time.Second, 0))
	s.prompt(v.ID, "cut me short")
	testenv.Eventually(t, testenv.WaitMedium, "the prompt reaches the model", func() bool { return lastRequestHas(s.Model, "cut me short") })
	s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil)
	s.waitState(v.ID, api.Asleep)
	notes := ""
	for _, e := range s.Events(v.ID) {
		notes += e.Text + "\n"
	}
	if !strings.Contains(notes, "mid-Turn: the Turn was cut") {
		t.Fatalf("the history does not say the Turn was cut:\n%s", notes)
	}

	s.Model.On(testkit.PromptContains("after the cut"), testkit.Text("Carrying on."))
	s.prompt(v.ID, "after the cut")
	testenv.Eventually(t, testenv.WaitBuild, "the prompt after the cut reaches the model", func() bool { return lastRequestHas(s.Model, "after the cut") })
	if !lastRequestHas(s.Model, "cut me short") {
		t.Fatal("after the wake, Claude's conversation does not hold the cut prompt")
	}
}

// TestAFailedStartIsFailedAndAWakeRetriesIt: a Repo that can't be cloned
// yet fails the start with git's words; once it can, kndl wake starts the
// Session and its first prompt runs.
func TestAFailedStartIsFailedAndAWakeRetriesIt(t *testing.T) {
	s := Start(t)
	dir := filepath.Join(t.TempDir(), "later")
	v := s.NewSession("file://"+dir, "hello once it exists")
	s.waitState(v.ID, api.Failed)
	if d := s.state(v.ID).StateDetail; !strings.Contains(d, "the start failed") || !strings.Contains(d, "later") {
		t.Fatalf("failed with %q, want the clone's failure", d)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main", dir}, {"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	s.Model.On(testkit.PromptContains("once it exists"), testkit.Text("Here at last."))
	s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/wake", nil, nil)
	s.turnEnds(v.ID, 1)
	s.waitState(v.ID, api.Active)
}

// TestAnIdleSessionSleepsUnlessKeptAwake: past HUB_SESSION_IDLE with no
// Turn running and nothing queued, a Session sleeps, saying so; one with
// Keep awake on stays awake.
func TestAnIdleSessionSleepsUnlessKeptAwake(t *testing.T) {
	s := Start(t, WithSessionIdle(3*time.Second))
	kept := s.Ready("keep me awake", "Kept.")
	s.Do(http.MethodPut, "/api/sessions/"+kept.ID+"/keep-awake", map[string]bool{"on": true}, nil)
	idle := s.Ready("let me sleep", "Sleeping soon.")
	s.waitState(idle.ID, api.Asleep)
	if d := s.state(idle.ID).StateDetail; !strings.Contains(d, "idle for 3s") {
		t.Fatalf("slept saying %q, want idle", d)
	}
	if st := s.state(kept.ID); st.State != api.Active || !st.KeepAwake {
		t.Fatalf("the Session kept awake is %s (keep awake %v)", st.State, st.KeepAwake)
	}
}
