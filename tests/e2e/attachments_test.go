package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// promptTo is the model call that carried the prompt with text in it.
func (s *System) promptTo(text string) testkit.Message {
	s.t.Helper()
	for _, r := range s.Model.Turns() {
		m := r.LastUser()
		if slices.ContainsFunc(m.Texts(), func(x string) bool { return strings.Contains(x, text) }) && len(m.ToolResults()) == 0 {
			return m
		}
	}
	s.t.Fatalf("no model call carried the prompt %q", text)
	return testkit.Message{}
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// WatchedRepo serves acme/app on the fake GitHub with bob a collaborator
// (a watcher of the dev user's Sessions there), adds it to the Hub with a
// Sensitive Variable name of value, and returns its clone URL.
func (s *System) WatchedRepo(name, value string) string {
	s.t.Helper()
	repo := s.GitHubRepo("acme/app")
	s.GitHub.SetCollaborator("acme/app", "bob", true)
	var r api.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": repo}, &r)
	s.Do(http.MethodPut, "/api/repos/"+r.ID+"/variables/"+name, api.VariableRequest{Value: value, Sensitive: true}, &api.Variable{})
	return repo
}

// TestAttachedFilesReachClaudeAndEveryoneWithAccessDownloadsThem: an image
// and a text file attached to a prompt with kndl prompt --attach reach the
// model with the prompt, the image as an image block, the text with the
// Session's Sensitive value masked; in the Sandbox they are in the
// Workspace, left out of git. A watcher sees them on the prompt and
// downloads each as an attachment, bytes as stored. The Creator attaches a
// file from the page's file picker, and it reaches the model too.
func TestAttachedFilesReachClaudeAndEveryoneWithAccessDownloadsThem(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	const secret = "att4ch-s3cret-value-e2e"
	repo := s.WatchedRepo("NOTES_SECRET", secret)
	s.Model.On(testkit.PromptContains("say hello"), testkit.Text("Hello."))
	s.Model.On(testkit.PromptContains("look at these"), testkit.Text("I see a picture and your notes."))
	s.Model.On(testkit.PromptContains("from the page"), testkit.Text("Got the page's file too."))
	v := s.NewSession(repo, "say hello")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the first turn's end", kind(protocol.EventTurnEnd))

	dir := t.TempDir()
	img := image.NewRGBA(image.Rect(0, 0, 48, 32))
	for x := range 48 {
		for y := range 32 {
			img.Set(x, y, color.RGBA{uint8(x * 5), 90, uint8(y * 8), 255})
		}
	}
	var pic bytes.Buffer
	png.Encode(&pic, img)
	shot, notes := filepath.Join(dir, "shot.png"), filepath.Join(dir, "my notes.txt")
	notesText := "the notes read zebra-attachment\nkey=" + secret + "\n"
	os.WriteFile(shot, pic.Bytes(), 0o644)
	os.WriteFile(notes, []byte(notesText), 0o644)
	masked := strings.ReplaceAll(notesText, secret, strings.Repeat("*", len(secret)))

	out, errOut, code := s.kndl("", "prompt", v.ID, "--attach", shot, "--attach", notes, "look at these")
	if code != 0 || !strings.Contains(out, "with shot.png, my notes.txt") {
		t.Fatalf("kndl prompt --attach: exit %d %q %q", code, out, errOut)
	}
	s.WaitEvent(v.ID, testenv.WaitMedium, "Claude's answer", func(e protocol.Event) bool { return e.Text == "I see a picture and your notes." })
	m := s.promptTo("look at these")
	images := m.Images()
	if len(images) != 1 || images[0].Source.MediaType != "image/png" || images[0].Source.Data != base64.StdEncoding.EncodeToString(pic.Bytes()) {
		t.Fatalf("the model got images %d, want the PNG byte for byte as an image block", len(images))
	}
	texts := strings.Join(m.Texts(), "\n")
	if !strings.Contains(texts, "zebra-attachment") || strings.Contains(texts, secret) || !strings.Contains(texts, "key="+strings.Repeat("*", len(secret))) {
		t.Fatalf("the model's prompt message lacks the notes, or holds the Sensitive value:\n%s", texts)
	}

	status := s.inSandbox(v.ID, "cd /workspace && ls .kndl/attachments/*/ && git status --porcelain")
	if !strings.Contains(status, "shot.png") || !strings.Contains(status, "my_notes.txt") || strings.Contains(status, "?? .kndl") {
		t.Fatalf("in the Sandbox: %q; want the files in the Workspace and git not seeing them", status)
	}

	// Bob watches: the prompt shows its files, and each downloads as an
	// attachment, never shown on the Hub's origin.
	bob := NewBrowser(t)
	s.Member(bob, "bob")
	bob.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	bob.Wait(testenv.WaitShort, "the prompt's files", `[...document.querySelectorAll("#transcript .ev.prompt a.attachment")].map(a => a.textContent).join(",") === "shot.png,my notes.txt"`)
	if text := Eval[string](bob, `[...document.querySelectorAll("#transcript .ev.prompt .text")].map(e => e.textContent).join("|")`); strings.Contains(text, "Attached:") {
		t.Fatalf("the prompt's text still shows the lines naming its files: %q", text)
	}
	if Eval[bool](bob, `!!document.querySelector("#attach-input")`) {
		t.Fatal("the watcher's page has the file picker")
	}
	got := Eval[[]string](bob, `Promise.all([...document.querySelectorAll("#transcript .ev.prompt a.attachment")].map(async (a) => {
		const r = await fetch(a.href);
		const sum = new Uint8Array(await crypto.subtle.digest("SHA-256", await r.arrayBuffer()));
		return [r.status, r.headers.get("content-type"), r.headers.get("content-disposition"), r.headers.get("x-content-type-options"),
			r.headers.get("content-security-policy"), Array.from(sum, (x) => x.toString(16).padStart(2, "0")).join("")].join(" | ");
	}))`)
	want := []string{
		fmt.Sprintf("200 | application/octet-stream | attachment; filename=shot.png | nosniff | default-src 'none'; sandbox | %s", sha(pic.Bytes())),
		fmt.Sprintf(`200 | application/octet-stream | attachment; filename="my notes.txt" | nosniff | default-src 'none'; sandbox | %s`, sha([]byte(masked))),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("bob's downloads:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The Creator attaches a file from the page.
	page := filepath.Join(dir, "from-page.md")
	os.WriteFile(page, []byte("# Picked in the browser\nthe page file says hi\n"), 0o644)
	b := NewBrowser(t)
	s.SignInDev(b)
	b.Go(s.URL+"/sessions/"+v.ID, "#prompt-form")
	b.do(chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{page}))
	b.Wait(testenv.WaitShort, "the picked file listed", `document.querySelector("#attach-list .chip")?.textContent.includes("from-page.md")`)
	b.Screenshot("session-attach-picked.png")
	b.do(chromedp.SendKeys(chromedp.CSS("#prompt"), "and this one, from the page"), chromedp.Click(chromedp.CSS(`#prompt-form button[type=submit]`)))
	b.Wait(testenv.WaitMedium, "Claude's answer", `document.querySelector("#transcript").textContent.includes("Got the page's file too.")`)
	b.Wait(testenv.WaitShort, "the page's prompt with its file", `[...document.querySelectorAll("#transcript .ev.prompt a.attachment")].some(a => a.textContent === "from-page.md")`)
	if !Eval[bool](b, `document.querySelector("#attach-list").hidden`) {
		t.Fatal("the picked file is still listed for the next prompt")
	}
	if texts := strings.Join(s.promptTo("from the page").Texts(), "\n"); !strings.Contains(texts, "the page file says hi") {
		t.Fatalf("the model's prompt message lacks the page's file:\n%s", texts)
	}
	b.Screenshot("session-attachments.png")
}
