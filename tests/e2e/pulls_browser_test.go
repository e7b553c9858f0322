package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestTheCreatorOpensAPullRequestFromTheViewAndAWatcherHasNoButton: a
// Session pushes a branch; its Creator opens a pull request from the view,
// with the form prefilled from the Session's title and its last Turn's
// text; the fake GitHub receives it from the App, from that branch into
// the default branch, its body naming the Creator; the view and the
// Sessions list show it at once. A watcher sees the pull request but no
// button, and the API refuses them.
func TestTheCreatorOpensAPullRequestFromTheViewAndAWatcherHasNoButton(t *testing.T) {
	t.Parallel()
	s := Start(t, WithSandboxGitHub(time.Minute))
	id := s.gitSession()
	s.GitHub.SetCollaborator("acme/app", "bob", true)

	creator := NewBrowser(t)
	s.SignInDev(creator)
	own := ownBranch(id)
	branch := `#branches li[data-branch="` + own + `"]`
	creator.Go(s.URL+"/sessions/"+id, branch+` button.open-pull`)
	creator.do(chromedp.Click(chromedp.CSS(branch + ` button.open-pull`)))
	creator.Wait(testenv.WaitShort, "the form, prefilled", `(() => {
		const f = document.getElementById("pull-form");
		return !f.hidden && document.getElementById("pull-branch").textContent === "`+own+`" &&
			f.elements.title.value === "push a branch" && f.elements.body.value === "Pushed.";
	})()`)
	Eval[bool](creator, `(() => { document.getElementById("pull-form").elements.title.value = "Add the test branch"; return true; })()`)
	creator.Screenshot("session-open-pull.png")
	// Scrolled to the middle: the prompt box stays at the window's foot,
	// over what is scrolled just into view.
	Eval[bool](creator, `(() => { document.querySelector("#pull-form button[type=submit]").scrollIntoView({block: "center"}); return true; })()`)
	creator.do(chromedp.Click(chromedp.CSS(`#pull-form button[type=submit]`)))
	creator.Wait(testenv.WaitMedium, "the pull request on its branch, the form gone", `(() => {
		const pr = document.querySelector('`+branch+` a.pull');
		return pr && pr.textContent === "#1 Add the test branch" && pr.href === "`+s.GitHub.URL+`/acme/app/pull/1" &&
			!document.querySelector('`+branch+` button.open-pull') && document.getElementById("pull-form").hidden;
	})()`)
	got := s.GitHub.Pulls("acme/app")
	if len(got) != 1 || got[0].Head != own || got[0].Base != "main" || got[0].Title != "Add the test branch" || got[0].By != testkit.AppSlug+"[bot]" {
		t.Fatalf("the fake GitHub received %+v, want %s into main, from the App", got, own)
	}
	if want := "Pushed.\n\n---\nOpened for dev from kndl Session " + s.URL + "/sessions/" + id + "."; got[0].Body != want {
		t.Errorf("the body GitHub received: %q, want %q", got[0].Body, want)
	}
	creator.Screenshot("session-pull-opened.png")

	// The Sessions list's badge.
	creator.Go(s.URL+"/", `#repos li[data-id="`+id+`"]`)
	creator.Wait(testenv.WaitShort, "the list's pull request badge", `(() => {
		const a = document.querySelector('#repos li[data-id="`+id+`"] a.pull');
		return a && !a.hidden && a.textContent === "#1 open" && a.href === "`+s.GitHub.URL+`/acme/app/pull/1";
	})()`)

	// A watcher sees it, with no button, and the API refuses them.
	bob := NewBrowser(t)
	s.Member(bob, "bob")
	bob.Go(s.URL+"/sessions/"+id, branch+` a.pull`)
	if n := Eval[int](bob, `document.querySelectorAll("#pull-form, button.open-pull").length`); n != 0 {
		t.Errorf("the watcher's view holds %d pull request controls, want none", n)
	}
	// A second branch of its own, without a pull request: still no button
	// for them.
	second := strings.TrimSuffix(own, "x") + "second"
	s.Model.On(testkit.PromptContains("push another"), testkit.Bash("git -C /workspace push origin HEAD:refs/heads/"+second))
	s.prompt(id, "push another")
	bob.Wait(testenv.WaitMedium, "the second branch", `!!document.querySelector('#branches li[data-branch="`+second+`"]')`)
	if n := Eval[int](bob, `document.querySelectorAll("button.open-pull").length`); n != 0 {
		t.Errorf("the watcher's view offers to open a pull request %d times, want none", n)
	}
	status := Eval[float64](bob, `fetch("/api/sessions/`+id+`/pulls", {method: "POST", headers: {"Content-Type": "application/json"},
		body: JSON.stringify({branch: "`+second+`", title: "bob's"})}).then(r => r.status)`)
	if status != http.StatusForbidden {
		t.Errorf("the watcher's pull request: %v, want 403", status)
	}
	if got := s.GitHub.Pulls("acme/app"); len(got) != 1 || strings.Contains(got[len(got)-1].Title, "bob") {
		t.Errorf("GitHub's pull requests after the watcher's try: %+v, want the Creator's alone", got)
	}
}
