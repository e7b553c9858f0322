package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestTheChangesTabShowsEditedAndCommittedFilesMaskedLiveAndToAWatcher: a
// Turn edits two files and commits one; the Changes tab, open since
// before the Turn, shows both once the Turn ends (re-fetched on its end,
// no click), each with its diff, the commit not pushed, and a Sensitive
// value Claude wrote into a file masked. A watcher sees the same diff;
// kndl diff --json says the same, and still does once the Session sleeps,
// from the Workspace on its Runner's disk.
func TestTheChangesTabShowsEditedAndCommittedFilesMaskedLiveAndToAWatcher(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	const secret = "chang3s-s3cret-value-e2e"
	repo := s.WatchedRepo("DEPLOY_KEY", secret)
	s.Model.On(testkit.PromptContains("say hello"), testkit.Text("Hello."))
	s.Model.On(testkit.PromptContains("edit two files"), testkit.Bash(`cd /workspace && echo 'a committed line' >> README.md && `+
		`git -c user.name=claude -c user.email=claude@example.com commit -qam 'Say more in the readme' && `+
		`printf 'DEPLOY_KEY=%s\nnot committed\n' "$DEPLOY_KEY" > notes.env && echo edited-two-files`))
	s.Model.On(testkit.ToolResultContains("edited-two-files"), testkit.Text("Two files edited, one committed."))
	v := s.NewSession(repo, "say hello")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the first turn's end", kind(protocol.EventTurnEnd))

	creator := NewBrowser(t)
	s.SignInDev(creator)
	creator.Go(s.URL+"/sessions/"+v.ID, "#changes-tab")
	creator.do(chromedp.Click(chromedp.CSS("#changes-tab")))
	creator.Wait(testenv.WaitMedium, "no changes yet", `document.querySelector("#changes-summary")?.textContent.startsWith("0 files changed against main")`)

	s.prompt(v.ID, "edit two files")
	s.turnEnds(v.ID, 2)
	shown := `[...document.querySelectorAll("#changes .diff-file")].map((d) => d.dataset.status + " " + d.dataset.path).join(",")`
	creator.Wait(testenv.WaitMedium, "both files, refreshed by the Turn's end", shown+` === "modified README.md,added notes.env"`)
	diffOf := func(b *Browser, path string) string {
		return Eval[string](b, `document.querySelector('#changes .diff-file[data-path="`+path+`"] pre.diff').innerText`)
	}
	masked := "+DEPLOY_KEY=" + strings.Repeat("*", len(secret))
	check := func(who string, b *Browser) {
		t.Helper()
		if d := diffOf(b, "README.md"); !strings.Contains(d, " # test repo\n+a committed line") || !strings.Contains(d, "@@ -1 +1,2 @@") {
			t.Errorf("%s's README.md diff:\n%s", who, d)
		}
		if d := diffOf(b, "notes.env"); !strings.Contains(d, "new file mode") || !strings.Contains(d, masked+"\n+not committed") {
			t.Errorf("%s's notes.env diff, want the value masked:\n%s", who, d)
		}
		commits := Eval[string](b, `document.querySelector("#changes-commits").innerText`)
		if !strings.Contains(commits, "Say more in the readme") || !strings.Contains(commits, "not pushed") {
			t.Errorf("%s's commits: %q", who, commits)
		}
		if Eval[bool](b, `document.body.innerHTML.includes("`+secret+`")`) {
			t.Errorf("%s's page holds the Sensitive value", who)
		}
	}
	check("the Creator", creator)
	creator.Screenshot("session-changes.png")

	bob := NewBrowser(t)
	s.Member(bob, "bob")
	bob.Go(s.URL+"/sessions/"+v.ID, "#changes-tab")
	bob.do(chromedp.Click(chromedp.CSS("#changes-tab")))
	bob.Wait(testenv.WaitMedium, "the watcher's Changes tab", shown+` === "modified README.md,added notes.env"`)
	check("the watcher", bob)
	bob.Screenshot("session-changes-watcher.png")

	diff := func() api.Changes {
		t.Helper()
		out, errOut, code := s.kndl("", "diff", v.ID, "--json")
		var ch api.Changes
		if code != 0 || json.Unmarshal([]byte(out), &ch) != nil {
			t.Fatalf("kndl diff --json: exit %d %q %q", code, out, errOut)
		}
		return ch
	}
	ch := diff()
	if len(ch.Files) != 2 || len(ch.Commits) != 1 || strings.Contains(ch.Files[0].Diff+ch.Files[1].Diff, secret) || ch.Base != "main" {
		t.Fatalf("kndl diff --json: %+v", ch)
	}
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil); code != http.StatusNoContent {
		t.Fatalf("sleep: %d", code)
	}
	creator.Wait(testenv.WaitMedium, "the Session asleep", `document.getElementById("state").textContent === "asleep"`)
	if asleep := diff(); len(asleep.Files) != 2 || asleep.Files[1].Diff != ch.Files[1].Diff {
		t.Fatalf("kndl diff --json of the asleep Session: %+v", asleep)
	}
}
