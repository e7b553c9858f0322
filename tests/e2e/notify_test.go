package e2e

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/hub/notify"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// hookPost is one post a webhook endpoint got.
type hookPost struct {
	kind, sig string
	body      []byte
}

// TestAQuestionReachesTheCreatorsWebhookAndBrowserAndAFailingOneShows: a
// webhook added on the Account page gets Claude's question, signed with
// the secret the page showed once and with the Sensitive Variable's value
// masked; the browser, its notifications turned on with a click, raises
// one; and once the endpoint fails, the Account page says so with its
// error.
func TestAQuestionReachesTheCreatorsWebhookAndBrowserAndAFailingOneShows(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("warm up first", "Ready.")
	const secret = "hunter2-db-password-77"
	if code := s.Do(http.MethodPut, "/api/repos/"+v.RepoID+"/variables/DB_PASSWORD", map[string]any{"value": secret, "sensitive": true}, nil); code != http.StatusOK {
		t.Fatalf("set the Sensitive Variable: %d", code)
	}
	posts := make(chan hookPost, 10)
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		k := r.Header.Get(notify.KindHeader)
		posts <- hookPost{kind: k, sig: r.Header.Get(notify.SignatureHeader), body: b}
		if k != notify.QuestionWaiting {
			http.Error(w, "down for maintenance", http.StatusInternalServerError)
		}
	}))
	defer ep.Close()

	b := NewBrowser(t)
	s.SignInDev(b)
	b.Go(s.URL+"/account", "#webhook-form")
	b.do(chromedp.SendKeys(chromedp.CSS(`#webhook-form input[name=url]`), ep.URL+"/hook"), chromedp.Click(chromedp.CSS(`#webhook-form button[type=submit]`)))
	b.Wait(testenv.WaitShort, "the webhook's secret, once", `!document.getElementById("webhook-added").hidden`)
	hookSecret := Eval[string](b, `document.getElementById("webhook-secret").textContent`)
	// Nothing was asked on load; the click asks, and the person (here
	// the DevTools protocol) grants it.
	if state := Eval[string](b, `document.getElementById("browser-notify-state").textContent`); state != "Off." {
		t.Fatalf("before the click, the page says %q", state)
	}
	b.do(func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, browser.SetPermission, browser.SetPermissionParams{Permission: &browser.PermissionDescriptor{Name: "notifications"},
			Setting: browser.PermissionSettingGranted, Origin: s.URL, BrowserContextID: b.contextID()})
		return chromedp.Void{}, err
	})
	b.do(chromedp.Click(chromedp.CSS(`#browser-notify`)))
	b.Wait(testenv.WaitShort, "notifications on", `document.getElementById("browser-notify-state").textContent.startsWith("On")`)

	// The Sessions list, with the browser's notifications watched as they
	// are raised.
	b.Go(s.URL+"/", "#page-home")
	Eval[bool](b, `(() => { window.raised = []; const N = window.Notification;
		window.Notification = class extends N { constructor(title, o) { super(title, o); window.raised.push(title) } }; return true })()`)
	s.Model.On(testkit.PromptContains("ask me about the password"), askColour("Shall I log in with "+secret+" first?"))
	s.Model.On(testkit.ToolResultContains("Blue"), testkit.Text("Done."))
	s.prompt(v.ID, "ask me about the password")
	s.WaitEvent(v.ID, testenv.WaitMedium, "the question", kind(protocol.EventQuestion))

	// next is the next post of kind, those before it passed over.
	next := func(kind string) hookPost {
		t.Helper()
		for {
			select {
			case p := <-posts:
				if p.kind == kind {
					return p
				}
			case <-time.After(testenv.WaitMedium):
				t.Fatalf("no %s post came", kind)
			}
		}
	}
	p := next(notify.QuestionWaiting)
	if !hmac.Equal([]byte(p.sig), []byte(notify.Sign(hookSecret, p.body))) {
		t.Fatalf("the post's signature %q is not its body's HMAC under the secret the page showed", p.sig)
	}
	var ev notify.Event
	if err := json.Unmarshal(p.body, &ev); err != nil || ev.Session.ID != v.ID || !strings.Contains(ev.Text, "Shall I log in with") || strings.Contains(string(p.body), "hunter2") {
		t.Fatalf("the question's post: %v %s", err, p.body)
	}
	b.Wait(testenv.WaitShort, "the browser's notification", `window.raised.some(t => t.startsWith("Claude asks you something"))`)

	// The answer ends the Turn; the endpoint fails that post, and the
	// Account page says so.
	if out, errOut, code := s.kndl("", "answer", v.ID, "--option", "2"); code != 0 {
		t.Fatalf("kndl answer: exit %d\n%s\n%s", code, out, errOut)
	}
	next(notify.TurnEnded)
	// The post has reached the endpoint; the Hub records its failure once
	// the answer is back, and the page shows what is recorded when loaded.
	testenv.Eventually(t, testenv.WaitShort, "the failure recorded", func() bool {
		var hooks []api.NotifyWebhook
		s.Do(http.MethodGet, "/api/account/webhooks", nil, &hooks)
		return len(hooks) == 1 && !hooks[0].FailingSince.IsZero()
	})
	b.Go(s.URL+"/account", "#webhooks")
	b.Wait(testenv.WaitShort, "the webhook shown failing", `document.querySelector("#webhooks .webhook-state").textContent.includes("500")`)
	if row := Eval[string](b, `document.getElementById("webhooks").textContent`); !strings.Contains(row, "failing") || !strings.Contains(row, ep.URL+"/hook") {
		t.Fatalf("the webhooks table: %q", row)
	}
	b.Screenshot("account-webhooks.png")
}
