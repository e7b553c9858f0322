package testkit

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/testenv"
)

// TogetherPrompt is the prompt StartClaudesTogether types: each Claude
// Code's scripted model answers it with a Bash call to true.
const TogetherPrompt = "together"

// Together is what StartClaudesTogether measured of n Claude Codes.
type Together struct {
	// Drawn and Tool are each one's CPU, its own and what it ran and
	// waited for, by its prompt drawn and by its first tool's result; Own
	// its own alone by that result.
	Drawn, Tool, Own []time.Duration
	// Ready and Result are the time from their start until each drew its
	// prompt and had its first tool's result; All until all had.
	Ready, Result []time.Duration
	All           time.Duration
}

// StartClaudesTogether sets up n Claude Codes of bin, each as NewClaude
// does (Claude Code as the Runner starts it: BUN_JSC_useDFGJIT=0), and
// prepare, if not nil, changes each; then starts them at once, in tmux as
// the Runner runs them, types each TogetherPrompt once it draws its prompt,
// and waits for each one's first tool's result in its transcript. The
// bare reference of five Sessions started at once: what Claude Code needs
// of the host before a Sandbox, the Runner and the Hub add theirs. They are
// stopped before it returns; the setup and the stop are not in All.
func StartClaudesTogether(t testing.TB, bin claude.Binary, n int, prepare func(*Claude)) Together {
	t.Helper()
	cs := make([]*Claude, n)
	for i := range cs {
		cs[i] = NewClaude(t, bin)
		cs[i].API.On(PromptContains(TogetherPrompt), Bash("true"))
		cs[i].API.On(AfterToolResult(), Text("ran"))
		if prepare != nil {
			prepare(cs[i])
		}
	}
	r := Together{Drawn: make([]time.Duration, n), Tool: make([]time.Duration, n), Own: make([]time.Duration, n),
		Ready: make([]time.Duration, n), Result: make([]time.Duration, n)}
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			c.Start(false)
			r.Ready[i] = time.Since(start)
			self, children := c.CPU()
			r.Drawn[i] = self + children
			c.Send(TogetherPrompt)
			testenv.Eventually(t, testenv.WaitMedium, "the first tool's result in the transcript", func() bool {
				b, _ := os.ReadFile(c.Transcript())
				return strings.Contains(string(b), `"tool_result"`)
			})
			r.Result[i] = time.Since(start)
			self, children = c.CPU()
			r.Tool[i], r.Own[i] = self+children, self
		})
	}
	wg.Wait()
	r.All = slices.Max(r.Result)
	for _, c := range cs {
		c.Stop(false)
	}
	return r
}
