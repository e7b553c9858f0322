package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestTheUIOffersTheRunnersModelsAsASelect: the Sessions page's model is a
// select of the models the Runner offers, not a text box, with the efforts
// of the model chosen; a Session started from it with a model runs on it,
// and its view shows the same choice.
func TestTheUIOffersTheRunnersModelsAsASelect(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Model.On(testkit.PromptContains("pick a model"), testkit.Text("Picked."))
	pinned := claude.Models()
	def, _ := pinned.Default()
	pick := pinned.Models[len(pinned.Models)-1]
	b := NewBrowser(t)
	s.SignInDev(b)
	const model, effort = `#new-session select[name=model]`, `#new-session select[name=effort]`
	b.Go(s.URL+"/", model+` option[value="`+pick.Alias+`"]`)
	values := func(sel string) string {
		t.Helper()
		return Eval[string](b, `[...document.querySelectorAll('`+sel+` option')].map((o) => o.value).join(",")`)
	}
	want := ""
	for _, m := range pinned.Models {
		want += "," + m.Alias
	}
	if got := values(model); got != want {
		t.Errorf("the model select offers %q, want %q", got, want)
	}
	if Eval[bool](b, `!!document.querySelector('#new-session input[name=model]')`) {
		t.Error("the Sessions page still has a text box for the model")
	}
	if got, want := values(effort), ","+strings.Join(def.Efforts, ","); got != want {
		t.Errorf("the default model's efforts are %q, want %q", got, want)
	}

	Eval[bool](b, `(() => { const m = document.querySelector('`+model+`'); m.value = `+jsString(pick.Alias)+`; m.dispatchEvent(new Event("change")); return true })()`)
	if got, want := values(effort), ","+strings.Join(pick.Efforts, ","); got != want {
		t.Errorf("%s's efforts are %q, want %q", pick.Alias, got, want)
	}
	choose := pick.Efforts[0]
	b.do(chromedp.SendKeys(chromedp.CSS(`#new-session input[name=repo]`), s.Repo()),
		chromedp.SendKeys(chromedp.CSS(`#new-session textarea[name=prompt]`), "pick a model"),
		chromedp.SetValue(chromedp.CSS(effort), choose),
		chromedp.Click(chromedp.CSS(`#new-session button[type=submit]`)))
	b.Arrive(testenv.WaitMedium, "the new Session's view with its model chosen",
		`document.querySelector('#settings-form select[name=model]').value === `+jsString(pick.Alias)+
			` && document.querySelector('#settings-form select[name=effort]').value === `+jsString(choose))
	id := Eval[string](b, `document.getElementById("session").dataset.id`)
	if got := s.state(id); got.Model != pick.Alias || got.Effort != choose {
		t.Fatalf("the Session runs model %q effort %q, want %q %q", got.Model, got.Effort, pick.Alias, choose)
	}
	b.Screenshot("session-model-picker.png")
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
