package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// Browser is a browser context of its own (a fresh profile's cookies and
// storage) in the headless Chromium the tests share, driven over the
// DevTools protocol.
type Browser struct {
	t   *testing.T
	ctx context.Context
	log *pageLog
}

// chromium is the one Debian chromium the tests share, started by the first
// NewBrowser and stopped by TestMain: a start costs 2 to 3 s on the CI
// host, once per Browser before. It runs in a network namespace of its
// own (chromiumNet).
var chromium struct {
	sync.Mutex
	ctx  context.Context // the browser's first tab, which starts it
	stop func()
}

// NewBrowser opens a browser context for the test in the shared chromium,
// started with the flags this closed network needs, and closes it when the
// test ends.
func NewBrowser(t *testing.T) *Browser {
	t.Helper()
	testenv.RequireCommand(t, "chromium")
	chromium.Lock()
	if chromium.ctx == nil {
		path, _ := exec.LookPath("chromium")
		netns, err := newChromiumNet()
		var inNetns []chromedp.ExecAllocatorOption
		if err == nil {
			inNetns, err = netns.options()
			if err != nil {
				netns.close()
			}
		}
		if err != nil {
			chromium.Unlock()
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp("", "kndl-e2e-chromium-")
		if err != nil {
			netns.close()
			chromium.Unlock()
			t.Fatal(err)
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append([]chromedp.ExecAllocatorOption{
			chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
			chromedp.UserDataDir(dir), chromedp.WindowSize(1400, 1000)}, inNetns...)...)
		ctx, cancel := chromedp.NewContext(alloc)
		stop := func() { cancel(); cancelAlloc(); netns.close(); os.RemoveAll(dir) }
		// The first run starts the browser, which lives as long as its
		// context: it takes no timeout.
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
			stop()
			chromium.Unlock()
			t.Fatal(err)
		}
		chromium.ctx, chromium.stop = ctx, stop
	}
	parent := chromium.ctx
	chromium.Unlock()
	log := newPageLog()
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithNewBrowserContext(), chromedp.WithListener(log.see))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	return &Browser{t: t, ctx: ctx, log: log}
}

// stopChromium stops the shared chromium, if a test started it.
func stopChromium() {
	chromium.Lock()
	defer chromium.Unlock()
	if chromium.stop != nil {
		chromium.stop()
	}
}

// contextID is the browser context b's pages are in, for the DevTools
// calls that name one.
func (b *Browser) contextID() cdp.BrowserContextID {
	return chromedp.FromContext(b.ctx).BrowserContextID
}

// do runs steps, each within testenv.WaitMedium.
func (b *Browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	for _, step := range steps {
		ctx, cancel := context.WithTimeout(b.ctx, testenv.WaitMedium)
		err := chromedp.Do(ctx, step)
		cancel()
		if err != nil {
			b.t.Fatalf("%v\n%s", err, b.seen())
		}
	}
}

// Go opens a URL and waits for the page's element sel.
func (b *Browser) Go(u, sel string) {
	b.t.Helper()
	b.do(chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS(sel)))
}

// Eval runs a script in the page and decodes its value (a promise's, once it
// settles) into T.
func Eval[T any](b *Browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// Wait polls a script in the page until it is true, for at most within.
func (b *Browser) Wait(within time.Duration, what, js string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, within+time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("%s: not within %s: %v\n%s", what, within, err, b.seen())
	}
}

// Arrive polls a script until it is true, for at most within, while the
// page may still be navigating: an answer from the page being left, or an
// error because its document went away mid-question, counts as not yet.
// (chromedp's WaitReady after a click that navigates can fail with "Could
// not find node with given id" when the old document is replaced under it.)
func (b *Browser) Arrive(within time.Duration, what, js string) {
	b.t.Helper()
	testenv.EventuallyShowing(b.t, within, func() bool {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === "complete" && !!(`+js+`)`))
		return err == nil && ok
	}, func() string { return what + "\n" + b.seen() })
}

// seen is what the page shows, for a failure to name: its address, what
// its sockets and scripts did (pageLog), the form fields' values and the
// start of its text, in that order, since a report may keep only the first
// lines.
func (b *Browser) seen() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " (" + document.readyState + (document.getElementById("session")?.classList.contains("offline") ? ", its socket down" : "") + ")"`))
	if err != nil {
		out = "a page that could not be read: " + err.Error()
	}
	out += "\n" + b.log.String()
	fields, err := chromedp.Run(ctx, chromedp.Evaluate[string](`"fields: " +
		[...document.querySelectorAll("select, input, textarea")].map((e) => (e.closest("form")?.id || "") + "." + e.name + "=" + JSON.stringify(e.value)).join(" ") +
		"\ntext: " + document.body.innerText.slice(0, 2000)`))
	if err == nil {
		out += fields
	}
	return "the page showed " + out
}

// Screenshot saves the page as a PNG under artifacts/ at the repository's
// root, for a person to look at, and returns its path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal(err)
	}
	dir, _ := filepath.Abs(filepath.Join("..", "..", "artifacts"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// Type types text into the focused element as a keyboard's input method
// would: one input event. (chromedp.KeyEvent sends a key down and a char
// for each key, which xterm.js takes as two keystrokes.)
func (b *Browser) Type(text string) {
	b.t.Helper()
	b.do(func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: text})
		return chromedp.Void{}, err
	})
}

// SetCookie puts a cookie in the browser for the site at u.
func (b *Browser) SetCookie(u, name, value string) {
	b.t.Helper()
	b.do(func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, network.SetCookie, network.SetCookieParams{Name: name, Value: value, URL: u})
		return chromedp.Void{}, err
	})
}

// FailLoads fails, as a network error, the first n of the tab's requests
// whose URL matches pattern (Fetch's wildcards; n < 0: every one), until the
// func it returns, which says how many it failed.
func (b *Browser) FailLoads(pattern string, n int) (stop func() int) {
	b.t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	b.do(func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: pattern}}})
		return chromedp.Void{}, err
	})
	var failed atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range paused {
			if err != nil {
				return
			}
			if n < 0 || failed.Load() < int64(n) {
				failed.Add(1)
				chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonInternetDisconnected})
			} else {
				chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			}
		}
	}()
	return func() int {
		b.t.Helper()
		b.do(func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, t, fetch.Disable, cdp.Empty{})
			return chromedp.Void{}, err
		})
		cancel()
		<-done
		return int(failed.Load())
	}
}

// SignInDev signs the browser in as the dev user on the sign-in page.
func (s *System) SignInDev(b *Browser) {
	b.t.Helper()
	b.Go(s.URL+"/signin", `form[action="/signin/dev"] button`)
	b.do(chromedp.Click(chromedp.CSS(`form[action="/signin/dev"] button`)))
	b.Arrive(testenv.WaitMedium, "the home page after signing in", `document.getElementById("page-home")`)
}

// Member invites a GitHub login (the dev user stands in for the Owner) and
// signs them in in b as a person does: the Invite's link, Continue with
// GitHub, and back.
func (s *System) Member(b *Browser, login string) {
	b.t.Helper()
	var inv api.InviteCreated
	s.Do(http.MethodPost, "/api/invites", map[string]string{"github_login": login}, &inv)
	s.GitHub.AddUser(login)
	b.SetCookie(s.GitHub.URL, "fake_github_login", login)
	b.Go(inv.URL, "#claim:not([disabled])")
	b.do(chromedp.Click(chromedp.CSS("#claim")))
	b.Arrive(testenv.WaitMedium, "the home page after claiming the Invite", `document.getElementById("page-home")`)
}

// GitHubRepo serves a fresh repository as owner/name on the fake GitHub and
// returns its clone URL: the Runner clones it from there, and the App's
// answers decide who may see its Sessions.
func (s *System) GitHubRepo(ownerRepo string) string {
	s.t.Helper()
	s.GitHub.ServeRepo(s.t, ownerRepo, s.Repo())
	s.GitHub.InstallApp(ownerRepo)
	return s.GitHub.RepoURL(ownerRepo)
}

// hostile is Claude's answer in the tests below: Markdown with markup and a
// javascript: link that must render inert.
const hostile = "Here is **bold** text.\n\n<script>window.pwned = 'script'</script>\n\n" +
	"<img src=x onerror=\"window.pwned='img'\">\n\n[a link](javascript:window.pwned='link') and [a page](https://example.com/)\n"

// wsecho builds testdata/wsecho, a small web app with a WebSocket.
func wsecho(t *testing.T) string { return binary(t, "kndl.dev/kndl/tests/e2e/testdata/wsecho") }

// inSandbox runs a shell command in the Session's Sandbox.
func (s *System) inSandbox(id, script string) string {
	s.t.Helper()
	out, code := s.Exec(id, "sh", "-c", script)
	if code != 0 {
		s.t.Fatalf("%s: exit %d: %s", script, code, out)
	}
	return out
}

// pane is Claude Code's screen, as tmux has it.
func (s *System) pane(id string) string {
	s.t.Helper()
	out, _ := s.Exec(id, "tmux", "-S", "/run/kndl/tmux.sock", "capture-pane", "-p", "-t", "claude")
	return out
}

// TestTheSessionViewDrivesASessionLive: the Creator opens a Session's view,
// sends a prompt from the page and sees the tool call and the answer appear
// without a reload; Markdown with markup and a javascript: link renders
// inert; the terminal tab shows Claude Code's screen and a keystroke typed
// there reaches it; a port opened in the Sandbox is listed within 3 seconds
// and its page, and a WebSocket from it, work through the forward; a file
// Claude made downloads as bytes, never as a page.
func TestTheSessionViewDrivesASessionLive(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	repo := s.GitHubRepo("acme/app")
	s.Model.On(testkit.PromptContains("say hello"), testkit.Text(hostile))
	s.Model.On(testkit.PromptContains("list the files"), testkit.Bash("ls /workspace && echo listed-by-claude"))
	s.Model.On(testkit.ToolResultContains("listed-by-claude"), testkit.Text("The listing is done: *README.md* is there."))
	v := s.NewSession(repo, "say hello")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the first turn's end", kind(protocol.EventTurnEnd))

	b := NewBrowser(t)
	s.SignInDev(b)
	b.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	b.Wait(testenv.WaitShort, "the first answer", `[...document.querySelectorAll("#transcript .ev.text strong")].some(e => e.textContent === "bold")`)

	// Inert: no script or handler made it into the page, the javascript:
	// link has no address, and nothing ran.
	inert := Eval[map[string]any](b, `({
		scripts: document.querySelectorAll("#transcript script").length,
		handlers: [...document.querySelectorAll("#transcript *")].filter(e => [...e.attributes].some(a => a.name.startsWith("on"))).length,
		hrefs: [...document.querySelectorAll("#transcript a")].map(a => a.getAttribute("href")),
		pwned: window.pwned === undefined ? "" : String(window.pwned),
	})`)
	if inert["scripts"].(float64) != 0 || inert["handlers"].(float64) != 0 || inert["pwned"] != "" {
		t.Fatalf("markup from the transcript is live: %v", inert)
	}
	for _, h := range inert["hrefs"].([]any) {
		if h != nil && strings.HasPrefix(strings.ToLower(strings.TrimSpace(h.(string))), "javascript:") {
			t.Fatalf("a javascript: link kept its address: %v", inert)
		}
	}
	if hrefs := fmt.Sprint(inert["hrefs"]); !strings.Contains(hrefs, "https://example.com/") {
		t.Fatalf("the plain link lost its address: %v", hrefs)
	}

	// A prompt from the page: the tool call and the answer appear live.
	b.do(chromedp.SendKeys(chromedp.CSS("#prompt"), "please list the files"), chromedp.Click(chromedp.CSS(`#prompt-form button[type=submit]`)))
	b.Wait(testenv.WaitMedium, "the tool call, on one line", `[...document.querySelectorAll("#transcript .ev.tool summary")].some(e => e.textContent.includes("Bash") && e.textContent.includes("echo listed-by-claude"))`)
	b.Wait(testenv.WaitMedium, "the answer after the tool", `[...document.querySelectorAll("#transcript .ev.text")].some(e => e.textContent.includes("The listing is done"))`)
	b.Wait(testenv.WaitShort, "the tool's output, on demand", `[...document.querySelectorAll("#transcript .ev.tool .tool-output")].some(e => e.textContent.includes("listed-by-claude"))`)
	if open := Eval[bool](b, `document.querySelector("#transcript .ev.tool details").open`); open {
		t.Fatal("the tool call is shown open; it should be collapsed to one line")
	}
	s.turnEnds(v.ID, 2)
	b.Wait(testenv.WaitShort, "the turn's end", `document.querySelectorAll("#transcript .ev.turn").length >= 2`)
	b.Screenshot("session-view.png")

	// The terminal: Claude Code's screen, then a keystroke reaches it.
	b.do(chromedp.Click(chromedp.CSS("#terminal-tab")))
	b.Wait(testenv.WaitMedium, "Claude Code's screen in the terminal", `(document.querySelector("#terminal .xterm-rows")?.textContent || "").includes("bypass permissions")`)
	b.do(chromedp.Click(chromedp.CSS("#terminal .xterm-screen")))
	b.Type("kndl-typed")
	deadline := time.Now().Add(testenv.WaitShort)
	for !strings.Contains(s.pane(v.ID), "kndl-typed") {
		if time.Now().After(deadline) {
			t.Fatalf("the keystrokes never reached Claude Code's input; the terminal says %q, focus on %s; the pane:\n%s",
				Eval[string](b, `document.getElementById("terminal-status").textContent`),
				Eval[string](b, `document.activeElement.className + " " + document.activeElement.tagName`), s.pane(v.ID))
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Wait(testenv.WaitShort, "the keystrokes drawn back", `document.querySelector("#terminal .xterm-rows").textContent.includes("kndl-typed")`)
	b.Screenshot("session-terminal.png")

	// Ports: an app listening on the Sandbox's loopback shows within 3 s.
	app := wsecho(t)
	raw, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Home, "sessions", v.ID, "workspace", "wsecho"), raw, 0o755); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Click(chromedp.CSS(`[data-tab="ports"]`)))
	s.inSandbox(v.ID, "/workspace/wsecho -addr 127.0.0.1:8000 >/dev/null 2>&1 &")
	started := time.Now()
	b.Wait(3*time.Second, "port 8000 in the list", `!!document.querySelector('#ports tr[data-port="8000"]')`)
	t.Logf("port 8000 listed %s after the app started", time.Since(started).Round(time.Millisecond))
	row := Eval[string](b, `document.querySelector('#ports tr[data-port="8000"]').textContent`)
	if !strings.Contains(row, "127.0.0.1") || !strings.Contains(row, "wsecho") {
		t.Fatalf("port row %q: want its address and process", row)
	}
	href := Eval[string](b, `document.querySelector('#ports tr[data-port="8000"] a').getAttribute("href")`)
	b.Go(s.URL+href, "#hello")
	b.Wait(testenv.WaitShort, "the app's WebSocket through the forward", `document.getElementById("echo").textContent === "echo: ping through the forward"`)
	if loc := Eval[string](b, "location.host"); !strings.HasPrefix(loc, "p8000-"+v.ID+".localhost:") {
		t.Fatalf("the forwarded app is served on %s, want an origin of its own", loc)
	}
	if got := Eval[string](b, "document.cookie"); got != "" {
		t.Fatalf("the forward's cookie is readable by the app's script: %q", got)
	}
	// The app never sees the forward's credential, nor who is looking.
	seen := Eval[string](b, `fetch("/headers").then(r => r.text())`)
	if strings.Contains(seen, "kndl_fwd") || strings.Contains(seen, "X-Forwarded-For") || !strings.Contains(seen, `"host":"localhost:8000"`) {
		t.Fatalf("the app got: %s", seen)
	}
	forwardOrigin := Eval[string](b, "location.origin")
	s.checkForwardGrants(v.ID, forwardOrigin)

	// A file the Session made downloads as bytes.
	s.inSandbox(v.ID, `printf '<script>alert(1)</script>' > /workspace/page.html && ln -sf /etc/passwd /workspace/escape`)
	cookie := devCookie(t, s)
	get := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/api/sessions/"+v.ID+"/files/"+path, nil)
		req.AddCookie(&http.Cookie{Name: "kndl", Value: cookie})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := get("page.html")
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("download: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := get("escape"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a link out of the Workspace: %d, want 404", resp.StatusCode)
	}

	// Once the Session is no longer Active its ports are gone.
	b.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	b.do(chromedp.Click(chromedp.CSS(`[data-tab="ports"]`)))
	b.Wait(testenv.WaitShort, "port 8000 listed", `!!document.querySelector('#ports tr[data-port="8000"]')`)
	s.inSandbox(v.ID, "tmux -S /run/kndl/tmux.sock kill-server")
	b.Wait(testenv.WaitMedium, "the ports dropped as the Session sleeps", `document.getElementById("state").textContent !== "active" && !document.querySelector("#ports tr[data-port]")`)
	if code := getStatus(t, s.URL+href, cookie); code != http.StatusNotFound {
		t.Fatalf("opening a port of a Session no longer active: %d, want 404", code)
	}

	// The Creator wakes it from the page, and changes its effort there.
	b.Wait(testenv.WaitMedium, "the Session asleep, with a Wake button", `document.getElementById("state").textContent === "asleep" && !document.getElementById("wake").hidden`)
	b.do(chromedp.Click(chromedp.CSS("#wake")))
	b.Wait(testenv.WaitMedium, "the Session awake again", `document.getElementById("state").textContent === "active"`)
	b.do(chromedp.SetValue(chromedp.CSS(`#settings-form select[name=effort]`), "high"), chromedp.Click(chromedp.CSS(`#settings-form button[type=submit]`)))
	b.Wait(testenv.WaitMedium, "the new effort shown", `document.getElementById("effort").textContent === "high"`)
}

// TestTheSessionsListIsLiveAndTheCreatorControlsASessionsLife: the
// Sessions list shows a Session's Turn running and its sleep as they
// happen, without a reload; on the Session view its Creator wakes it,
// turns Keep awake on and off with the switch and restarts Claude Code
// into the same conversation with the Restart button; a Session whose
// start failed shows why, and Retry tries it again.
func TestTheSessionsListIsLiveAndTheCreatorControlsASessionsLife(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("first of the list", "Ready for the list.")
	b := NewBrowser(t)
	s.SignInDev(b)
	row := `document.querySelector('#repos li[data-id="` + v.ID + `"]')`
	b.Go(s.URL+"/", `#repos li[data-id="`+v.ID+`"]`)
	Eval[bool](b, `window.notReloaded = true`)
	stays := func(what string) {
		t.Helper()
		if !Eval[bool](b, `window.notReloaded === true`) {
			t.Fatalf("%s: the page was reloaded", what)
		}
	}
	b.Wait(testenv.WaitShort, "the Session active, nothing running", row+`.querySelector(".state").textContent === "active" && `+row+`.querySelector(".activity").hidden`)

	// A Turn runs, then ends: the row says so as it happens.
	s.Model.On(testkit.PromptContains("take your time"), testkit.Text("Done, slowly.").Slow(3*time.Second, 0))
	s.prompt(v.ID, "take your time")
	b.Wait(testenv.WaitMedium, "the row saying a Turn runs", `!`+row+`.querySelector(".activity").hidden && `+row+`.querySelector(".activity").textContent === "a Turn runs"`)
	b.Screenshot("sessions-list-turn.png")
	s.turnEnds(v.ID, 2)
	b.Wait(testenv.WaitMedium, "the row saying the Turn is over", row+`.querySelector(".activity").hidden`)

	// Put to sleep elsewhere: the row turns asleep.
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil); code != http.StatusNoContent {
		t.Fatalf("sleep: %d", code)
	}
	b.Wait(testenv.WaitMedium, "the row asleep", row+`.querySelector(".state").textContent === "asleep"`)
	stays("the Session asleep")

	// The Session view: Wake, then Keep awake on and off, others' comments
	// as context on, then Restart.
	b.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	b.Wait(testenv.WaitShort, "an asleep Session's controls", `!document.getElementById("wake").hidden && document.getElementById("restart").hidden && document.getElementById("failed").hidden`)
	b.do(chromedp.Click(chromedp.CSS("#wake")))
	b.Wait(testenv.WaitMedium, "the Session awake, with Restart", `document.getElementById("state").textContent === "active" && !document.getElementById("restart").hidden`)
	keepAwake := func(want bool) {
		t.Helper()
		b.do(chromedp.Click(chromedp.CSS(`label.switch`)))
		testenv.Eventually(t, testenv.WaitShort, fmt.Sprintf("Keep awake %v on the Hub", want), func() bool { return s.state(v.ID).KeepAwake == want })
		b.Wait(testenv.WaitShort, "the switch settled", fmt.Sprintf(`!document.getElementById("keep-awake").disabled && document.getElementById("keep-awake").checked === %v`, want))
	}
	keepAwake(true)
	b.Screenshot("session-controls.png")
	keepAwake(false)
	keepAwake(true)
	// The switch for others' GitHub comments as context, beside it.
	b.do(chromedp.Click(chromedp.CSS(`label.switch:has(#thread-context)`)))
	testenv.Eventually(t, testenv.WaitShort, "others' comments as context on, on the Hub", func() bool { return s.state(v.ID).ThreadContext })
	b.Wait(testenv.WaitShort, "that switch settled", `!document.getElementById("thread-context").disabled && document.getElementById("thread-context").checked`)
	pid := claudePID(t, s, v.ID)
	b.do(chromedp.Click(chromedp.CSS("#restart")))
	testenv.Eventually(t, testenv.WaitMedium, "a new Claude Code", func() bool { p := claudeProcess(s, v.ID); return p != "" && p != pid })
	b.Wait(testenv.WaitMedium, "the Session active again, its restart in the history", `document.getElementById("state").textContent === "active" && document.querySelector("#transcript").textContent.includes("its Creator restarted it")`)
	if got := s.state(v.ID); !got.KeepAwake {
		t.Fatal("the restart turned Keep awake off")
	}
	s.Model.On(testkit.PromptContains("after the restart"), testkit.Text("Still the same conversation."))
	s.prompt(v.ID, "after the restart")
	s.turnEnds(v.ID, 3)
	if !lastRequestHas(s.Model, "first of the list") {
		t.Fatal("the restart lost the conversation")
	}

	// A start that fails: the reason and Retry.
	bad := s.NewSession("file:///nonexistent/repository", "never starts")
	s.waitState(bad.ID, api.Failed)
	b.Go(s.URL+"/sessions/"+bad.ID, "#transcript")
	b.Wait(testenv.WaitShort, "the reason it failed, with Retry", `!document.getElementById("failed").hidden && document.getElementById("failed-reason").textContent.length > 0 && !document.getElementById("retry").hidden && document.getElementById("wake").hidden`)
	reason := Eval[string](b, `document.getElementById("failed-reason").textContent`)
	if want := s.state(bad.ID).StateDetail; reason != want {
		t.Fatalf("the page says it failed as %q, the API %q", reason, want)
	}
	b.Screenshot("session-failed.png")
	starts := func() int {
		n := 0
		for _, e := range s.Events(bad.ID) {
			if e.Kind == protocol.EventNote && strings.HasPrefix(e.Text, "Starting: ") {
				n++
			}
		}
		return n
	}
	before := starts()
	b.do(chromedp.Click(chromedp.CSS("#retry")))
	testenv.Eventually(t, testenv.WaitMedium, "the start tried again", func() bool { return starts() > before })
	b.Wait(testenv.WaitMedium, "failed again, saying why", `document.getElementById("state").textContent === "failed" && !document.getElementById("failed").hidden`)

	// The list: both rows as they are now.
	b.Go(s.URL+"/", `#repos li[data-id="`+bad.ID+`"]`)
	b.Wait(testenv.WaitShort, "both rows", `document.querySelector('#repos li[data-id="`+bad.ID+`"] .state').textContent === "failed" && !`+row+`.querySelector(".keep-awake").hidden`)
	b.Screenshot("sessions-list.png")
}

// getStatus GETs u with the sign-in cookie, following no redirect.
func getStatus(t *testing.T, u, cookie string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.AddCookie(&http.Cookie{Name: "kndl", Value: cookie})
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// checkForwardGrants checks who gets through a forward origin: nobody
// without its cookie, nobody with a used or made-up code, and a grant for
// one port opens no other.
func (s *System) checkForwardGrants(id, origin string) {
	s.t.Helper()
	t := s.t
	u, _ := url.Parse(origin)
	send := func(host, path string, hdr http.Header) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		req.Host = host
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := send(u.Host, "/", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the forward without its cookie: %d, want 401", resp.StatusCode)
	}
	if resp := send(u.Host, "/", http.Header{"Accept": {"text/html"}}); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), s.URL+"/sessions/"+id+"/ports/8000") {
		t.Fatalf("a page on the forward without its cookie: %d %s, want a trip through the Hub", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := send(u.Host, "/.kndl/forward?code=made-up&next=/", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a made-up code: %d, want 403", resp.StatusCode)
	}
	cookie := devCookie(t, s)
	resp := send(strings.TrimPrefix(s.URL, "http://"), "/sessions/"+id+"/ports/8000", http.Header{"Cookie": {"kndl=" + cookie}})
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Host != u.Host {
		t.Fatalf("opening the port: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	first := send(u.Host, loc.RequestURI(), nil)
	var grant string
	for _, c := range first.Cookies() {
		if c.Name == "kndl_fwd" && c.HttpOnly {
			grant = c.Value
		}
	}
	if first.StatusCode != http.StatusSeeOther || grant == "" {
		t.Fatalf("using the code: %d %v", first.StatusCode, first.Header)
	}
	if again := send(u.Host, loc.RequestURI(), nil); again.StatusCode != http.StatusForbidden {
		t.Fatalf("using the code again: %d, want 403", again.StatusCode)
	}
	other := strings.Replace(u.Host, "p8000-", "p8001-", 1)
	if resp := send(other, "/", http.Header{"Cookie": {"kndl_fwd=" + grant}}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("port 8000's grant on port 8001: %d, want 401", resp.StatusCode)
	}
	if resp := send(u.Host, "/headers", http.Header{"Cookie": {"kndl_fwd=" + grant}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("the grant on its own port: %d, want 200", resp.StatusCode)
	}
}

// devCookie signs the dev user in over HTTP and returns the cookie.
func devCookie(t testing.TB, s *System) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/signin/dev", strings.NewReader(url.Values{"next": {"/"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.URL)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "kndl" {
			return c.Value
		}
	}
	t.Fatalf("dev sign-in set no cookie: %d", resp.StatusCode)
	return ""
}

// TestAWatcherSeesTheTranscriptButNeitherDrivesNorSeesTheTerminal: a
// second Member with access to the Repo sees the transcript live, but the
// page has no prompt box, no stop-turn and no terminal tab, the API refuses
// their prompt, and forcing the terminal's messages on the WebSocket gets
// them an error and never a terminal frame, while the Creator's terminal
// streams.
func TestAWatcherSeesTheTranscriptButNeitherDrivesNorSeesTheTerminal(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	repo := s.GitHubRepo("acme/app")
	s.GitHub.SetCollaborator("acme/app", "bob", true)
	s.Model.On(testkit.PromptContains("say hello"), testkit.Text("Hello, watchers."))
	s.Model.On(testkit.PromptContains("second prompt"), testkit.Bash("echo second-turn").Slow(300*time.Millisecond, 0))
	s.Model.On(testkit.ToolResultContains("second-turn"), testkit.Text("The second answer, live."))
	v := s.NewSession(repo, "say hello")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the first turn's end", kind(protocol.EventTurnEnd))

	creator := NewBrowser(t)
	s.SignInDev(creator)
	creator.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	creator.do(chromedp.Click(chromedp.CSS("#terminal-tab")))
	creator.Wait(testenv.WaitMedium, "the Creator's terminal", `(document.querySelector("#terminal .xterm-rows")?.textContent || "").includes("bypass permissions")`)

	bob := NewBrowser(t)
	s.Member(bob, "bob")
	bob.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	bob.Wait(testenv.WaitShort, "the transcript", `document.querySelector("#transcript").textContent.includes("Hello, watchers.")`)
	absent := Eval[[]string](bob, `["#prompt-form", "#prompt", "#stop-turn", "#terminal-tab", "#pane-terminal", "#queue-box", "[data-action=cancel-prompt]", "#settings-form", "#sleep", "#wake", "#restart", "#keep-awake", "#thread-context", "#retry", "#archive", "#restore"].filter(s => document.querySelector(s))`)
	if len(absent) > 0 {
		t.Fatalf("the watcher's page holds what only the Creator may use: %v", absent)
	}
	status := Eval[float64](bob, `fetch("/api/sessions/`+v.ID+`/prompts", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({text: "bob was here"})}).then(r => r.status)`)
	if status != http.StatusForbidden {
		t.Fatalf("the watcher's prompt: %v, want 403", status)
	}

	// Force the terminal on the WebSocket while the Creator's streams.
	forced := make(chan []map[string]any, 1)
	go func() {
		forced <- Eval[[]map[string]any](bob, `new Promise((resolve) => {
			const got = [];
			const ws = new WebSocket("ws://" + location.host + "/api/sessions/`+v.ID+`/live?after=1000000");
			ws.onopen = () => {
				ws.send(JSON.stringify({type: "terminal.open"}));
				ws.send(JSON.stringify({type: "terminal.fit", cols: 80, rows: 24}));
				ws.send(JSON.stringify({type: "terminal.input", data: "bob-typed\r", cols: 80, rows: 24}));
				setTimeout(() => ws.send(JSON.stringify({type: "terminal.open"})), 1500);
			};
			ws.onmessage = (m) => { const x = JSON.parse(m.data); got.push({type: x.type, message: x.message || ""}); };
			setTimeout(() => { ws.close(); resolve(got); }, 6000);
		})`)
	}()
	s.prompt(v.ID, "second prompt")
	bob.Wait(testenv.WaitMedium, "the second answer, live", `document.querySelector("#transcript").textContent.includes("The second answer, live.")`)
	creator.Wait(testenv.WaitMedium, "the Creator's terminal drawing the turn", `document.querySelector("#terminal .xterm-rows").textContent.includes("second prompt")`)
	var got []map[string]any
	select {
	case got = <-forced:
	case <-time.After(testenv.WaitMedium):
		t.Fatal("the forced WebSocket never finished")
	}
	refused := 0
	for _, m := range got {
		if strings.HasPrefix(m["type"].(string), "terminal") {
			t.Fatalf("the watcher got a terminal frame: %v", got)
		}
		if m["type"] == "error" && strings.Contains(m["message"].(string), "only the Session's Creator") {
			refused++
		}
	}
	if refused != 4 {
		t.Fatalf("the watcher's 4 terminal messages were not each refused: %v", got)
	}
	if strings.Contains(s.pane(v.ID), "bob-typed") {
		t.Fatal("the watcher's keystrokes reached Claude Code")
	}
	var view api.SessionView
	s.Do(http.MethodGet, "/api/sessions/"+v.ID, nil, &view)
	if view.State != api.Active {
		t.Fatalf("session %s", view.State)
	}
}

// TestTheAppPagesPairARunnerAndStoreAToken: the Runners page pairs a Runner
// and shows its token once with the exact command, says whose it is, and
// shares it for the Owner; the Account page stores a setup token without
// ever showing it; the Members page invites. A page whose script fails to
// load loads itself again, three times at most, then says so.
func TestTheAppPagesPairARunnerAndStoreAToken(t *testing.T) {
	t.Parallel()
	s := Start(t)
	b := NewBrowser(t)
	s.SignInDev(b)

	// A page whose script failed to load (a browser on the Runner's host
	// meets a network change at each Sandbox's start) loads itself again.
	stop := b.FailLoads("*/static/runners.js", 2)
	b.Go(s.URL+"/runners", "#pair")
	b.Arrive(testenv.WaitMedium, "the Runners page loaded again until its script ran",
		`performance.getEntriesByType("navigation")[0].type === "reload" && sessionStorage.getItem("kndl-reloads") === null`)
	if n := stop(); n != 2 {
		t.Fatalf("failed %d loads of runners.js, want 2", n)
	}
	b.do(chromedp.SendKeys(chromedp.CSS(`#pair input[name=name]`), "box-2"), chromedp.Click(chromedp.CSS(`#pair button[type=submit]`)))
	b.Wait(testenv.WaitShort, "the pairing command", `!document.getElementById("paired").hidden`)
	cmd := Eval[string](b, `document.getElementById("pair-command").textContent`)
	if !strings.HasPrefix(cmd, "RUNNER_TOKEN=kndlr_") || !strings.HasSuffix(cmd, " KNDL_HUB_URL="+s.URL+" kndl runner") {
		t.Fatalf("pairing command %q", cmd)
	}
	b.Go(s.URL+"/runners", "#runners")
	if rows := Eval[string](b, `document.getElementById("runners").textContent`); !strings.Contains(rows, "box-2") || strings.Contains(rows, "kndlr_") {
		t.Fatalf("runners list %q: want box-2 listed and no token", rows)
	}
	box2 := func() (r api.RunnerStatus) {
		var rs []api.RunnerStatus
		s.Do(http.MethodGet, "/api/runners", nil, &rs)
		for _, r = range rs {
			if r.Name == "box-2" {
				return r
			}
		}
		t.Fatalf("box-2 is not listed: %+v", rs)
		return r
	}
	// The connected Runner's row names the sandbox backend it runs.
	backend := "crun"
	if runtime, _ := sandboxRuntime(t); runtime == "runsc" {
		backend = "gvisor"
	}
	e2e, err := s.Store.Runners.RunnerByName(context.Background(), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	if got := Eval[string](b, `document.querySelector('#runners tr[data-id="`+e2e.ID+`"]').textContent`); !strings.Contains(got, "connected") || !strings.Contains(got, backend) {
		t.Fatalf("the e2e Runner's row %q: want it connected on %s", got, backend)
	}
	row := `document.querySelector('#runners tr[data-id="` + box2().ID + `"]')`
	if got := Eval[string](b, row+`.textContent`); !strings.Contains(got, "dev only") {
		t.Fatalf("box-2's row %q: want it the dev user's alone", got)
	}
	// The Owner (the dev user stands in for one) shares it from the page.
	Eval[bool](b, `(window.beforeShare = true, window.confirm = () => true, `+row+`.querySelector("[data-action=share]").click(), true)`)
	testenv.Eventually(t, testenv.WaitShort, "box-2 shared", func() bool { return box2().Shared })
	if r := box2(); r.Owner != "dev" {
		t.Fatalf("box-2 after Share: %+v, want it still the dev user's", r)
	}
	// The page reloads itself: asked while it navigates, it answers nothing.
	shown := `!window.beforeShare && document.readyState === "complete" && ` + row + `.textContent`
	testenv.Eventually(t, testenv.WaitShort, "the page shows box-2 shared, with Unshare", func() bool {
		got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(`+shown+`) || ""`))
		return err == nil && strings.Contains(got, "shared: everyone") && strings.Contains(got, "Unshare")
	})

	const token = "sk-ant-oat01-a-new-setup-token-from-the-page-0123456789"
	b.Go(s.URL+"/account", "#token-form")
	b.do(chromedp.SendKeys(chromedp.CSS(`#token-form input[name=token]`), token), chromedp.Click(chromedp.CSS(`#token-form button[type=submit]`)))
	b.Wait(testenv.WaitShort, "the token stored", `document.getElementById("token-state")?.textContent.startsWith("Stored")`)
	b.Go(s.URL+"/account", "#token-form")
	if html := Eval[string](b, "document.documentElement.outerHTML"); strings.Contains(html, token) || strings.Contains(html, claudeToken) {
		t.Fatal("the Account page shows a setup token")
	}

	// One whose script never loads stops trying, and says so.
	stop = b.FailLoads("*/static/members.js", -1)
	b.Go(s.URL+"/members", "#invite")
	b.Arrive(testenv.WaitMedium, "the Members page saying its script did not load",
		`document.getElementById("script-failed")?.textContent.startsWith("This page's script did not load (4 tries)")`)
	if n := stop(); n != 4 {
		t.Fatalf("failed %d loads of members.js, want 4: one, then three more", n)
	}
	b.Go(s.URL+"/members", "#invite")
	b.do(chromedp.SendKeys(chromedp.CSS(`#invite input[name=login]`), "carol"), chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))
	b.Wait(testenv.WaitShort, "the Invite's link", `document.getElementById("invite-link").textContent.startsWith("`+s.URL+`/invite#kndli_")`)
	b.Screenshot("members.png")

	// The audit log, linked for the Owner, lists what the pages did, by
	// name and with none of their secrets.
	b.Go(s.URL+"/audit", "#audit")
	log := Eval[string](b, `document.getElementById("audit").textContent`)
	for _, act := range []string{"runner.paired", "runner.shared", "setup_token.stored", "invite.made", "@carol", "box-2"} {
		if !strings.Contains(log, act) {
			t.Errorf("the audit log page lacks %s:\n%s", act, log)
		}
	}
	if strings.Contains(log, "kndlr_") || strings.Contains(log, "kndli_") || strings.Contains(log, token) {
		t.Fatalf("the audit log page shows a secret:\n%s", log)
	}
	if !strings.Contains(Eval[string](b, `document.getElementById("chain").textContent`), "The chain holds") {
		t.Fatal("the audit log page does not say its chain holds")
	}
	b.Screenshot("audit.png")

	// With a sign-in older than HUB_SUDO_MAX_AGE, inviting sends the
	// browser to sign in again and back to the Members page, where it
	// invites.
	s.ageSignIns(11 * time.Minute)
	b.Go(s.URL+"/members", "#invite")
	b.do(chromedp.SendKeys(chromedp.CSS(`#invite input[name=login]`), "dave"), chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))
	b.Arrive(testenv.WaitShort, "the sign-in page, to come back to Members", `location.pathname === "/signin" && `+
		`document.querySelector('form[action="/signin/dev"] input[name=next]')?.value === "/members"`)
	b.do(chromedp.Click(chromedp.CSS(`form[action="/signin/dev"] button`)))
	b.Arrive(testenv.WaitMedium, "the Members page after signing in again", `location.pathname === "/members" && document.getElementById("page-members")`)
	b.do(chromedp.SendKeys(chromedp.CSS(`#invite input[name=login]`), "dave"), chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))
	b.Wait(testenv.WaitShort, "the Invite's link after signing in again", `document.getElementById("invite-link").textContent.startsWith("`+s.URL+`/invite#kndli_")`)
}

// ageSignIns makes every browser sign-in, and the sign-in behind every CLI
// token, d older, in the store's file from outside the Hub.
func (s *System) ageSignIns(d time.Duration) {
	s.t.Helper()
	db, err := sql.Open("sqlite", "file:"+s.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		s.t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`UPDATE signins SET created_at = created_at - ?`, `UPDATE cli_tokens SET signed_in_at = signed_in_at - ?`} {
		if _, err := db.Exec(q, d.Milliseconds()); err != nil {
			s.t.Fatal(err)
		}
	}
}
