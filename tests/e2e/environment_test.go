package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestAnEnvironmentAppliesAfterItsTestBuildAndSessionsStartOnIt: a draft
// with a Bootstrap script that installs a tool and a Start script can't be
// applied before a Test build; kndl env test runs both on a Runner, its
// log live; once it passed the draft applies, and a new Session's Claude
// has the tool, the login environment's PATH from ~/.bashrc, the Start
// script's work in /workspace and what it added to the login environment, with the Start script's output in its
// start log. A Bootstrap script that fails fails the Test build with its
// last lines.
func TestAnEnvironmentAppliesAfterItsTestBuildAndSessionsStartOnIt(t *testing.T) {
	t.Parallel()
	s := Start(t)
	repo := s.Repo()
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap.sh")
	os.WriteFile(bootstrap, []byte("mkdir -p /opt/envtool/bin\nprintf '#!/bin/sh\\necho envtool says hi\\n' > /opt/envtool/bin/envtool\nchmod +x /opt/envtool/bin/envtool\necho 'export PATH=/opt/envtool/bin:$PATH' >> /root/.bashrc\necho bootstrap done for "+dir+"\n"), 0o644) // a fresh Build each run
	start := filepath.Join(dir, "start.sh")
	os.WriteFile(start, []byte("echo \"start ran in $(pwd) with $(envtool)\"\ntouch .start-ran\necho 'export FROM_START=set-by-start' >> /root/.bashrc\n"), 0o644)

	if out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--bootstrap-file", bootstrap, "--start-file", start); code != 0 || !strings.Contains(out, "kndl env test must pass") {
		t.Fatalf("kndl env edit: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 1 || !strings.Contains(errOut, "kndl env test") {
		t.Fatalf("kndl env apply before a Test build: exit %d\n%s\n%s; want refused, naming kndl env test", code, out, errOut)
	}
	out, errOut, code := s.kndl("", "env", "test", "--repo", repo)
	if code != 0 || !strings.Contains(out, "bootstrap done for "+dir) || !strings.Contains(out, "start ran in /workspace with envtool says hi") || !strings.Contains(out, "The Test build passed") {
		t.Fatalf("kndl env test: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 || !strings.Contains(out, "Applied version 1") {
		t.Fatalf("kndl env apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, _, _ := s.kndl("", "env", "log", "--repo", repo); !strings.Contains(out, "Bootstrap script added") || strings.Contains(out, "envtool") {
		t.Fatalf("kndl env log:\n%s\nwant the change, the script not shown", out)
	}

	s.Model.On(testkit.PromptContains("use the tool"), testkit.Bash("envtool; ls /workspace/.start-ran; echo $FROM_START"))
	s.Model.On(testkit.ToolResultContains("envtool says hi"), testkit.Text("The tool is there."))
	v := s.NewSession(repo, "use the tool")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the Turn's answer", func(e protocol.Event) bool { return e.Text == "The tool is there." })
	evs := s.Events(v.ID)
	if r := toolResult(evs, "Bash"); !strings.Contains(r, "envtool says hi") || !strings.Contains(r, "/workspace/.start-ran") || !strings.Contains(r, "set-by-start") {
		t.Fatalf("Claude's Bash gave %q, want the Bootstrap's tool, the Start script's file and what it put in the login environment", r)
	}
	if _, ok := findEvent(evs, func(e protocol.Event) bool {
		return e.Kind == protocol.EventLog && strings.Contains(e.Text, "start: start ran in /workspace")
	}); !ok {
		t.Fatalf("no Start script output in the start log:\n%s", dump(evs))
	}

	// A newer version reaches the Session at its restart, on a new
	// Sandbox of the new Build; the Workspace stays.
	bootstrap2 := filepath.Join(dir, "bootstrap2.sh")
	os.WriteFile(bootstrap2, []byte("printf '#!/bin/sh\\necho second tool for "+dir+"\\n' > /usr/local/bin/envtool2\nchmod +x /usr/local/bin/envtool2\n"), 0o644)
	s.kndl("", "env", "edit", "--repo", repo, "--bootstrap-file", bootstrap2)
	if out, errOut, code := s.kndl("", "env", "test", "--repo", repo); code != 0 {
		t.Fatalf("the second version's Test build: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 || !strings.Contains(out, "Applied version 2") {
		t.Fatalf("kndl env apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, _, _ := s.kndl("", "show", v.ID); !strings.Contains(out, "version 1; version 2 waits for its next wake or restart") {
		t.Fatalf("kndl show:\n%s\nwant version 2 waiting", out)
	}
	if page := sessionPageHTML(t, s, v.ID); !strings.Contains(page, "Environment version 1; version 2 waits for its next wake or restart") {
		t.Fatalf("the Session view says nothing of version 2 waiting:\n%s", page)
	}
	if out, errOut, code := s.kndl("", "restart", v.ID); code != 0 {
		t.Fatalf("kndl restart: exit %d\n%s\n%s", code, out, errOut)
	}
	s.Model.On(testkit.PromptContains("the second tool"), testkit.Bash("envtool2; ls /workspace/.start-ran"))
	s.Model.On(testkit.ToolResultContains("second tool for"), testkit.Text("The second tool is there."))
	s.prompt(v.ID, "use the second tool")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the second tool's answer", func(e protocol.Event) bool { return e.Text == "The second tool is there." })
	if out, _, _ := s.kndl("", "show", v.ID); strings.Contains(out, "waits for its next wake") {
		t.Fatalf("kndl show after the restart:\n%s\nwant no version waiting", out)
	}

	bad := filepath.Join(dir, "bad.sh")
	os.WriteFile(bad, []byte("echo first\necho 'the real reason' >&2\nexit 3\n"), 0o644)
	s.kndl("", "env", "edit", "--repo", repo, "--bootstrap-file", bad)
	out, errOut, code = s.kndl("", "env", "test", "--repo", repo)
	if code != 1 || !strings.Contains(out, "the real reason") || !strings.Contains(errOut, "the Test build failed") {
		t.Fatalf("a failing Bootstrap's Test build: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 1 || !strings.Contains(errOut, "failed") {
		t.Fatalf("apply after a failed Test build: exit %d\n%s", code, errOut)
	}

	// --file is the whole settings: what it leaves out is the default, and
	// a field it misspells is refused.
	settings := filepath.Join(dir, "settings.json")
	os.WriteFile(settings, []byte(`{"imgae":"debian:12"}`), 0o644)
	if _, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--file", settings); code != 1 || !strings.Contains(errOut, "unknown field") {
		t.Fatalf("kndl env edit --file with a misspelt field: exit %d\n%s", code, errOut)
	}
	os.WriteFile(settings, []byte(`{"cpus":2}`), 0o644)
	if out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--file", settings, "--json"); code != 0 || !strings.Contains(out, `"cpus": 2`) || !strings.Contains(out, "Bootstrap script removed") {
		t.Fatalf("kndl env edit --file: exit %d\n%s\n%s", code, out, errOut)
	}
}

// applyVersion applies the Repo's draft, which must become version n, and
// checks that the change log has change.
func (s *System) applyVersion(repo string, n int, change string) {
	s.t.Helper()
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 || !strings.Contains(out, fmt.Sprintf("Applied version %d", n)) {
		s.t.Fatalf("kndl env apply: exit %d\n%s\n%s; want version %d", code, out, errOut, n)
	}
	if out, _, _ := s.kndl("", "env", "log", "--repo", repo); !strings.Contains(out, change) {
		s.t.Fatalf("kndl env log:\n%s\nwant %q", out, change)
	}
}

func findEvent(evs []protocol.Event, match func(protocol.Event) bool) (protocol.Event, bool) {
	for _, e := range evs {
		if match(e) {
			return e, true
		}
	}
	return protocol.Event{}, false
}

// TestTheRepoPageEditsTestsAndAppliesAnEnvironment: on the Repo's page a
// person writes a Bootstrap script and dependency folders, is refused an apply before a Test
// build, runs one and sees its log there, and applies it; the change log
// shows the version.
func TestTheRepoPageEditsTestsAndAppliesAnEnvironment(t *testing.T) {
	t.Parallel()
	s, b, repo := repoPage(t)
	// A script of this run's own, so the Build is made fresh.
	script := "echo 'from the page: tab\there'\n# " + repo.ID + "\n"
	Eval[bool](b, `(() => { const f = document.getElementById("draft"); f.bootstrap.value = `+strconv.Quote(script)+`; f.cpus.value = "1"; `+
		`f.dependency_folders.value = "node_modules, .venv"; f.next_to.value = "package.json=node_modules, pyproject.toml = .venv"; f.requestSubmit(); return true })()`)
	b.Wait(testenv.WaitMedium, "the draft saved", `document.getElementById("draft-state").textContent.includes("run a Test build before applying")`)
	Eval[bool](b, `(document.querySelector('[data-action="env-apply"]').click(), true)`)
	b.Wait(testenv.WaitMedium, "apply refused", `!document.getElementById("env-error").hidden && document.getElementById("env-error").textContent.includes("Test build")`)
	Eval[bool](b, `(document.querySelector('[data-action="env-test"]').click(), true)`)
	b.Wait(testenv.WaitBuild, "the Test build's log", `document.getElementById("test-log").textContent.includes("The Test build passed.")`)
	if log := Eval[string](b, `document.getElementById("test-log").textContent`); !strings.Contains(log, "from the page: tab\there") {
		t.Fatalf("the Test build's log:\n%s\nwant the script's output, its tab kept", log)
	}
	Eval[bool](b, `(document.querySelector('[data-action="env-apply"]').click(), true)`)
	b.Wait(testenv.WaitMedium, "version 1", `document.getElementById("env-current").textContent.includes("Version 1") && document.querySelectorAll("#env-log tbody tr").length === 1`)
	b.Screenshot("repo-environment.png")
	var env api.Environment
	s.Do(http.MethodGet, "/api/repos/"+repo.ID+"/environment", nil, &env)
	if c := env.Current.Settings; c.Bootstrap != script || c.CPUs != 1 || strings.Join(c.DependencyFolders, " ") != "node_modules .venv" ||
		len(c.NextTo) != 2 || c.NextTo["package.json"] != "node_modules" || c.NextTo["pyproject.toml"] != ".venv" {
		t.Fatalf("version 1 holds %+v, want the page's script byte for byte and its dependency folders", env.Current.Settings)
	}
	if settings := Eval[string](b, `document.getElementById("env-settings").textContent`); !strings.Contains(settings, "next to:            package.json=node_modules, pyproject.toml=.venv") {
		t.Fatalf("the current version shows:\n%s\nwant its Next to files", settings)
	}

	// Docker is a build input: ticking it makes a draft that needs a Test
	// build.
	Eval[bool](b, `(() => { const f = document.getElementById("draft"); f.docker.checked = true; f.requestSubmit(); return true })()`)
	b.Wait(testenv.WaitMedium, "the Docker draft saved", `document.getElementById("draft-state").textContent.includes("run a Test build before applying")`)
	s.Do(http.MethodGet, "/api/repos/"+repo.ID+"/environment", nil, &env)
	if d := env.Draft; d == nil || !d.Settings.Docker || !d.NeedsTest || !slices.Contains(d.Changes, "docker: off -> on") || d.Settings.Bootstrap != script {
		t.Fatalf("the draft after ticking Docker: %+v, want Docker on, the rest kept, needing a Test build", d)
	}
}

// repoPage is a new Repo's page, its Environment with no version yet, in
// a browser signed in as the dev user.
func repoPage(t *testing.T) (*System, *Browser, api.Repo) {
	s := Start(t)
	b := NewBrowser(t)
	s.SignInDev(b)
	var repo api.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": s.Repo()}, &repo)
	b.Go(s.URL+"/repos/"+repo.ID, "#draft")
	b.Wait(testenv.WaitMedium, "the current version", `document.getElementById("env-current").textContent.includes("No version yet")`)
	return s, b, repo
}

// sessionPageHTML is the Session view's page as the dev user gets it.
func sessionPageHTML(t *testing.T, s *System, id string) string {
	t.Helper()
	return pageHTML(t, s, "/sessions/"+id)
}

// pageHTML is the Hub's page at path as the dev user gets it.
func pageHTML(t *testing.T, s *System, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
	req.AddCookie(&http.Cookie{Name: "kndl", Value: devCookie(t, s)})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestAnEnvironmentsDependencyFolderIsOnItsDiskThroughASleepAndANewSandbox: with
// node_modules as a dependency folder, next to package.json, a Repo's
// web/package.json gets web/node_modules bound to the dependency disk at
// the first boot, before any install (in a Test build as in a Session);
// what Claude's Bash installs there is on the disk, not in the Workspace
// or in git status, and is still there after a sleep and a wake and on a
// new Sandbox of the same Build (a resources-only change). Once the
// patterns change, the next boot deletes it from the disk, saying so.
func TestAnEnvironmentsDependencyFolderIsOnItsDiskThroughASleepAndANewSandbox(t *testing.T) {
	t.Parallel()
	s := Start(t)
	repo := s.RepoWith(map[string]string{"web/package.json": "{}\n"})
	if out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--dependency-folders", "node_modules", "--next-to", "package.json=node_modules"); code != 0 || !strings.Contains(out, "kndl env test must pass") || !strings.Contains(out, "package.json=node_modules") {
		t.Fatalf("kndl env edit: exit %d\n%s\n%s; want a draft that needs a Test build", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "env", "test", "--repo", repo); code != 0 || !strings.Contains(out, "dependency disk: bound 1 folder (web/node_modules)") {
		t.Fatalf("kndl env test: exit %d\n%s\n%s; want web/node_modules bound", code, out, errOut)
	}
	s.applyVersion(repo, 1, "dependency folders: none -> node_modules")

	s.Model.On(testkit.PromptContains("install"), testkit.Bash("mkdir /workspace/web/node_modules/x && echo installed > /workspace/web/node_modules/x/index.js && touch /root/upper-marker && "+
		"grep -c ' /workspace/web/node_modules ' /proc/self/mountinfo"))
	s.Model.On(testkit.PromptContains("is it there"), testkit.Bash("cat /workspace/web/node_modules/x/index.js; ls /root/upper-marker"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Done."))
	v := s.NewSession(repo, "install the dependencies")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the install's output", func(e protocol.Event) bool { return e.Kind == protocol.EventToolResult })
	if r := toolResult(s.Events(v.ID), "Bash"); strings.TrimSpace(r) != "1" {
		t.Fatalf("Claude's Bash gave %q, want web/node_modules a mount of its own", r)
	}
	if _, ok := findEvent(s.Events(v.ID), func(e protocol.Event) bool {
		return e.Kind == protocol.EventLog && e.Text == "dependency disk: bound 1 folder (web/node_modules)"
	}); !ok {
		t.Fatalf("the start log does not say what was bound:\n%s", dump(s.Events(v.ID)))
	}
	if got := s.inSandbox(v.ID, "cat /var/lib/kndl/deps/web%2Fnode_modules/x/index.js; cd /workspace && git status --porcelain"); got != "installed\n" {
		t.Fatalf("the disk and git status: %q, want the file on the disk and git status clean", got)
	}
	ws := filepath.Join(s.Home, "sessions", v.ID, "workspace")
	if ents, err := os.ReadDir(filepath.Join(ws, "web", "node_modules")); err != nil || len(ents) != 0 {
		t.Fatalf("the host's Workspace has web/node_modules %v (%v), want it empty: the files are on the disk", ents, err)
	}
	s.turnEnds(v.ID, 1)

	// A sleep and a wake: the same Sandbox, its folder bound again.
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil); code != http.StatusNoContent {
		t.Fatalf("sleep: %d", code)
	}
	s.waitState(v.ID, api.Asleep)
	s.prompt(v.ID, "is it there after the sleep?")
	s.WaitEvent(v.ID, testenv.WaitMedium, "the woken Session's tool output", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolResult && e.Text == "installed\n/root/upper-marker"
	})
	s.turnEnds(v.ID, 2)

	// A resources-only change applies at once and needs no new Build, but
	// makes a new Sandbox at the restart: the upper layer goes, the disk
	// stays.
	if out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--cpus", "1"); code != 0 || !strings.Contains(out, "leaves the Build as it is") {
		t.Fatalf("kndl env edit --cpus: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 || !strings.Contains(out, "Applied version 2") {
		t.Fatalf("kndl env apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "restart", v.ID); code != 0 {
		t.Fatalf("kndl restart: exit %d\n%s\n%s", code, out, errOut)
	}
	s.prompt(v.ID, "is it there on the new Sandbox?")
	s.WaitEvent(v.ID, testenv.WaitMedium, "the new Sandbox's tool output", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolResult && strings.Contains(e.Text, "\ninstalled\n") && strings.Contains(e.Text, "upper-marker': No such file")
	})
	s.turnEnds(v.ID, 3)

	// The patterns change: at the next boot the folder no pattern maps to
	// any more is deleted from the disk, and the start log says so.
	if out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--dependency-folders", ".venv", "--next-to", ""); code != 0 {
		t.Fatalf("kndl env edit --dependency-folders .venv: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "env", "test", "--repo", repo); code != 0 {
		t.Fatalf("kndl env test: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 || !strings.Contains(out, "Applied version 3") {
		t.Fatalf("kndl env apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "restart", v.ID); code != 0 {
		t.Fatalf("kndl restart: exit %d\n%s\n%s", code, out, errOut)
	}
	s.Model.On(testkit.PromptContains("is it gone"), testkit.Bash("ls -A /var/lib/kndl/deps; echo listed"))
	s.prompt(v.ID, "is it gone now?")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the start log's line on the pruned folder", func(e protocol.Event) bool {
		return e.Kind == protocol.EventLog && strings.Contains(e.Text, "dependency disk: deleted 1 folder(s) no pattern maps to any more") && strings.Contains(e.Text, "(web/node_modules ")
	})
	s.WaitEvent(v.ID, testenv.WaitMedium, "the disk's listing", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolResult && e.Text == "listed"
	})
}

// TestADevcontainerJSONMakesTheEnvironmentASessionStartsOn: the Repo's
// .devcontainer/devcontainer.json, with comments and trailing commas, the
// test image, a Feature from a local registry, each lifecycle command form
// and postStartCommand, makes a draft with kndl env edit
// --from-devcontainer; its Test build passes, it applies, and a Session's
// Sandbox holds what the Feature, the Bootstrap's commands and the Start's
// wrote, byte for byte, the Start in the Session's environment with the
// Feature's containerEnv, and the file's containerEnv as a Variable, its
// ${containerEnv:…} read from the Feature's. Its forwardPorts are in the
// Session's view with their portsAttributes labels, each not listening
// until something listens on it, then opened as any open port is; the
// view shows a label of markup as text. The file's containerEnv is the
// Build's too (the Feature's install.sh and the Bootstrap see it), and its
// remoteUser, which the Feature makes as common-utils does, is whom the
// Session's Claude Code runs as, its Bash in that user's login, owning the
// Workspace.
func TestADevcontainerJSONMakesTheEnvironmentASessionStartsOn(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	feature := testkit.PushFeature(t, testkit.Registry(t), "f/greet:1", `{"id": "greet", "options": {"greeting": {"type": "string", "default": "hi"}}, "containerEnv": {"GREET_HOME": "/opt/greet"}}`,
		"#!/bin/sh\nset -e\nuseradd -m -u 1500 \"$_REMOTE_USER\"\nprintf 'greet %s %s\\n' \"$GREETING\" \"$DC_SAYS\" > /etc/dc-feature\n")
	file := `{
		// as VS Code writes it
		"image": "` + s.runnerCfg.Image + `",
		"features": {"` + feature + `": {"greeting": "hello there"},},
		"onCreateCommand": "cp /etc/dc-feature /root/on-create && printf '%s\\n' \"$DC_SAYS\" >> /root/on-create",
		"remoteUser": "dev",
		"updateContentCommand": ["sh", "-c", "printf '%s|' \"$@\" > /root/update-content", "sh", "it's", "$HOME"],
		"postCreateCommand": {"a": "echo a > /root/post-create-a", "b": ["touch", "/root/post-create-b"],},
		/* each new Sandbox, in /workspace */
		"postStartCommand": "pwd > /root/started && echo \"$GREET_HOME\" >> /root/started && printf '%s\\n' \"$DC_SAYS\" >> /root/started",
		"containerEnv": {"DC_SAYS": "${containerEnv:GREET_HOME}/say it's \\ \"here\"\t"},
		"forwardPorts": [3000, "localhost:8000"],
		"portsAttributes": {"3000": {"label": "` + strings.ReplaceAll(webLabel, `"`, `\"`) + `"}, "8000": {"label": "API"}},
	}`
	s.GitHub.ServeRepo(t, "acme/app", s.RepoWith(map[string]string{".devcontainer/devcontainer.json": file}))
	s.GitHub.InstallApp("acme/app")
	repo := s.GitHub.RepoURL("acme/app")

	ports := `3000 "<img src=x onerror=\"window.pwned=1\">Web & docs", 8000 "API"`
	if out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--from-devcontainer"); code != 0 || !strings.Contains(out, "made from .devcontainer/devcontainer.json at commit") ||
		!strings.Contains(out, "ports: none -> "+ports) {
		t.Fatalf("kndl env edit --from-devcontainer: exit %d\n%s\n%s\nwant the draft from the file, its ports %s", code, out, errOut, ports)
	}
	if out, errOut, code := s.kndl("", "env", "test", "--repo", repo); code != 0 || !strings.Contains(out, "The Test build passed") {
		t.Fatalf("kndl env test: exit %d\n%s\n%s", code, out, errOut)
	}
	s.applyVersion(repo, 1, "Bootstrap script added")

	s.Model.On(testkit.PromptContains("start on it"), testkit.Bash("id -un > /workspace/who && echo \"$HOME\" >> /workspace/who"))
	v := s.NewSession(repo, "start on it")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the first Turn's end", kind(protocol.EventTurnEnd))
	got := s.inSandbox(v.ID, "cd /root && for f in on-create update-content post-create-a post-create-b started; do printf '%s: ' $f; cat $f; done")
	says := "/opt/greet/say it's \\ \"here\"\t\n"
	want := "on-create: greet hello there " + says + says + "update-content: it's|$HOME|post-create-a: a\npost-create-b: started: /workspace\n/opt/greet\n" + says
	if got != want {
		t.Fatalf("the Sandbox holds %q, want %q: the Feature before the Bootstrap's commands, both with the file's containerEnv, each form as the specification runs it, and the Start's, in the Feature's containerEnv", got, want)
	}
	if got := s.inSandbox(v.ID, "cat /workspace/who; stat -c %U /workspace /workspace/who /var/lib/kndl/claude"); got != "dev\n/home/dev\ndev\ndev\ndev\n" {
		t.Fatalf("Claude Code's Bash says %q, want it run as dev in its login (HOME /home/dev), and dev owning the Workspace, what the Bash wrote and Claude Code's config", got)
	}
	if out, _, _ := s.kndl("", "env", "show", "--repo", repo); !strings.Contains(out, "ports:              "+ports) || !strings.Contains(out, "container env:      DC_SAYS\n  user:               dev\n") {
		t.Fatalf("kndl env show:\n%s\nwant the ports %s, the container env and the user", out, ports)
	}
	checkOfferedPorts(t, s, v.ID)
}

// webLabel is port 3000's label in the devcontainer.json: markup, which
// the view must show as text.
const webLabel = `<img src=x onerror="window.pwned=1">Web & docs`

// checkOfferedPorts checks the view of Session id, whose Environment
// offers port 3000 (labelled webLabel) and 8000 (API): both listed,
// labelled, not listening; then 8000, once an app listens on it, listening
// with a URL that opens it as any open port (checkForwardGrants), while
// 3000 opens nothing; and in a browser the label is text.
func checkOfferedPorts(t *testing.T, s *System, id string) {
	t.Helper()
	port := func(list []api.Port, n int) api.Port {
		i := slices.IndexFunc(list, func(p api.Port) bool { return p.Port.Port == n })
		if i < 0 {
			t.Fatalf("the view's ports %+v: want %d", list, n)
		}
		return list[i]
	}
	list := viewPorts(t, s, id, func([]api.Port) bool { return true })
	if web, api8000 := port(list, 3000), port(list, 8000); web.Label != webLabel || web.Listening || web.URL != "" || api8000.Label != "API" || api8000.Listening {
		t.Fatalf("the view's ports before anything listens: %+v; want 3000 and 8000 labelled, not listening, with nothing to open", list)
	}

	app, err := os.ReadFile(wsecho(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Home, "sessions", id, "workspace", "wsecho"), app, 0o755); err != nil {
		t.Fatal(err)
	}
	s.inSandbox(id, "/workspace/wsecho -addr 127.0.0.1:8000 >/dev/null 2>&1 &")
	list = viewPorts(t, s, id, listening(8000))
	open := port(list, 8000)
	if !open.Listening || open.Label != "API" || open.Process != "wsecho" || open.URL != "/sessions/"+id+"/ports/8000" || port(list, 3000).Listening {
		t.Fatalf("the view's ports once 8000 listens: %+v; want 8000 listening, labelled, held by wsecho, with its URL, and 3000 still not", list)
	}
	cookie := devCookie(t, s)
	if code := getStatus(t, s.URL+"/sessions/"+id+"/ports/3000", cookie); code != http.StatusNotFound {
		t.Fatalf("opening offered port 3000 that nothing listens on: %d, want 404", code)
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+open.URL, nil)
	req.AddCookie(&http.Cookie{Name: "kndl", Value: cookie})
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil || !strings.HasPrefix(loc.Host, "p8000-"+id+".") {
		t.Fatalf("opening port 8000: %d %s, want a trip to its forward origin", resp.StatusCode, resp.Header.Get("Location"))
	}
	s.checkForwardGrants(id, loc.Scheme+"://"+loc.Host)

	b := NewBrowser(t)
	s.SignInDev(b)
	b.Go(s.URL+"/sessions/"+id, "#transcript")
	b.do(chromedp.Click(chromedp.CSS(`[data-tab="ports"]`)))
	b.Wait(testenv.WaitShort, "port 8000 open in the Ports tab", `!!document.querySelector('#ports tr[data-port="8000"] a')`)
	shown := Eval[map[string]any](b, `({
		label: document.querySelector('#ports tr[data-port="3000"] td.label').textContent,
		row: document.querySelector('#ports tr[data-port="3000"]').textContent,
		links: document.querySelectorAll('#ports tr[data-port="3000"] a').length,
		markup: document.querySelectorAll('#ports img').length,
		pwned: window.pwned === undefined ? "" : String(window.pwned),
	})`)
	if shown["label"] != webLabel || !strings.Contains(shown["row"].(string), "not listening yet") || shown["links"].(float64) != 0 || shown["markup"].(float64) != 0 || shown["pwned"] != "" {
		t.Fatalf("port 3000's row in the Ports tab: %v; want its label as text, not listening yet, nothing to open", shown)
	}
}
