package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestTheQueueIsReorderedEditedAndCancelledInTheSessionView: while a Turn
// runs, the Creator moves a queued prompt down, edits another and cancels
// a third on the Session view; Claude gets what is left, in that order and
// as edited.
func TestTheQueueIsReorderedEditedAndCancelledInTheSessionView(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Model.On(testkit.PromptContains("busy for a while"), testkit.Bash("echo start; "+untilTouched("/tmp/busy-done")+"; echo end"))
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
	s.inSandbox(v.ID, "touch /tmp/busy-done") // the Turn ends once the queue is set
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

// TestTheSessionViewDeletesAndRestoresASession: Delete (archive) on the
// Session view removes its Sandbox and shows Restore; Restore brings it
// back asleep, and a prompt wakes it into its conversation.
func TestTheSessionViewDeletesAndRestoresASession(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("remember the word heron", "Remembered.")
	b := NewBrowser(t)
	s.SignInDev(b)
	b.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	b.Wait(testenv.WaitShort, "Delete shown", `!document.getElementById("archive").hidden && document.getElementById("restore").hidden`)
	Eval[bool](b, `(window.confirm = () => true, document.getElementById("archive").click(), true)`)
	s.waitState(v.ID, api.Archived)
	if _, err := s.Backend.Status(context.Background(), "s-"+v.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("the archived Session's Sandbox: %v, want it gone", err)
	}
	b.Wait(testenv.WaitShort, "Restore shown", `!document.getElementById("restore").hidden && document.getElementById("archive").hidden && document.getElementById("state").textContent === "archived"`)
	Eval[bool](b, `(document.getElementById("restore").click(), true)`)
	s.waitState(v.ID, api.Asleep)
	s.Model.On(testkit.PromptContains("which word"), testkit.Text("heron"))
	s.prompt(v.ID, "which word was it?")
	s.turnEnds(v.ID, 2)
	if !lastRequestHas(s.Model, "remember the word heron") {
		t.Fatal("the restored Session did not resume its conversation")
	}
}
