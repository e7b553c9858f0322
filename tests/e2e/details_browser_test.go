package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestThePageTitleCountsTheSessionsWaitingOnYouAndSlashAndEscMoveToThePrompt:
// the Sessions list's title counts the person's Sessions that wait on them,
// live (none while a Turn runs), and the Session view's too; times read "just
// now" with the exact time on hover; on the Session view "/" puts the keys
// in the prompt box without typing a slash, and Esc takes them out.
func TestThePageTitleCountsTheSessionsWaitingOnYouAndSlashAndEscMoveToThePrompt(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("first words", "Ready.")
	b := NewBrowser(t)
	s.SignInDev(b)
	b.Go(s.URL+"/", `#repos li[data-id="`+v.ID+`"]`)
	b.Wait(testenv.WaitShort, "the title counting one Session waiting", `document.title === "(1) Sessions · kndl"`)

	updated := `document.querySelector('#repos li[data-id="` + v.ID + `"] .updated')`
	b.Wait(testenv.WaitShort, "the row's time, relative", updated+`.textContent === "just now"`)
	exact := Eval[string](b, updated+`.title`)
	at, err := time.Parse(time.RFC3339, Eval[string](b, updated+`.dataset.at`))
	if exact == "" || err != nil || time.Since(at) > time.Minute || time.Since(at) < -time.Minute {
		t.Errorf("the row's time: hover %q, at %v (%v), want the exact time of its last change", exact, at, err)
	}

	s.Model.On(testkit.PromptContains("take your time"), testkit.Text("Done, slowly.").Slow(3*time.Second, 0))
	s.prompt(v.ID, "take your time")
	b.Wait(testenv.WaitMedium, "the title counting none while the Turn runs", `document.title === "Sessions · kndl"`)
	s.turnEnds(v.ID, 2)
	b.Wait(testenv.WaitMedium, "the title counting it again once the Turn ends", `document.title === "(1) Sessions · kndl"`)
	b.Screenshot("sessions-list-waiting.png")

	b.Go(s.URL+"/sessions/"+v.ID, "#prompt")
	b.Wait(testenv.WaitShort, "the Session view's title counting it", `document.title.startsWith("(1) ")`)
	b.Wait(testenv.WaitShort, "the Turn's end with a relative time", `[...document.querySelectorAll("#transcript .turn time")].some((e) => e.textContent === "just now" && e.title !== "")`)
	focused := func() bool { return Eval[bool](b, `document.activeElement === document.getElementById("prompt")`) }
	if focused() {
		t.Fatal("the prompt box has the keys before any key")
	}
	b.Press('/')
	if !focused() {
		t.Fatal(`"/" did not put the keys in the prompt box`)
	}
	b.Type("hello")
	if got := Eval[string](b, `document.getElementById("prompt").value`); got != "hello" {
		t.Errorf("the prompt box holds %q, want hello: the / is not typed", got)
	}
	b.Press('\u001b')
	if focused() {
		t.Fatal("Esc left the keys in the prompt box")
	}
	b.Press('/')
	if got := Eval[string](b, `document.getElementById("prompt").value`); !focused() || got != "hello" {
		t.Errorf(`"/" again: focused %v, the box holds %q, want focused with hello`, focused(), got)
	}
	b.Screenshot("session-prompt-focused.png")
}

// Press presses one key as a keyboard does: a key down carrying its text,
// then a key up, so a page that cancels the key down types nothing, as in
// a person's browser. (chromedp.KeyEvent sends the text as a char event of
// its own, which a cancelled key down does not stop.)
func (b *Browser) Press(r rune) {
	b.t.Helper()
	k, ok := kb.Keys[r]
	if !ok {
		b.t.Fatalf("no key for %q", r)
	}
	b.do(func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: k.Key, Code: k.Code, WindowsVirtualKeyCode: k.Windows, NativeVirtualKeyCode: k.Native}
		if k.Print {
			down.Text, down.UnmodifiedText = k.Text, k.Unmodified
		}
		up := down
		up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		for _, ev := range []input.DispatchKeyEventParams{down, up} {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, ev); err != nil {
				return chromedp.Void{}, err
			}
		}
		return chromedp.Void{}, nil
	})
}
