package security

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// addRepo has b add the Repo name (owner/name on the fake GitHub) and
// returns its id.
func (e *env) addRepo(b *browser, name string) string {
	e.t.Helper()
	code, body := e.do(b.Client, req{method: "POST", path: "/api/repos", body: `{"url":"` + e.gh.RepoURL(name) + `"}`, origin: "self"})
	var repo struct{ ID string }
	if json.Unmarshal([]byte(body), &repo); code != http.StatusOK {
		e.t.Fatalf("%s adds %s: %d %s", b.login, name, code, body)
	}
	return repo.ID
}

// TestAVariableCantReplaceWhatTheSandboxSets: PATH, HOME and SHELL come
// from the Sandbox's login environment; setting a Variable, a Repo's or a
// Shared one, under one of those names is refused, saying why and what to
// do instead, and one stored before is left out of the Session's start,
// with a note in the Session naming it.
func TestAVariableCantReplaceWhatTheSandboxSets(t *testing.T) {
	e := newEnv(t)
	_, bob, _ := e.team()
	repo := e.addRepo(bob, "acme/app")
	for _, path := range []string{"/api/repos/" + repo + "/variables/PATH", "/api/repos/" + repo + "/variables/HOME", "/api/variables/SHELL"} {
		code, body := e.do(bob.Client, req{method: "PUT", path: path, body: `{"value":"/workspace/bin"}`, origin: "self"})
		if code != http.StatusBadRequest || !strings.Contains(body, "the Sandbox sets PATH, HOME, SHELL itself") || !strings.Contains(body, "~/.profile") {
			t.Errorf("PUT %s: %d %s, want 400 naming the rule and the way out", path, code, body)
		}
	}

	ctx := context.Background()
	for _, name := range []string{"PATH", "DEPLOY_ENV"} {
		if _, _, err := e.store.Variables.SetVariable(ctx, store.Variable{RepoID: repo, Name: name, Value: "/workspace/bin", SetBy: e.userOf("bob").ID}); err != nil {
			t.Fatal(err)
		}
	}
	bobs := e.pair(bob, "bobs-box")
	s := e.running(bob, bobs)
	creds, err := bobs.credentials(s.ID)
	names := []string{}
	for _, v := range creds.Variables {
		names = append(names, v.Name)
	}
	if err != nil || !slices.Equal(names, []string{"DEPLOY_ENV"}) {
		t.Fatalf("the Runner gets Variables %v (%v), want DEPLOY_ENV alone", names, err)
	}
	evs, _ := e.store.Sessions.Events(ctx, s.ID, 0, 100)
	if !slices.ContainsFunc(evs, func(ev store.Event) bool {
		return ev.Kind == protocol.EventNote && strings.Contains(string(ev.Data), "Not passed to the Sandbox: the Variable PATH.")
	}) {
		t.Fatalf("no note in the Session naming the Variable left out: %+v", evs)
	}
}

// TestAVariableThatLoadsCodeTakesTheMark: a Variable whose name changes how
// a tool loads code or reaches the network (loadscode.Table) is refused
// without the mark, naming the rule and the way out, and nothing is
// stored; with it, a collaborator with push sets it, its value byte for
// byte, and the API and the Repo page show it marked; a read-only
// collaborator is refused, mark or not; a mark on a name no rule matches is
// refused. One stored before the mark was asked for still reaches the
// Runner, and the page shows it unmarked.
func TestAVariableThatLoadsCodeTakesTheMark(t *testing.T) {
	e, reader, writer, base := readerAndWriter(t)
	listed := func() map[string]api.Variable {
		t.Helper()
		var rv api.RepoVariables
		body := e.must(writer.Client, req{method: "GET", path: base + "/variables"}, http.StatusOK)
		if err := json.Unmarshal([]byte(body), &rv); err != nil {
			t.Fatal(err)
		}
		out := map[string]api.Variable{}
		for _, v := range append(rv.Variables, rv.Links...) {
			out[v.Name] = v
		}
		return out
	}
	risky := []struct{ name, rule string }{
		{"PIP_INDEX_URL", "PIP_*"}, {"UV_INDEX_URL", "UV_*"}, {"GOPROXY", "GOPROXY"}, {"GOFLAGS", "GOFLAGS"},
		{"CARGO_HOME", "CARGO_*"}, {"RUSTC_WRAPPER", "RUSTC_WRAPPER"}, {"YARN_NPM_REGISTRY_SERVER", "YARN_*"},
		{"BUNDLE_MIRROR__ALL", "BUNDLE_*"}, {"XDG_CONFIG_HOME", "XDG_CONFIG_HOME"}, {"LESSOPEN", "LESSOPEN"},
		{"PAGER", "PAGER"}, {"LD_PRELOAD", "LD_*"}, {"https_proxy", "HTTPS_PROXY"}, {"NODE_OPTIONS", "NODE_*"},
		{"npm_config_registry", "NPM_CONFIG_*"}, {"GIT_SSH_COMMAND", "GIT_*"},
	}
	for _, r := range risky {
		code, body := e.do(writer.Client, req{method: "PUT", path: base + "/variables/" + r.name, body: `{"value":"https://evil.example/"}`, origin: "self"})
		if code != http.StatusBadRequest || !strings.Contains(body, "falls under "+r.rule) || !strings.Contains(body, "--loads-code") {
			t.Errorf("PUT %s without the mark: %d %s, want 400 naming %s and --loads-code", r.name, code, body, r.rule)
		}
	}
	if code, body := e.do(writer.Client, req{method: "PUT", path: "/api/variables/GOPROXY", body: `{"value":"https://evil.example/"}`, origin: "self"}); code != http.StatusBadRequest || !strings.Contains(body, "--loads-code") {
		t.Errorf("PUT the Shared GOPROXY without the mark: %d %s, want 400 naming --loads-code", code, body)
	}
	if got := listed(); len(got) != 0 {
		t.Fatalf("refused Variables were stored: %v", got)
	}

	const value = "https://pypi.example.com/simple \t\"é\"\n"
	marked, _ := json.Marshal(api.VariableRequest{Value: value, LoadsCode: true})
	if code, body := e.do(reader.Client, req{method: "PUT", path: base + "/variables/PIP_INDEX_URL", body: string(marked), origin: "self"}); code != http.StatusForbidden || !strings.Contains(body, "write (push) permission") {
		t.Errorf("a read-only collaborator sets PIP_INDEX_URL with the mark: %d %s, want 403 naming push", code, body)
	}
	if got := listed(); len(got) != 0 {
		t.Fatalf("a refused Variable was stored: %v", got)
	}
	e.must(writer.Client, req{method: "PUT", path: base + "/variables/PIP_INDEX_URL", body: string(marked), origin: "self"}, http.StatusOK)
	if v := listed()["PIP_INDEX_URL"]; !v.LoadsCode || v.Value != value || !strings.HasPrefix(v.LoadsCodeRule, "PIP_*: ") {
		t.Fatalf("PIP_INDEX_URL as listed: %+v, want it marked, under PIP_*, valued %q", v, value)
	}
	plain, _ := json.Marshal(api.VariableRequest{Value: "postgres://db", LoadsCode: true})
	if code, body := e.do(writer.Client, req{method: "PUT", path: base + "/variables/DATABASE_URL", body: string(plain), origin: "self"}); code != http.StatusBadRequest || !strings.Contains(body, "without --loads-code") {
		t.Errorf("DATABASE_URL with the mark: %d %s, want 400 saying to set it without the mark", code, body)
	}

	// kndl var set asks for the mark by its flag, and kndl var ls shows it.
	e.cliLogin(writer)
	repoURL := e.gh.RepoURL("acme/app")
	if _, errOut, code := e.kndlIn("https://uv.example.com\n", "var", "set", "--repo", repoURL, "UV_INDEX_URL"); code == 0 || !strings.Contains(errOut, "falls under UV_*") || !strings.Contains(errOut, "--loads-code") {
		t.Errorf("kndl var set UV_INDEX_URL: exit %d, %q; want a failure naming UV_* and --loads-code", code, errOut)
	}
	if _, errOut, code := e.kndlIn("https://uv.example.com\n", "var", "set", "--repo", repoURL, "--loads-code", "UV_INDEX_URL"); code != 0 {
		t.Fatalf("kndl var set --loads-code UV_INDEX_URL: exit %d, %s", code, errOut)
	}
	if out, errOut, code := e.kndl("var", "ls", "--repo", repoURL); code != 0 || !regexp.MustCompile(`(?m)^UV_INDEX_URL\s+https://uv\.example\.com\s+false\s+marked\s`).MatchString(out) {
		t.Errorf("kndl var ls: exit %d, %q %s; want UV_INDEX_URL shown marked", code, out, errOut)
	}

	// One stored before the mark was asked for keeps working.
	repoID := strings.TrimPrefix(base, "/api/repos/")
	if _, _, err := e.store.Variables.SetVariable(context.Background(), store.Variable{RepoID: repoID, Name: "GOPROXY", Value: "https://proxy.example.com", SetBy: e.userOf("writer").ID}); err != nil {
		t.Fatal(err)
	}
	page := e.must(writer.Client, req{method: "GET", path: "/repos/" + repoID}, http.StatusOK)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`PIP_INDEX_URL <span class="[^"]*loads-code" title="PIP_\*: [^"]+">loads code</span>`),
		regexp.MustCompile(`GOPROXY <span class="[^"]*loads-code" title="GOPROXY: [^"]+">loads code, unmarked</span>`),
	} {
		if !want.MatchString(page) {
			t.Errorf("the Repo page has no %s", want)
		}
	}
	e.storeToken(writer)
	box := e.pair(writer, "box")
	s := e.running(writer, box)
	creds, err := box.credentials(s.ID)
	got := map[string]string{}
	for _, v := range creds.Variables {
		got[v.Name] = v.Value
	}
	if err != nil || got["GOPROXY"] != "https://proxy.example.com" || got["PIP_INDEX_URL"] != value {
		t.Fatalf("the Runner gets %q (%v), want GOPROXY as stored before the mark and PIP_INDEX_URL byte for byte", got, err)
	}
}
