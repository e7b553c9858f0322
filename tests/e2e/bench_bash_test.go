package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testkit"
)

// BenchmarkBashTurn times a Turn whose one tool call is Bash running `true`,
// model time excluded (the scripted model answers at once): from the
// prompt's POST to the Turn's end at the Hub, and, within it, from the
// Bash call's Event to its result's, which is Claude Code running a shell
// in the Sandbox. KNDL_E2E_SANDBOX picks the backend.
func BenchmarkBashTurn(b *testing.B) {
	s := Start(b)
	s.Model.On(testkit.PromptContains("bash bench"), testkit.Bash("true"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("ran"))
	v := s.Ready("bench bash turns", "ok")
	next := watchEvents(b, s, v.ID)
	var turns, tools []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/prompts", api.PromptRequest{Text: fmt.Sprintf("bash bench %d", i)}, &api.Prompt{})
		use := next(b, protocol.EventToolUse)
		result := next(b, protocol.EventToolResult)
		end := next(b, protocol.EventTurnEnd)
		turns, tools = append(turns, end.Sub(start)), append(tools, result.Sub(use))
	}
	reportMedian(b, turns, "ms/turn-median")
	reportMedian(b, tools, "ms/bash-median")
}
