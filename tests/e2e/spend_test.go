package e2e

import (
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestASessionPastItsCreatorsSpendCapSleepsAndTheModelHearsNoMore: with
// HUB_MEMBER_MAX_SPEND at a dollar, a first model reply the fake model
// says cost more (counted by the relay from the model's own answer, not
// the transcript) takes the Session past it: the Session sleeps with a
// limit Event naming the cap, the model is called no more, and a prompt
// does not wake it.
func TestASessionPastItsCreatorsSpendCapSleepsAndTheModelHearsNoMore(t *testing.T) {
	t.Parallel()
	s := Start(t, WithMemberMaxSpend(1))
	// $2 a million input tokens: $4 on the first reply.
	s.Model.On(testkit.PromptContains("spend a lot"), testkit.Bash("timeout 5 tail -f /dev/null; echo spent").WithUsage(testkit.Usage{Input: 2_000_000, Output: 10}))
	s.Model.On(testkit.ToolResultContains("spent"), testkit.Text("This must never be asked for."))
	v := s.NewSession(s.Repo(), "please spend a lot")
	limit := s.WaitEvent(v.ID, testenv.WaitBuild, "the cap reached", kind(protocol.EventLimit))
	if !strings.Contains(limit.Text, "HUB_MEMBER_MAX_SPEND") || !strings.Contains(limit.Text, "To go on") {
		t.Errorf("the limit's Event: %q, want the cap named and the way on", limit.Text)
	}
	testenv.Eventually(t, testenv.WaitMedium, "the Session asleep", func() bool {
		sess, err := s.Store.Sessions.SessionByID(t.Context(), v.ID)
		return err == nil && sess.State == store.Asleep
	})
	if n := len(s.Model.Turns()); n != 1 {
		t.Errorf("the model was called %d times, want once: nothing past the cap", n)
	}
	if _, errOut, code := s.kndl("", "prompt", v.ID, "and more"); code != 0 {
		t.Fatalf("kndl prompt: exit %d, %s", code, errOut)
	}
	if _, errOut, code := s.kndl("", "wake", v.ID); code == 0 || !strings.Contains(errOut, "HUB_MEMBER_MAX_SPEND") {
		t.Errorf("kndl wake past the cap: exit %d, %q, want refused naming the cap", code, errOut)
	}
	if sess, _ := s.Store.Sessions.SessionByID(t.Context(), v.ID); sess.State != store.Asleep {
		t.Errorf("the Session is %s after a prompt and a wake, want asleep", sess.State)
	}
}
