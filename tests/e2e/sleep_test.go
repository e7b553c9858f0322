package e2e

import (
	"net/http"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

func (s *System) state(id string) api.SessionView {
	s.t.Helper()
	var v api.SessionView
	s.Do(http.MethodGet, "/api/sessions/"+id, nil, &v)
	return v
}

func (s *System) waitState(id string, want api.SessionState) {
	s.t.Helper()
	testenv.Eventually(s.t, testenv.WaitMedium, "session "+string(want), func() bool { return s.state(id).State == want })
}

// lastRequestHas reports whether the model's last request carried text.
func lastRequestHas(m *testkit.Anthropic, text string) bool {
	turns := m.Turns()
	if len(turns) == 0 {
		return false
	}
	for _, msg := range turns[len(turns)-1].Params.Messages {
		if strings.Contains(strings.Join(msg.Texts(), "\n"), text) {
			return true
		}
	}
	return false
}

// withNote starts a Session whose first Turn writes a file in its
// Workspace and one on its package-cache disk, and waits for it to end.
func (s *System) withNote() api.SessionView {
	s.t.Helper()
	s.Model.On(testkit.PromptContains("write the note"), testkit.Bash("echo kept > /workspace/note.txt; echo cached > /var/cache/kndl/c.txt"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Written."))
	v := s.NewSession(s.Repo(), "write the note")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the answer", func(e protocol.Event) bool { return e.Kind == protocol.EventText && e.Text == "Written." })
	s.turnEnds(v.ID, 1)
	return v
}

// noteKept prompts a Session withNote made, and checks it wakes into the
// same conversation with both files as they were.
func (s *System) noteKept(id string) {
	s.t.Helper()
	s.Model.On(testkit.PromptContains("what did you write"), testkit.Bash("cat /workspace/note.txt /var/cache/kndl/c.txt"))
	s.prompt(id, "what did you write before?")
	s.WaitEvent(id, testenv.WaitMedium, "the woken Session's tool output", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolResult && e.Text == "kept\ncached"
	})
	if !lastRequestHas(s.Model, "write the note") {
		s.t.Fatal("the woken Claude Code did not resume the conversation: the model did not get the first prompt again")
	}
}

func TestARunnerAwayFreezesItsSessions(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("freeze me", "ok")
	s.runnerCancel()
	<-s.runnerDone
	s.waitState(v.ID, api.Frozen)
	// Queued meanwhile, delivered once it is back.
	s.Model.On(testkit.PromptContains("while frozen"), testkit.Text("delivered"))
	s.prompt(v.ID, "sent while frozen")
	s.startRunner(s.Backend)
	s.turnEnds(v.ID, 2)
}

// TestClaudeCodeRestartedOrExitedGoesOnInTheSameConversation: one
// Session's Claude Code restarted by a change of model and effort runs the
// new ones, resuming; killed, the Session sleeps saying it exited, and the
// next prompt wakes it into the same conversation.
func TestClaudeCodeRestartedOrExitedGoesOnInTheSameConversation(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("remember the colour teal", "teal it is")
	t.Run("a change of model restarts it", func(t *testing.T) { s.modelChangeRestarts(t, v.ID) })
	t.Run("an exit sleeps it and a prompt wakes it", func(t *testing.T) { s.exitSleepsAndAPromptWakes(t, v.ID, 2) })
}

// exitSleepsAndAPromptWakes kills the Claude Code of a Session that has
// had turns Turns, the first of them "remember the colour teal".
func (s *System) exitSleepsAndAPromptWakes(t *testing.T, id string, turns int) {
	if out, code := s.Exec(id, "pkill", "-f", "^/opt/kndl/claude-code/claude"); code != 0 {
		t.Fatalf("pkill: %d %s", code, out)
	}
	s.waitState(id, api.Asleep)
	if d := s.state(id).StateDetail; !strings.Contains(d, "exited") {
		t.Fatalf("state detail %q does not say Claude Code exited", d)
	}
	s.Model.On(testkit.PromptContains("after the exit"), testkit.Text("back"))
	s.prompt(id, "after the exit")
	s.turnEnds(id, turns+1)
	if !lastRequestHas(s.Model, "remember the colour teal") {
		t.Fatal("the wake did not resume the conversation")
	}
}

// modelChangeRestarts changes the model and effort of a Session whose
// first prompt was "remember the colour teal".
func (s *System) modelChangeRestarts(t *testing.T, id string) {
	model, effort := "opus", "high"
	var got api.SessionView
	s.Do(http.MethodPatch, "/api/sessions/"+id, api.SessionUpdate{Model: &model, Effort: &effort}, &got)
	if got.Model != "opus" || got.Effort != "high" {
		t.Fatalf("after the update: %+v", got.Session)
	}
	// The update restarted it before it answered: once Active, the Claude
	// Code in its Sandbox is the new one.
	s.waitState(id, api.Active)
	cmdline, _ := s.Exec(id, "cat", "/proc/"+claudePID(t, s, id)+"/cmdline")
	if !strings.Contains(cmdline, "--model\x00opus") || !strings.Contains(cmdline, "--effort\x00high") || !strings.Contains(cmdline, "--resume") {
		t.Fatalf("Claude Code runs with %q, want the new model and effort, resuming", cmdline)
	}
	s.Model.On(testkit.PromptContains("which colour"), testkit.Text("teal"))
	s.prompt(id, "which colour?")
	s.turnEnds(id, 2)
	if !lastRequestHas(s.Model, "remember the colour teal") {
		t.Fatal("the restart lost the conversation")
	}
	// Only the Creator changes it, and bad values change nothing.
	bad := "--dangerous"
	if code := s.Do(http.MethodPatch, "/api/sessions/"+id, api.SessionUpdate{Model: &bad}, nil); code != http.StatusBadRequest {
		t.Fatalf("a model that looks like a flag: %d, want 400", code)
	}
}
