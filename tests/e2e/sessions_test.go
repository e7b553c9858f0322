package e2e

import (
	"testing"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

func TestSessionAnswersAPrompt(t *testing.T) {
	s := Start(t)
	s.Model.On(testkit.PromptContains("say hello"), testkit.Text("Hello from the scripted model."))
	v := s.NewSession(s.Repo(), "say hello please")
	s.WaitEvent(v.ID, testenv.WaitBuild, "a finished turn", func(e protocol.Event) bool {
		return e.Kind == protocol.EventTurnEnd
	})
	t.Logf("events:\n%s", dump(s.Events(v.ID)))
}
