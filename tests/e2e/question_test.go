package e2e

import (
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// askColour is Claude asking a question with two options, as the model
// calls AskUserQuestion.
func askColour(question string) testkit.Reply {
	return testkit.ToolUse("AskUserQuestion", map[string]any{"questions": []any{map[string]any{
		"question": question, "header": "Colour", "multiSelect": false,
		"options": []any{
			map[string]any{"label": "Red", "description": "warm"},
			map[string]any{"label": "Blue", "description": "cool"},
		},
	}}})
}

// toolResult returns the text of the Session's tool_result for the tool
// call named tool.
func toolResult(evs []protocol.Event, tool string) string {
	ids := map[string]bool{}
	for _, e := range evs {
		if e.Kind == protocol.EventToolUse && e.Tool == tool {
			ids[e.ToolID] = true
		}
	}
	var out []string
	for _, e := range evs {
		if e.Kind == protocol.EventToolResult && ids[e.ToolID] {
			out = append(out, e.Text)
		}
	}
	return strings.Join(out, "\n")
}

// TestAQuestionIsAnsweredFromTheCLIAndFromTheBrowser: Claude's
// AskUserQuestion waits in the Session; kndl show and kndl watch show it
// with its options; the Creator's answer, from kndl answer and then from
// the Session view, reaches Claude as the option chosen, through the
// mod's hook, and the history shows it answered.
func TestAQuestionIsAnsweredFromTheCLIAndFromTheBrowser(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("warm up first", "Ready.")
	s.Model.On(testkit.PromptContains("ask me on the command line"), askColour("Which colour for the CLI?"))
	s.Model.On(testkit.ToolResultContains("Blue"), testkit.Text("You chose Blue."))
	s.prompt(v.ID, "ask me on the command line")
	s.WaitEvent(v.ID, testenv.WaitMedium, "the question", kind(protocol.EventQuestion))
	testenv.Eventually(t, testenv.WaitShort, "the Session waits on the question", func() bool { return s.state(v.ID).Activity == "question" })
	out, errOut, code := s.kndl("", "show", v.ID)
	if code != 0 || !strings.Contains(out, "claude asks: Which colour for the CLI?") || !strings.Contains(out, "2. Blue: cool") {
		t.Fatalf("kndl show: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "answer", v.ID, "--option", "3"); code == 0 {
		t.Fatalf("an option the question lacks was taken: %s %s", out, errOut)
	}
	if out, errOut, code := s.kndl("", "answer", v.ID, "--option", "2"); code != 0 {
		t.Fatalf("kndl answer: exit %d\n%s\n%s", code, out, errOut)
	}
	s.turnEnds(v.ID, 2)
	evs := s.Events(v.ID)
	if r := toolResult(evs, "AskUserQuestion"); !strings.Contains(r, "Blue") {
		t.Fatalf("Claude got %q as the answer, want Blue:\n%s", r, dump(evs))
	}
	once(t, evs, protocol.EventAnswer, "Blue")
	once(t, evs, protocol.EventText, "You chose Blue.")

	// From the browser, in the Creator's own words.
	s.Model.On(testkit.PromptContains("ask me in the browser"), askColour("Which colour for the page?"))
	s.Model.On(testkit.ToolResultContains("teal"), testkit.Text("You chose teal."))
	s.prompt(v.ID, "ask me in the browser")
	b := NewBrowser(t)
	s.SignInDev(b)
	b.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	b.Wait(testenv.WaitMedium, "the question card", `[...document.querySelectorAll(".ev.question .ask-text")].some(e => e.textContent === "Which colour for the page?")`)
	b.Screenshot("session-question.png")
	Eval[bool](b, `(() => { const cards = document.querySelectorAll(".ev.question:not(.answered)"); const c = cards[cards.length-1];
		c.querySelector(".ask-own input").value = "teal, please"; c.querySelector(".ask-own button").click(); return true })()`)
	s.turnEnds(v.ID, 3)
	b.Wait(testenv.WaitShort, "the card says it is answered", `[...document.querySelectorAll(".ev.question.answered .answer-status")].some(e => e.textContent === "Answered: teal, please")`)
	evs = s.Events(v.ID)
	if r := toolResult(evs, "AskUserQuestion"); !strings.Contains(r, "teal, please") {
		t.Fatalf("Claude got %q as the answer, want teal, please", r)
	}
	if st := s.state(v.ID); st.State != api.Active || st.Activity != "" {
		t.Fatalf("after the answers the Session is %s (%s)", st.State, st.Activity)
	}
}
