package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/hub/notify"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// servedFiles serves acme/app on the fake GitHub with files committed on
// main, and returns the commit.
func servedFiles(t *testing.T, gh *testkit.GitHub, files map[string]string) string {
	t.Helper()
	testenv.RequireCommand(t, "git")
	src := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		args = append([]string{"-C", src, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)
		out, err := exec.Command("git", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755)
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", "-A")
	git("commit", "-q", "-m", "files")
	gh.ServeRepo(t, "acme/app", src)
	return git("rev-parse", "HEAD")
}

// pusherAndReader are olivia, with push on acme/app (the App on it), and
// rita, who may read it only: olivia and the CLI tokens of both.
func pusherAndReader(t *testing.T, f *fixture, gh *testkit.GitHub) (store.User, string, string) {
	t.Helper()
	olivia, oliviaTok := member(t, f, "olivia")
	_, ritaTok := member(t, f, "rita")
	gh.InstallApp("acme/app")
	gh.SetCollaborator("acme/app", "olivia", true)
	gh.SetCollaborator("acme/app", "rita", true)
	gh.SetReadOnly("acme/app", "rita", true)
	return olivia, oliviaTok, ritaTok
}

// TestADraftFromTheRepositorysDevcontainerJSON: POST
// .../environment/draft/devcontainer reads the file at the default branch
// through the forge, makes the draft from it over the current version,
// and names the file, its commit and the notes; a file kndl refuses (a
// Dockerfile, a syntax error, a bad Feature reference), one not there and
// a Member without push each change nothing.
func TestADraftFromTheRepositorysDevcontainerJSON(t *testing.T) {
	gh := testkit.NewGitHub(t)
	f := newFixture(t, withGitHub(gh, time.Minute))
	ctx := context.Background()
	_, oliviaTok, ritaTok := pusherAndReader(t, f, gh)
	commit := servedFiles(t, gh, map[string]string{
		".devcontainer/devcontainer.json": `{
			// as VS Code writes it
			"image": "debian:12",
			"onCreateCommand": "apt-get install -y jq",
			"postStartCommand": ["touch", "/tmp/started"],
			"containerEnv": {"GOFLAGS": "-mod=mod", "PATH": "/opt/bin:${containerEnv:PATH:/usr/bin}", "APP_MODE": "dev", "DB_URL": "postgres://file"},
			"forwardPorts": [3000],
			"portsAttributes": {"3000": {"label": "web"}},
			"privileged": true,
			"customizations": {},
		}`,
		"bad/build.json":   `{"build": {"dockerfile": "Dockerfile"}}`,
		"bad/syntax.json":  `{"image": "debian:12",, }`,
		"bad/feature.json": `{"features": {"node": {}}}`,
	})
	repo, _ := f.store.Repos.EnsureRepo(ctx, gh.RepoURL("acme/app"), "acme/app")
	base := "/api/repos/" + repo.ID + "/environment"
	if code, raw := askAs(t, f, oliviaTok, http.MethodPut, base+"/draft", api.EnvironmentSettings{Image: "alpine:3", CheckCommand: "make test"}); code != http.StatusOK {
		t.Fatalf("a draft by hand: %d %s", code, raw)
	}
	if code, raw := askAs(t, f, oliviaTok, http.MethodPut, "/api/repos/"+repo.ID+"/variables/DB_URL", api.VariableRequest{Value: "postgres://secret", Sensitive: true}); code != http.StatusOK {
		t.Fatalf("a Sensitive Variable: %d %s", code, raw)
	}
	env := func() api.Environment {
		t.Helper()
		_, raw := askAs(t, f, oliviaTok, http.MethodGet, base, nil)
		var e api.Environment
		json.Unmarshal(raw, &e)
		return e
	}
	before := env()

	refusals := []struct {
		name, token, path string
		status            int
		says              string
	}{
		{"a Member without push", ritaTok, "", http.StatusForbidden, "takes write (push) permission"},
		{"a Dockerfile", oliviaTok, "bad/build.json", http.StatusBadRequest, "devcontainer.json build: a Dockerfile is refused"},
		{"a syntax error", oliviaTok, "bad/syntax.json", http.StatusBadRequest, "not JSON with comments"},
		{"a bad Feature reference", oliviaTok, "bad/feature.json", http.StatusBadRequest, `features["node"]: "node" is not a Feature's OCI reference with its registry`},
		{"no such file", oliviaTok, "nope.json", http.StatusBadRequest, "has no nope.json at main"},
	}
	for _, tt := range refusals {
		code, raw := askAs(t, f, tt.token, http.MethodPost, base+"/draft/devcontainer", api.FromDevcontainer{Path: tt.path})
		if code != tt.status || !strings.Contains(messageOf(raw), tt.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tt.name, code, messageOf(raw), tt.status, tt.says)
		}
		if after := env(); !reflect.DeepEqual(after, before) {
			t.Errorf("%s changed the Environment: %+v, want %+v", tt.name, after.Draft, before.Draft)
		}
	}

	code, raw := askAs(t, f, oliviaTok, http.MethodPost, base+"/draft/devcontainer", api.FromDevcontainer{})
	var e api.Environment
	json.Unmarshal(raw, &e)
	if code != http.StatusOK || e.Draft == nil {
		t.Fatalf("from the devcontainer.json: %d %s", code, raw)
	}
	d := e.Draft
	if d.Settings.Image != "debian:12" || !strings.Contains(d.Settings.Bootstrap, "sh -c 'apt-get install -y jq'") || !strings.Contains(d.Settings.Start, "touch /tmp/started") {
		t.Errorf("got settings %+v, want the file's image, Bootstrap and Start", d.Settings)
	}
	if d.Settings.CheckCommand != "" {
		t.Errorf("got check %q, want the current version's (none): a draft from the file starts from the version, not the old draft", d.Settings.CheckCommand)
	}
	if d.From == nil || d.From.Path != ".devcontainer/devcontainer.json" || d.From.Commit != commit {
		t.Fatalf("got source %+v, want .devcontainer/devcontainer.json at %s", d.From, commit)
	}
	for _, want := range []string{"privileged: ignored; a Sandbox never takes it, its host decides", "customizations: not used by kndl",
		`containerEnv["GOFLAGS"]: not set; it falls under GOFLAGS, which changes how a tool loads code or reaches the network, so only a person sets it, on purpose: kndl var set --loads-code`,
		`containerEnv["PATH"]: not set; the Sandbox sets PATH, HOME, SHELL itself, from its login environment (the Bootstrap script adds to PATH in ~/.profile)`,
		"containerEnv, remoteEnv: APP_MODE, DB_URL become the Repo's Variables, not Sensitive, when the draft is applied; never over a Sensitive Variable, one a person set or a linked Shared one",
		"containerEnv, remoteEnv: DB_URL: kept as it is; the Repo's Variable DB_URL is Sensitive, and .devcontainer/devcontainer.json never replaces one"} {
		if !slices.Contains(d.From.Notes, want) {
			t.Errorf("got notes %q, want one saying %q", d.From.Notes, want)
		}
	}
	if want := []protocol.OfferedPort{{Port: 3000, Label: "web"}}; !reflect.DeepEqual(d.Settings.Ports, want) || !slices.Contains(d.Changes, `ports: none -> 3000 "web"`) {
		t.Errorf("got ports %+v, changes %q; want the file's forwardPorts with its label, named in the changes", d.Settings.Ports, d.Changes)
	}
	if !slices.Contains(d.Changes, "Variable APP_MODE: set from .devcontainer/devcontainer.json") || slices.ContainsFunc(d.Changes, func(c string) bool { return strings.HasPrefix(c, "Variable DB_URL") }) {
		t.Errorf("got changes %q, want APP_MODE set from the file and DB_URL kept", d.Changes)
	}
	// containerEnv is the Build's too, the values the file's (a Variable
	// available at build goes over it on the Runner).
	if want := []string{"APP_MODE=dev", "DB_URL=postgres://file"}; !slices.Equal(d.Settings.ContainerEnv, want) || !slices.Contains(d.Changes, "container env: none -> APP_MODE, DB_URL") {
		t.Errorf("got container env %q, changes %q; want %q, named in the changes", d.Settings.ContainerEnv, d.Changes, want)
	}
	if !d.NeedsTest {
		t.Errorf("a draft changing the image needs no Test build; want it to need one, as any other")
	}
	// A draft edited by hand after it is no longer the file's.
	if code, raw := askAs(t, f, oliviaTok, http.MethodPut, base+"/draft", d.Settings); code != http.StatusOK || env().Draft.From != nil {
		t.Errorf("a draft edited by hand: %d %s, want no source named", code, raw)
	}
}

// TestAPushChangingAFollowedDevcontainerJSONMakesADraftAndTestsIt: with
// follow on, a push to the default branch that changes the file makes a
// new draft from it and starts its Test build as the Member who turned
// follow on, applies nothing (its Variables wait in the draft too), and
// tells the Repo's Members with push (not a reader); a push changing
// another file, or to another branch, does nothing.
func TestAPushChangingAFollowedDevcontainerJSONMakesADraftAndTestsIt(t *testing.T) {
	gh := testkit.NewGitHub(t)
	const secret = "webhook-secret"
	f := newFixture(t, withGitHub(gh, time.Minute), loopbackHooks(time.Second), func(c *Config) { c.GitHubWebhookSecret = secret })
	gh.SetWebhook(f.srv.URL+"/github/webhook", secret)
	ctx := context.Background()
	olivia, oliviaTok, ritaTok := pusherAndReader(t, f, gh)
	servedFiles(t, gh, map[string]string{".devcontainer/devcontainer.json": `{"image": "debian:12", "containerEnv": {"APP_MODE": "dev"}}`, "README": "hi"})
	repo, _ := f.store.Repos.EnsureRepo(ctx, gh.RepoURL("acme/app"), "acme/app")
	base := "/api/repos/" + repo.ID + "/environment"
	pushers, readers := newEndpoint(t, nil), newEndpoint(t, nil)
	f.addWebhook(t, oliviaTok, pushers.URL+"/olivia", "json")
	f.addWebhook(t, ritaTok, readers.URL+"/rita", "json")
	// Olivia's own Runner passes each Test build it is asked for.
	rn, tok, err := f.store.Runners.CreateRunner(ctx, "olivias", olivia.ID)
	if err != nil {
		t.Fatal(err)
	}
	tested := make(chan protocol.EnvTest, 4)
	helloWith(t, f, tok, nil, func(c *protocol.Conn) {
		c.Handle(protocol.TypeEnvTest, false, func(_ context.Context, body json.RawMessage) (any, error) {
			var req protocol.EnvTest
			json.Unmarshal(body, &req)
			tested <- req
			return nil, nil
		})
	})
	testenv.Eventually(t, testenv.WaitShort, "the Hub sees olivia's Runner", func() bool { return f.hub.Connected(rn.ID) })

	follow := true
	code, raw := askAs(t, f, oliviaTok, http.MethodPost, base+"/draft/devcontainer", api.FromDevcontainer{Follow: &follow})
	var e api.Environment
	if json.Unmarshal(raw, &e); code != http.StatusOK || e.Follows != ".devcontainer/devcontainer.json" {
		t.Fatalf("follow on: %d %s, want the file followed", code, raw)
	}
	if _, err := f.hub.envs.Test(ctx, repo, olivia.ID); err != nil {
		t.Fatal(err)
	}
	<-tested
	testenv.Eventually(t, testenv.WaitShort, "the Test build passed", func() bool {
		v, _ := f.hub.envs.Show(ctx, repo.ID)
		return v.Draft.Test != nil && v.Draft.Test.State == store.TestPassed
	})
	if _, err := f.hub.envs.Apply(ctx, repo.ID, olivia.ID); err != nil {
		t.Fatal(err)
	}

	// Another file, and another branch: nothing.
	if _, status := gh.PushFiles(t, "acme/app", "olivia", map[string]string{"README": "hello"}); status != http.StatusAccepted {
		t.Fatalf("the push delivery: %d", status)
	}
	d := gh.Deliveries()
	other := testkit.Delivery{ID: "other-branch", Event: "push"}
	other.Body = []byte(strings.Replace(string(d[len(d)-1].Body), `"ref":"refs/heads/main"`, `"ref":"refs/heads/topic"`, 1))
	other.Signature = testkit.SignWebhook([]byte(secret), other.Body)
	gh.Deliver(t, other)

	// The file: a new draft, its Test build started, nothing applied.
	pushed, status := gh.PushFiles(t, "acme/app", "olivia", map[string]string{".devcontainer/devcontainer.json": `{"image": "debian:13", "containerEnv": {"APP_MODE": "prod", "EXTRA": "x"}}`})
	if status != http.StatusAccepted {
		t.Fatalf("the push delivery: %d", status)
	}
	var after struct{ After string }
	json.Unmarshal(pushed.Body, &after)
	// The first post is this push's: the two before it told no one.
	p := pushers.next(t)
	var ev notify.Event
	json.Unmarshal(p.body, &ev)
	if ev.Kind != notify.EnvironmentDraft || !strings.Contains(ev.Text, "A push ("+after.After[:12]+") changed .devcontainer/devcontainer.json: a new draft of the Environment waits") ||
		!strings.HasSuffix(ev.Session.URL, "/repos/"+repo.ID) || ev.Session.Repo != repo.URL {
		t.Errorf("olivia's post: %s, want environment_draft naming the file and linking the Repo's page", p.body)
	}
	select {
	case req := <-tested:
		if req.Environment.Image != "debian:13" {
			t.Errorf("the Test build got image %q, want debian:13, the pushed file's", req.Environment.Image)
		}
	case <-time.After(testenv.WaitShort):
		t.Fatal("no Test build of the new draft was started")
	}
	v, err := f.hub.envs.Show(ctx, repo.ID)
	if err != nil || v.Current.Version != 1 || v.Current.Settings.Image != "debian:12" || v.Draft == nil || v.Draft.Settings.Image != "debian:13" {
		t.Fatalf("after the push: %+v (%v), want version 1 on debian:12 and a draft of debian:13 waiting", v, err)
	}
	// Its Variables wait in the draft too: the pushed file set none.
	if vars, _ := f.store.Variables.List(ctx, repo.ID); len(vars) != 1 || vars[0].Name != "APP_MODE" || vars[0].Value != "dev" {
		t.Errorf("the Repo's Variables after the push: %+v, want APP_MODE=dev alone, version 1's", vars)
	}
	for _, want := range []string{"Variable APP_MODE: set from .devcontainer/devcontainer.json", "Variable EXTRA: set from .devcontainer/devcontainer.json"} {
		if !slices.Contains(v.Draft.Changes, want) {
			t.Errorf("the draft's changes: %q, want %q", v.Draft.Changes, want)
		}
	}
	pushers.none(t, 200*time.Millisecond)
	readers.none(t, 0)
	if n := len(tested); n != 0 {
		t.Errorf("%d more Test builds, want one for the push that changed the file", n)
	}
}

// TestADraftFromDevcontainerPinsItsFeaturesInTheirOrder: the draft's
// Features are the file's with those they depend on, each pinned by
// digest, in the order the specification installs them; the Hub reads
// their metadata through its outbound rules.
func TestADraftFromDevcontainerPinsItsFeaturesInTheirOrder(t *testing.T) {
	gh := testkit.NewGitHub(t)
	f := newFixture(t, withGitHub(gh, time.Minute), loopbackHooks(time.Second))
	_, oliviaTok, _ := pusherAndReader(t, f, gh)
	reg := testkit.Registry(t)
	testkit.PushFeature(t, reg, "f/base:1", `{"id": "base", "options": {"greeting": {"type": "string", "default": "hi"}}}`, "#!/bin/sh\n")
	testkit.PushFeature(t, reg, "f/tool:1", `{"id": "tool", "dependsOn": {"`+reg+`/f/base:1": {}}}`, "#!/bin/sh\n")
	servedFiles(t, gh, map[string]string{".devcontainer.json": `{"image": "debian:12", "features": {"` + reg + `/f/tool:1": {"mode": "fast"}}}`})
	repo, _ := f.store.Repos.EnsureRepo(context.Background(), gh.RepoURL("acme/app"), "acme/app")
	code, raw := askAs(t, f, oliviaTok, http.MethodPost, "/api/repos/"+repo.ID+"/environment/draft/devcontainer", api.FromDevcontainer{})
	var e api.Environment
	if json.Unmarshal(raw, &e); code != http.StatusOK || e.Draft == nil {
		t.Fatalf("from the devcontainer.json: %d %s", code, raw)
	}
	fs := e.Draft.Settings.Features
	if len(fs) != 2 || !strings.HasPrefix(fs[0].Ref, reg+"/f/base@sha256:") || !slices.Equal(fs[0].Env, []string{"GREETING=hi"}) ||
		!strings.HasPrefix(fs[1].Ref, reg+"/f/tool@sha256:") || !slices.Equal(fs[1].Env, []string{"MODE=fast"}) {
		t.Errorf("got Features %+v, want base (which tool dependsOn) then tool, pinned, with their options", fs)
	}
	if !e.Draft.NeedsTest || !slices.Contains(e.Draft.From.Notes, "features: installed in the Build in this order: base, tool") {
		t.Errorf("got needs_test %v, notes %q, want a Test build needed and the order noted", e.Draft.NeedsTest, e.Draft.From.Notes)
	}
}
