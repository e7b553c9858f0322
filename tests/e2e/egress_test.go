package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestUnderAnAllowlistASandboxReachesOnlyListedHostsThroughTheRunnersProxy:
// the test serves pkg.allowed.test itself (HTTPS on 443, HTTP on 80, a raw
// TCP service on 8443) in a network namespace of its own, under names
// only the Runner's resolver knows, so nothing leaves this machine. With
// the Repo's Environment set to an allowlist of *.allowed.test (applied
// without a Test build), a Session's Sandbox gets HTTPS and HTTP through
// to it, the TLS the server's own (the proxy read the SNI and never
// terminated it); a name off the list does not resolve, a connection with
// another name's SNI to the same address is reset, as is a raw TCP
// connection to the allowed address on another port, and the Session's
// history notes each block. A restarted Runner judges it as before. Set
// open again, the Session's Sandbox is open from its next wake, and its
// history says so.
func TestUnderAnAllowlistASandboxReachesOnlyListedHostsThroughTheRunnersProxy(t *testing.T) {
	t.Parallel()
	lns := testkit.ListenForSandboxesOn(t, 443, 80, 8443)
	addr := lns[0].Addr().(*net.TCPAddr).IP.String()
	names := &testkit.Resolver{}
	names.Set("pkg.allowed.test", addr)
	names.Set("denied.test", addr)

	var mu sync.Mutex
	var seen []string // "sni host path" of each request the server had
	serve := func(w http.ResponseWriter, r *http.Request) {
		sni := "-"
		if r.TLS != nil {
			sni = r.TLS.ServerName
		}
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %s", sni, r.Host, r.URL.Path))
		mu.Unlock()
		fmt.Fprintf(w, "served to %s\n", r.Host)
	}
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(serve))
	tlsSrv.Listener = lns[0]
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	plain := &http.Server{Handler: http.HandlerFunc(serve)}
	go plain.Serve(lns[1])
	t.Cleanup(func() { plain.Close() })
	rawCount := 0
	go func() {
		for {
			c, err := lns[2].Accept()
			if err != nil {
				return
			}
			mu.Lock()
			rawCount++
			mu.Unlock()
			fmt.Fprintf(c, "raw service says hi\n")
			c.Close()
		}
	}()
	t.Cleanup(func() { lns[2].Close() })

	s := Start(t, WithRunnerResolver(names))
	repo := s.Repo()
	out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--egress", "allowlist", "--allow", "*.allowed.test")
	if code != 0 || !strings.Contains(out, "egress: open -> allowlist: *.allowed.test") || !strings.Contains(out, "kndl env apply applies it now") {
		t.Fatalf("kndl env edit --egress allowlist: exit %d\n%s\n%s\nwant the change, applying without a Test build", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 {
		t.Fatalf("kndl env apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, _, _ := s.kndl("", "env", "show", "--repo", repo); !strings.Contains(out, "egress:             allowlist: *.allowed.test") {
		t.Fatalf("kndl env show:\n%s\nwant the allowlist", out)
	}

	s.Model.On(testkit.PromptContains("egress"), testkit.Text("Ready."))
	v := s.NewSession(repo, "egress")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the first turn's end", kind(protocol.EventTurnEnd))

	// HTTPS and HTTP to the listed host pass, the TLS end to end.
	sh := func(script string) (string, int) { return s.Exec(v.ID, "bash", "-c", script) }
	if out, code := sh("git -c http.sslVerify=false ls-remote https://pkg.allowed.test/repo.git 2>&1"); strings.Contains(out, "unable to access") {
		t.Fatalf("git over HTTPS to the allowed host: exit %d\n%s", code, out)
	}
	if out, code := sh(`exec 3<>/dev/tcp/pkg.allowed.test/80 && printf 'GET /plain HTTP/1.0\r\nHost: pkg.allowed.test\r\n\r\n' >&3 && cat <&3`); code != 0 || !strings.Contains(out, "served to pkg.allowed.test") {
		t.Fatalf("HTTP to the allowed host: exit %d\n%s", code, out)
	}
	mu.Lock()
	got := strings.Join(seen, "\n")
	mu.Unlock()
	if !strings.Contains(got, "pkg.allowed.test pkg.allowed.test /repo.git/info/refs") || !strings.Contains(got, "- pkg.allowed.test /plain") {
		t.Fatalf("the server had:\n%s\nwant git's HTTPS request with its SNI, and the HTTP one", got)
	}

	// A name off the list does not resolve; its SNI to the allowed
	// address is reset; another port of the allowed address is too.
	if out, code := sh("getent hosts denied.test"); code == 0 {
		t.Fatalf("denied.test resolved in the Sandbox: %s", out)
	}
	if out, code := sh("git -c http.sslVerify=false -c http.curloptResolve=denied.test:443:" + addr + " ls-remote https://denied.test/repo.git 2>&1"); code == 0 || strings.Contains(out, "repo.git/info/refs") {
		t.Fatalf("git to denied.test at the allowed address: exit %d\n%s\nwant it refused", code, out)
	}
	if out, _ := sh("exec 3<>/dev/tcp/" + addr + "/8443 && timeout 5 cat <&3"); strings.Contains(out, "raw service says hi") {
		t.Fatalf("a raw TCP connection to the allowed address's port 8443 got through: %s", out)
	}
	mu.Lock()
	if strings.Contains(strings.Join(seen, "\n"), "denied.test") || rawCount != 0 {
		t.Fatalf("the server had %v and %d raw connections; want nothing of denied.test, no raw connection", seen, rawCount)
	}
	mu.Unlock()

	// The model API is no exit: its name resolves to nothing under the
	// allowlist, and the relay's model route, Claude Code's one way to the
	// model, takes no key the Sandbox brings (a stranger's, to upload the
	// Workspace with) and no path but Claude Code's two calls.
	if out, code := sh("getent hosts api.anthropic.com"); code == 0 {
		t.Fatalf("api.anthropic.com resolved under the allowlist: %s", out)
	}
	base, _ := sh(`for f in /proc/[0-9]*/environ; do b=$(tr '\0' '\n' < "$f" 2>/dev/null | sed -n 's/^ANTHROPIC_BASE_URL=//p'); [ -n "$b" ] && echo "$b" && break; done`)
	model, err := url.Parse(strings.TrimSpace(base))
	if err != nil || model.Port() == "" {
		t.Fatalf("Claude Code's ANTHROPIC_BASE_URL in the Sandbox: %q (%v)", base, err)
	}
	for _, c := range []struct{ path, key, want string }{
		{"/v1/files", "x-api-key: sk-ant-api03-stranger", " 404 "},
		{"/v1/messages", "x-api-key: sk-ant-api03-stranger", " 403 "},
		{"/v1/messages", "authorization: Bearer sk-ant-oat01-stranger", " 403 "},
	} {
		out, _ := sh(fmt.Sprintf(`exec 3<>/dev/tcp/%s/%s && printf 'POST %s%s HTTP/1.0\r\nHost: %s\r\n%s\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}' >&3 && head -1 <&3`,
			model.Hostname(), model.Port(), model.Path, c.path, model.Host, c.key))
		if !strings.HasPrefix(out, "HTTP/1.") || !strings.Contains(out, c.want) {
			t.Errorf("POST %s with %q from the Sandbox: %q, want%s", c.path, c.key, out, c.want)
		}
	}

	// Each note of a name off the list carries it for the view's Allow; a
	// port off the list carries none, since listing a name won't open it.
	for _, want := range []struct{ text, host string }{
		{"blocked: denied.test (", "denied.test"}, {"blocked: denied.test:443 (", "denied.test"}, {"blocked: " + addr + ":8443 (", ""},
	} {
		s.WaitEvent(v.ID, testenv.WaitMedium, "a note "+want.text+" for "+want.host, func(e protocol.Event) bool {
			return e.Kind == protocol.EventNote && strings.HasPrefix(e.Text, want.text) && e.Blocked == want.host
		})
	}

	// A restarted Runner judges the running Sandbox as before.
	s.RestartRunner()
	s.waitConnected("the Runner connects again")
	if out, code := sh(`exec 3<>/dev/tcp/pkg.allowed.test/80 && printf 'GET /again HTTP/1.0\r\nHost: pkg.allowed.test\r\n\r\n' >&3 && cat <&3`); code != 0 || !strings.Contains(out, "served to pkg.allowed.test") {
		t.Fatalf("HTTP to the allowed host after a Runner restart: exit %d\n%s", code, out)
	}
	if out, code := sh("getent hosts denied.test"); code == 0 {
		t.Fatalf("denied.test resolved after a Runner restart: %s", out)
	}

	// Opened again, the Session's Sandbox is open from its next wake:
	// the raw service answers.
	s.kndl("", "env", "edit", "--repo", repo, "--egress", "open")
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 {
		t.Fatalf("kndl env apply of egress open: exit %d\n%s\n%s", code, out, errOut)
	}
	s.WaitEvent(v.ID, testenv.WaitMedium, "the note that open waits for the wake", func(e protocol.Event) bool {
		return e.Kind == protocol.EventNote && strings.HasPrefix(e.Text, "egress: Environment version 2's open applies at the next wake: a switch between open and allowlist")
	})
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil); code != http.StatusNoContent {
		t.Fatalf("sleep: %d", code)
	}
	s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/wake", nil, nil)
	s.waitState(v.ID, api.Active)
	if out, _ := sh("exec 3<>/dev/tcp/" + addr + "/8443 && timeout 5 cat <&3"); !strings.Contains(out, "raw service says hi") {
		t.Fatalf("after the wake on egress open, port 8443 gave %q, want the raw service", out)
	}
}

// TestTheRepoPageSetsAnEgressAllowlistThatAppliesWithoutATestBuild: on the
// Repo's page a person picks allowlist and lists hosts; the draft applies
// at once, the current version shows the list as the CLI does, and a later
// save of another field keeps it, and what the form has no field for (the
// Features, the check, the branch prefix, the ports) byte for byte.
func TestTheRepoPageSetsAnEgressAllowlistThatAppliesWithoutATestBuild(t *testing.T) {
	t.Parallel()
	s, b, repo := repoPage(t)
	Eval[bool](b, `(() => { const f = document.getElementById("draft"); f.egress.value = "allowlist"; f.egress_allow.value = "npm, *.example.com"; f.requestSubmit(); return true })()`)
	b.Wait(testenv.WaitMedium, "the draft saved", `document.getElementById("draft-state").textContent.includes("applies at once")`)
	Eval[bool](b, `(document.querySelector('[data-action="env-apply"]').click(), true)`)
	b.Wait(testenv.WaitMedium, "version 1", `document.getElementById("env-current").textContent.includes("Version 1")`)
	if settings := Eval[string](b, `document.getElementById("env-settings").textContent`); !strings.Contains(settings, "egress:             allowlist: npm, *.example.com") {
		t.Fatalf("the current version shows:\n%s\nwant its allowlist", settings)
	}
	Eval[bool](b, `(() => { const f = document.getElementById("draft"); f.cpus.value = "1"; f.requestSubmit(); return true })()`)
	b.Wait(testenv.WaitMedium, "the second draft saved", `document.getElementById("draft-state").textContent.includes("cpus")`)
	var env api.Environment
	s.Do(http.MethodGet, "/api/repos/"+repo.ID+"/environment", nil, &env)
	if d := env.Draft; d == nil || !d.Settings.Egress.Restricted() || strings.Join(d.Settings.Egress.Allow, " ") != "npm *.example.com" || slices.ContainsFunc(d.Changes, func(c string) bool { return strings.HasPrefix(c, "egress") }) {
		t.Fatalf("the draft after changing the CPUs: %+v, want the allowlist kept", d)
	}

	// What the form has no field for is kept too: the Hub takes the
	// settings whole, so a form that sent only its own fields erased them.
	kept := env.Draft.Settings
	kept.Features = []protocol.Feature{{Ref: "registry.test/f/greet@sha256:" + strings.Repeat("ab", 32), Env: []string{"GREETING=hello there"}}}
	kept.CheckCommand = "make test ARGS='-run X'"
	kept.BranchPrefix = "bots/kndl/"
	kept.Ports = []protocol.OfferedPort{{Port: 3000, Label: "web app"}, {Port: 8080}}
	s.Do(http.MethodPut, "/api/repos/"+repo.ID+"/environment/draft", kept, &env)
	b.Go(s.URL+"/repos/"+repo.ID, "#draft")
	b.Wait(testenv.WaitMedium, "the form filled from the draft", `document.getElementById("draft-state").textContent.includes("check added")`)
	kept.Start = "npm start -- --port 3000\t# from the form\n"
	Eval[bool](b, `(() => { const f = document.getElementById("draft"); f.start.value = `+strconv.Quote(kept.Start)+`; f.requestSubmit(); return true })()`)
	b.Wait(testenv.WaitMedium, "the Start draft saved", `document.getElementById("draft-state").textContent.includes("Start script added")`)
	// A fresh value: decoding into env would keep the fields the answer omits.
	var after api.Environment
	s.Do(http.MethodGet, "/api/repos/"+repo.ID+"/environment", nil, &after)
	if after.Draft == nil {
		t.Fatal("no draft after the form changed the Start script")
	}
	want, _ := json.Marshal(kept)
	if got, _ := json.Marshal(after.Draft.Settings); !bytes.Equal(got, want) {
		t.Fatalf("the draft after the form changed the Start script:\n%s\nwant\n%s", got, want)
	}
}

// TestAHostAddedToAnAllowlistReachesTheAwakeSessionAtOnce: with the Repo's
// Environment set to an allowlist, an awake Session's git over HTTPS to a
// host off the list is refused; once kndl env edit --allow adds the host
// and the version applies, the same Session's next request passes with no
// sleep or wake, and its history says the allowlist applied now: the
// Session runs on the new version.
func TestAHostAddedToAnAllowlistReachesTheAwakeSessionAtOnce(t *testing.T) {
	t.Parallel()
	ln := testkit.ListenForSandboxesOn(t, 443)[0]
	names := &testkit.Resolver{}
	names.Set("later.test", ln.Addr().(*net.TCPAddr).IP.String())
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+r.URL.Path)
		mu.Unlock()
	}))
	srv.Listener = ln
	srv.StartTLS()
	t.Cleanup(srv.Close)

	s := Start(t, WithRunnerResolver(names))
	repo := s.Repo()
	allow := func(list string) {
		t.Helper()
		if out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--egress", "allowlist", "--allow", list); code != 0 {
			t.Fatalf("kndl env edit --allow %s: exit %d\n%s\n%s", list, code, out, errOut)
		}
		if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 {
			t.Fatalf("kndl env apply: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	allow("*.allowed.test")
	s.Model.On(testkit.PromptContains("egress"), testkit.Text("Ready."))
	v := s.NewSession(repo, "egress")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the first turn's end", kind(protocol.EventTurnEnd))

	fetch := func() (string, int) {
		return s.Exec(v.ID, "bash", "-c", "git -c http.sslVerify=false ls-remote https://later.test/repo.git 2>&1")
	}
	if out, code := fetch(); !strings.Contains(out, "Could not resolve host") {
		t.Fatalf("git to later.test, off the list: exit %d\n%s\nwant its name unresolved", code, out)
	}
	allow("*.allowed.test,later.test")
	if out, code := fetch(); strings.Contains(out, "unable to access") {
		t.Fatalf("git to later.test once the list has it, in the same awake Session: exit %d\n%s", code, out)
	}
	mu.Lock()
	if !slices.Contains(seen, "later.test/repo.git/info/refs") {
		t.Fatalf("the server had %v; want git's request", seen)
	}
	mu.Unlock()
	s.WaitEvent(v.ID, testenv.WaitMedium, "the note that the allowlist applied", func(e protocol.Event) bool {
		return e.Kind == protocol.EventNote && e.Text == "egress: Environment version 2's allowlist: *.allowed.test, later.test applies now"
	})
	var now api.SessionView
	if code := s.Do(http.MethodGet, "/api/sessions/"+v.ID, nil, &now); code != http.StatusOK || now.State != api.Active || now.EnvironmentVersion != 2 || now.EnvironmentWaiting != 0 {
		t.Fatalf("the Session after the change: %d, %s, on version %d, waiting %d; want it awake still, on version 2", code, now.State, now.EnvironmentVersion, now.EnvironmentWaiting)
	}
}

// TestUnderAnAllowlistNamingNothingGitGoesThroughTheRelayAndGitHubIsRefused:
// the fake GitHub is github.com to the Runner and its Sandboxes (the
// test's resolver, on an address on this machine), and the Hub's
// GITHUB_URL is http://github.com. Under an allowlist that names nothing,
// the first Turn's git push goes through the Runner's git relay, which
// holds the GitHub token, and a fetch after it; the same server asked for
// by name or by address from the Sandbox itself is refused and noted: no
// preset, github's neither, is on unless the list names it.
//
// It is HTTP on port 80, not HTTPS: the host clone's git trusts the host's
// certificate authorities alone, and none can vouch for a github.com served
// here. The proxy's reading of HTTPS by its SNI is
// TestUnderAnAllowlistASandboxReachesOnlyListedHostsThroughTheRunnersProxy's.
func TestUnderAnAllowlistNamingNothingGitGoesThroughTheRelayAndGitHubIsRefused(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHubCom(&testkit.Resolver{}))
	s.GitHub.ServeRepo(t, "acme/app", s.Repo())
	s.GitHub.InstallApp("acme/app")
	repo := "http://github.com/acme/app.git"
	if out, errOut, code := s.kndl("", "env", "edit", "--repo", repo, "--egress", "allowlist"); code != 0 || !strings.Contains(out, "egress: open -> allowlist") || strings.Contains(out, "allowlist: github") {
		t.Fatalf("kndl env edit --egress allowlist: exit %d\n%s\n%s\nwant an allowlist naming nothing", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 {
		t.Fatalf("kndl env apply: exit %d\n%s\n%s", code, out, errOut)
	}

	s.Model.On(testkit.PromptContains("push a branch"), testkit.Bash(pushScript))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Pushed."))
	v := s.NewSession(repo, "push a branch")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the answer", func(e protocol.Event) bool { return e.Kind == protocol.EventText && e.Text == "Pushed." })
	if got := s.GitHub.Branches(t, "acme/app"); !slices.Contains(got, ownBranch(v.ID)) {
		t.Fatalf("the fake GitHub's branches: %v, want %s pushed from the Sandbox\nevents:\n%s", got, ownBranch(v.ID), dump(s.Events(v.ID)))
	}
	if out, code := s.gitAsClaude(v.ID, "fetch", "origin"); code != 0 {
		t.Fatalf("git fetch origin: exit %d\n%s", code, out)
	}
	if out, _ := s.Exec(v.ID, "git", "-C", "/workspace", "branch", "-r"); !strings.Contains(out, "origin/"+ownBranch(v.ID)) {
		t.Fatalf("the Workspace's remote branches after the fetch:\n%s\nwant origin/%s", out, ownBranch(v.ID))
	}

	byAddr := strings.TrimPrefix(s.GitHub.URL, "http://")
	// By name, a connection of the Sandbox's own (git's own would go to
	// the relay: the Runner rewrites the Repo's URL to it).
	host, port, _ := strings.Cut(byAddr, ":")
	for _, direct := range []struct{ dest, host, blocked string }{
		{"github.com/80", "github.com", "github.com ("},
		{host + "/" + port, byAddr, byAddr + " ("},
	} {
		if out, code := s.Exec(v.ID, "bash", "-c", "exec 3<>/dev/tcp/"+direct.dest+" && printf 'GET /acme/app.git/info/refs HTTP/1.0\\r\\nHost: "+direct.host+"\\r\\n\\r\\n' >&3 && timeout 5 cat <&3"); code == 0 && strings.Contains(out, "HTTP/1") {
			t.Fatalf("the Sandbox's own connection to %s got through: %s", direct.dest, out)
		}
		s.WaitEvent(v.ID, testenv.WaitMedium, "the block of "+direct.blocked, func(e protocol.Event) bool {
			return e.Kind == protocol.EventNote && strings.HasPrefix(e.Text, "blocked: "+direct.blocked)
		})
	}
}
