package e2e

import (
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestTheQueueIsReorderedEditedAndCancelledInTheSessionView: while a Turn
// runs, the Creator moves a queued prompt down, edits another and cancels
// a third on the Session view; Claude gets what is left, in that order and
// as edited.
func TestTheQueueIsReorderedEditedAndCancelledInTheSessionView(t *testing.T) {
	s := Start(t)
	s.Model.On(testkit.PromptContains("busy for a while"), testkit.Bash("echo start; sleep 5; echo end"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Done being busy."))
	s.Model.On(testkit.PromptContains("queued"), testkit.Text("Noted."))
	v := s.NewSession(s.Repo(), "busy for a while")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the long tool", kind(protocol.EventToolUse))
	for _, p := range []string{"queued A", "queued B", "queued C"} {
		s.prompt(v.ID, p)
	}
	b := NewBrowser(t)
	s.SignInDev(b)
	b.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	queued := `[...document.querySelectorAll("#queue li .text")].map(e => e.textContent).join(",")`
	b.Wait(testenv.WaitShort, "the three queued", queued+` === "queued A,queued B,queued C"`)
	Eval[bool](b, `(document.querySelector("#queue li [data-action=move-prompt-down]").click(), true)`)
	b.Wait(testenv.WaitShort, "A moved down", queued+` === "queued B,queued A,queued C"`)
	Eval[bool](b, `(document.querySelectorAll("#queue li [data-action=edit-prompt]")[1].click(), true)`)
	Eval[bool](b, `(() => { const a = document.querySelector("#queue li textarea"); a.value = "queued A, edited"; document.querySelector("#queue li [data-action=save-prompt]").click(); return true })()`)
	b.Wait(testenv.WaitShort, "A edited", queued+` === "queued B,queued A, edited,queued C"`)
	Eval[bool](b, `(document.querySelectorAll("#queue li [data-action=cancel-prompt]")[2].click(), true)`)
	b.Wait(testenv.WaitShort, "C cancelled", queued+` === "queued B,queued A, edited"`)
	b.Screenshot("session-queue.png")
	s.turnEnds(v.ID, 3)
	var got []string
	for _, p := range userPrompts(s.Model) {
		if strings.HasPrefix(p, "queued") {
			got = append(got, p)
		}
	}
	if want := []string{"queued B", "queued A, edited"}; !slices.Equal(got, want) {
		t.Fatalf("Claude got %q, want %q", got, want)
	}
}
