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
	turn := bashTurns(b, Start(b))
	var turns, tools []time.Duration
	for i := 0; b.Loop(); i++ {
		t := turn(i)
		turns, tools = append(turns, t.turn), append(tools, t.bash)
	}
	reportMedian(b, turns, "ms/turn-median")
	reportMedian(b, tools, "ms/bash-median")
}

// BenchmarkBashTurnRelayBesideSandbox is BenchmarkBashTurn on two Systems
// side by side, one Hub with HUB_CLAUDE_TOKEN=relay (Claude Code's model
// requests through the Runner's relay, which swaps the placeholder for the
// Creator's token) and one with sandbox (straight to the model), a Turn on
// each in turn, each first every other time, so a loaded machine weighs on
// both alike. Besides the Turn it times the first token: from the
// prompt's POST to the Bash call's Event at the Hub, the first thing the
// model's answer makes visible.
func BenchmarkBashTurnRelayBesideSandbox(b *testing.B) {
	modes := []struct {
		name          string
		turn          func(int) bashTurn
		turns, firsts []time.Duration
	}{{name: "relay", turn: bashTurns(b, Start(b))}, {name: "sandbox", turn: bashTurns(b, Start(b, WithClaudeTokenInSandbox()))}}
	for i := 0; b.Loop(); i++ {
		for j := range modes {
			m := &modes[(i+j)%len(modes)] // each first in turn
			t := m.turn(i)
			m.turns, m.firsts = append(m.turns, t.turn), append(m.firsts, t.first)
		}
	}
	for _, m := range modes {
		reportMedian(b, m.turns, "ms/turn-median-"+m.name)
		reportMedian(b, m.firsts, "ms/first-token-median-"+m.name)
	}
}

// bashTurn is one Bash Turn's times: from the prompt's POST to the Bash
// call's Event (first) and to the Turn's end (turn), and from the call's
// Event to its result's (bash).
type bashTurn struct{ first, turn, bash time.Duration }

// bashTurns readies a Session on s whose Turns run Bash `true`, and
// returns a function that runs its i-th Turn and times it.
func bashTurns(b *testing.B, s *System) func(i int) bashTurn {
	s.Model.On(testkit.PromptContains("bash bench"), testkit.Bash("true"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("ran"))
	v := s.Ready("bench bash turns", "ok")
	next := watchEvents(b, s, v.ID)
	return func(i int) bashTurn {
		start := time.Now()
		s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/prompts", api.PromptRequest{Text: fmt.Sprintf("bash bench %d", i)}, &api.Prompt{})
		use := next(b, protocol.EventToolUse)
		result := next(b, protocol.EventToolResult)
		end := next(b, protocol.EventTurnEnd)
		return bashTurn{first: use.Sub(start), turn: end.Sub(start), bash: result.Sub(use)}
	}
}
