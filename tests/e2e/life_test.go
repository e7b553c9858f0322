package e2e

import (
	"net/http"
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
	t.Parallel()
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
