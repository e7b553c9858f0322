package environment

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
	"kndl.dev/kndl/internal/testenv"
)

func TestAConfigIsCheckedFieldByField(t *testing.T) {
	for _, c := range []struct {
		json, want string
	}{
		{`{"image":"debian:12"}`, ""},
		{`{"image":"ghcr.io/org/img:v1@sha256:` + strings.Repeat("a", 64) + `"}`, ""},
		{`{"image":"localhost:5000/x"}`, ""},
		{`{"image":"Debian 12"}`, "not an image reference"},
		{`{"image":"x; rm -rf /"}`, "not an image reference"},
		{`{"bootstrap":"` + strings.Repeat("x", MaxScript+1) + `"}`, "at most"},
		{`{"start":"a\u0000b"}`, "not UTF-8 text"},
		{`{"cpus":-1}`, "cpus"},
		{`{"memory_mib":2000000}`, "memory"},
		{`{"dependency_folders":["node_modules",".venv","packages/*/target"],"next_to":{"package.json":"node_modules","*.csproj":"obj"}}`, ""},
		{`{"dependency_folders":["/abs"]}`, "dependency_folders pattern \"/abs\" is absolute"},
		{`{"dependency_folders":["a/../b"]}`, "a . or .. element"},
		{`{"dependency_folders":["a//b"]}`, "empty path element"},
		{`{"dependency_folders":["x/"]}`, "empty path element"},
		{`{"dependency_folders":[".git"]}`, "names .git"},
		{`{"dependency_folders":["["]}`, "not a glob"},
		{`{"dependency_folders":["a\\b"]}`, "backslash"},
		{`{"dependency_folders":["a\nb"]}`, "control character"},
		{`{"dependency_folders":[""]}`, "is empty"},
		{`{"dependency_folders":["` + strings.Repeat("x", MaxPattern+1) + `"]}`, "over 200 bytes"},
		{`{"dependency_folders":[` + strings.Repeat(`"x",`, MaxPatterns) + `"x"]}`, "at most 32"},
		{`{"next_to":{"web/package.json":"node_modules"}}`, "next_to pattern \"web/package.json\" has a slash"},
		{`{"next_to":{"package.json":"a/node_modules"}}`, "next_to package.json: folder pattern \"a/node_modules\" has a slash"},
		{`{"next_to":{"package.json":"node_*"}}`, "is a glob"},
		{`{"next_to":{"package.json":".."}}`, ". or .. element"},
		{`{"next_to":["package.json"]}`, "not one"},
		{`{"egress":{"mode":"allowlist","allow":["npm","*.example.com","-github"]}}`, ""},
		{`{"egress":{"mode":"allowlist","allow":["http://x.example.com"]}}`, "egress allow \"http://x.example.com\" is not a host name"},
		{`{"egress":{"mode":"closed"}}`, "want open or allowlist"},
		{`{"egress":{"allow":["npm"]}}`, "while egress is open"},
		{`{"check":"make test"}`, ""},
		{`{"check":"make test\nrm -rf /"}`, "not one line"},
		{`{"check":"` + strings.Repeat("x", MaxCheck+1) + `"}`, "not one line"},
		{`{"features":[{"ref":"ghcr.io/devcontainers/features/go@sha256:` + strings.Repeat("a", 64) + `","env":["VERSION=1.22"]}]}`, ""},
		{`{"features":[{"ref":"ghcr.io/devcontainers/features/go:1"}]}`, "features[0] \"ghcr.io/devcontainers/features/go:1\" is not a Feature pinned by digest"},
		{`{"features":[{"ref":"ghcr.io/f/go@sha256:` + strings.Repeat("a", 64) + `","env":["1X=y"]}]}`, "an option \"1X=y\" is not NAME=value"},
		{`{"features":[` + strings.Repeat(`{"ref":"x"},`, MaxFeatures) + `{"ref":"x"}]}`, "at most 32"},
		{`{"ports":[{"port":3000,"label":"<b>Web</b> & docs ✓"},{"port":8080}]}`, ""},
		{`{"ports":[{"port":0}]}`, "ports[0] 0 is not a port"},
		{`{"ports":[{"port":65536}]}`, "ports[0] 65536 is not a port"},
		{`{"ports":[{"port":3000},{"port":3000,"label":"again"}]}`, "ports[1] 3000 is listed twice"},
		{`{"ports":[{"port":3000,"label":"web\u001b[2J"}]}`, `ports[0] 3000: label "web\x1b[2J" has a control character`},
		{`{"ports":[{"port":3000,"label":"web\u2066x"}]}`, `ports[0] 3000: label "web\u2066x" has a control character`},
		{`{"ports":[{"port":3000,"label":"` + strings.Repeat("x", MaxPortLabel+1) + `"}]}`, "is over 80 characters"},
		{`{"ports":[` + strings.Repeat(`{"port":1},`, MaxPorts) + `{"port":2}]}`, "ports has 33 ports; at most 32"},
		{`{"container_env":["GOFLAGS=-mod=mod","EMPTY=","TAB=a\tb"],"user":"vscode"}`, ""},
		{`{"user":"1000"}`, ""},
		{`{"container_env":["1X=y"]}`, "container_env[0] is not NAME=value"},
		{`{"container_env":["NOVALUE"]}`, "container_env[0] is not NAME=value"},
		{`{"container_env":["ESC=a\u001b[2J"]}`, "container_env ESC: the value is over 65536 bytes or has a control character"},
		{`{"container_env":["BIG=` + strings.Repeat("v", MaxVariableBytes+1) + `"]}`, "container_env BIG: the value is over"},
		{`{"user":"a b"}`, `user "a b" is not a user name or uid (remoteUser, containerUser)`},
		{`{"user":"x;id"}`, "is not a user name"},
		{`{"imgae":"debian:12"}`, "unknown field"},
		{`[1]`, "not one"},
	} {
		_, err := Parse([]byte(c.json))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want it taken", c.json[:min(len(c.json), 40)], err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, errdefs.ErrInvalid)):
			t.Errorf("%s: %v, want invalid, %q", c.json[:min(len(c.json), 40)], err, c.want)
		}
	}
}

// TestTheBuildDigestNamesExactlyTheBuildInputs: the image, either script
// and a Variable at build, its value included, change it, byte for byte;
// resources and the Variables' order do not.
func TestTheBuildDigestNamesExactlyTheBuildInputs(t *testing.T) {
	base := Config{Image: "debian:12", Bootstrap: "apt-get install -y jq\n", Start: "make deps\r\n"}
	vars := []AtBuild{{"A", "1"}, {"B", "2"}}
	d := base.BuildDigest(vars)
	changed := map[string]func() (Config, []AtBuild){
		"image":      func() (Config, []AtBuild) { c := base; c.Image = "debian:13"; return c, vars },
		"bootstrap":  func() (Config, []AtBuild) { c := base; c.Bootstrap += " "; return c, vars },
		"start CRLF": func() (Config, []AtBuild) { c := base; c.Start = "make deps\n"; return c, vars },
		"a value":    func() (Config, []AtBuild) { return base, []AtBuild{{"A", "1"}, {"B", "3"}} },
		"a name":     func() (Config, []AtBuild) { return base, []AtBuild{{"A", "1"}, {"C", "2"}} },
		"one more":   func() (Config, []AtBuild) { return base, append(vars, AtBuild{"D", ""}) },
		"a dependency folder": func() (Config, []AtBuild) {
			c := base
			c.DependencyFolders = []string{"node_modules"}
			return c, vars
		},
		"a next to file": func() (Config, []AtBuild) {
			c := base
			c.NextTo = map[string]string{"package.json": "node_modules"}
			return c, vars
		},
		"a pattern moved between the lists": func() (Config, []AtBuild) {
			c := base
			c.DependencyFolders, c.NextTo = []string{"a", "b", "c"}, nil
			d := c
			d.DependencyFolders, d.NextTo = []string{"a"}, map[string]string{"b": "c"}
			if c.BuildDigest(vars) == d.BuildDigest(vars) {
				return base, vars // fails the test: the two digests ran together
			}
			return c, vars
		},
		"docker": func() (Config, []AtBuild) { c := base; c.Docker = true; return c, vars },
		"a feature": func() (Config, []AtBuild) {
			c := base
			c.Features = []protocol.Feature{{Ref: "ghcr.io/f/go@sha256:" + strings.Repeat("a", 64)}}
			return c, vars
		},
		"a feature's option": func() (Config, []AtBuild) {
			c := base
			c.Features = []protocol.Feature{{Ref: "ghcr.io/f/go@sha256:" + strings.Repeat("a", 64), Env: []string{"VERSION=1"}}}
			d := c
			d.Features = []protocol.Feature{{Ref: "ghcr.io/f/go@sha256:" + strings.Repeat("a", 64)}}
			if c.BuildDigest(vars) == d.BuildDigest(vars) {
				return base, vars
			}
			return c, vars
		},
		"docker beside a folder": func() (Config, []AtBuild) {
			c := base
			c.DependencyFolders = []string{"node_modules"}
			d := c
			d.Docker = true
			if c.BuildDigest(vars) == d.BuildDigest(vars) {
				return base, vars
			}
			return d, vars
		},
		"container env": func() (Config, []AtBuild) { c := base; c.ContainerEnv = []string{"A=1"}; return c, vars },
		"a container env value": func() (Config, []AtBuild) {
			c := base
			c.ContainerEnv = []string{"A=1"}
			d := c
			d.ContainerEnv = []string{"A=2"}
			if c.BuildDigest(vars) == d.BuildDigest(vars) {
				return base, vars
			}
			return c, vars
		},
		"a user": func() (Config, []AtBuild) { c := base; c.User = "vscode"; return c, vars },
		"boundary moved": func() (Config, []AtBuild) {
			c := base
			c.Bootstrap, c.Start = base.Bootstrap+"make", " deps\r\n"
			return c, vars
		},
	}
	for name, f := range changed {
		if c, v := f(); c.BuildDigest(v) == d {
			t.Errorf("%s: the digest did not change", name)
		}
	}
	// A version made before the dependency folders and Docker keeps its
	// digest.
	if want := "sha256:19a804fd2c2672b1e1a4b8bdf1838087503f4cb73264e1b20f55e508dc4989ec"; d != want {
		t.Errorf("digest %s, want %s as main computed it before the dependency folders and Docker", d, want)
	}
	same := base
	same.CPUs, same.MemoryMiB = 4, 8192
	same.Egress = egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"npm"}}
	same.CheckCommand = "make test"
	same.Ports = []protocol.OfferedPort{{Port: 3000, Label: "web"}}
	if same.BuildDigest([]AtBuild{{"B", "2"}, {"A", "1"}}) != d {
		t.Error("resources, the egress policy, the check, the ports or the Variables' order changed the digest")
	}
}

func TestTheChangeLogNamesScriptsWithoutShowingThem(t *testing.T) {
	got := Changes(Config{Bootstrap: "echo secret-one\n", NextTo: map[string]string{"pyproject.toml": ".venv", "package.json": "node_modules"}},
		Config{Image: "debian:12", Bootstrap: "echo secret-two\necho more\n", Start: "x", Docker: true, DependencyFolders: []string{"node_modules", ".venv"}, CPUs: 2,
			CheckCommand: "TOKEN=secret-three make test"})
	want := []string{"image: the Runner's default -> debian:12", "docker: off -> on", "Bootstrap script changed (1 -> 2 lines)", "Start script added (1 lines)",
		"dependency folders: none -> node_modules, .venv", "next to: package.json=node_modules, pyproject.toml=.venv -> none", "cpus: the Runner's default -> 2", "check added"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("changes %q, want %q", got, want)
	}
	if strings.Contains(strings.Join(got, ""), "secret") {
		t.Fatal("a script's text in the change log")
	}
	go1 := protocol.Feature{Ref: "ghcr.io/f/go@sha256:" + strings.Repeat("a", 64), Env: []string{"TOKEN=secret-four"}}
	go2 := go1
	go2.Env = []string{"TOKEN=secret-five"}
	for _, c := range []struct {
		a, b []protocol.Feature
		want string
	}{
		{nil, []protocol.Feature{go1}, "features: none -> " + go1.Ref},
		{[]protocol.Feature{go1}, []protocol.Feature{go2}, "features: options changed"},
	} {
		if got := Changes(Config{Features: c.a}, Config{Features: c.b}); strings.Join(got, "|") != c.want {
			t.Errorf("changes %q, want %q: Features named by reference, their options not shown", got, c.want)
		}
	}
	for _, c := range []struct {
		a, b Config
		want string
	}{
		{Config{}, Config{ContainerEnv: []string{"A=secret-six", "B=x"}, User: "vscode"}, "container env: none -> A, B|user: root -> vscode"},
		{Config{ContainerEnv: []string{"A=secret-six"}, User: "vscode"}, Config{ContainerEnv: []string{"A=secret-seven"}}, "container env: values changed|user: vscode -> root"},
	} {
		if got := Changes(c.a, c.b); strings.Join(got, "|") != c.want {
			t.Errorf("changes %q, want %q: containerEnv named, its values not shown, and the user", got, c.want)
		}
	}
}

// fakeRunner answers env.test as its result says, sending log lines first.
type fakeRunner struct {
	svc    *Service
	id     string
	mu     sync.Mutex
	result error
	hold   bool // answers only once the Hub gives up waiting
	got    []protocol.EnvTest
}

func (f *fakeRunner) Request(ctx context.Context, typ string, body, reply any) error {
	req := body.(protocol.EnvTest)
	f.mu.Lock()
	f.got = append(f.got, req)
	res, hold := f.result, f.hold
	f.mu.Unlock()
	if hold {
		<-ctx.Done()
		return ctx.Err()
	}
	if err := f.svc.TestLog(ctx, f.id, protocol.EnvTestLog{TestID: req.TestID, Lines: []string{"building", "token ghp_" + strings.Repeat("A", 36)}}); err != nil {
		return err
	}
	return res
}

func newService(t *testing.T) (*Service, *store.Store, *fakeRunner, store.Repo) {
	t.Helper()
	ctx := context.Background()
	st := storetest.Open(t)
	repo, err := st.Repos.EnsureRepo(ctx, "https://github.com/acme/app", "acme/app")
	if err != nil {
		t.Fatal(err)
	}
	vars := []protocol.Variable{{Name: "AT", Value: "1", AtBuild: true}, {Name: "RUN", Value: "x"}}
	fr := &fakeRunner{id: "runner-1"}
	svc := New(Deps{Store: st.Environments, Log: slog.Default(),
		Variables:  func(context.Context, string) ([]protocol.Variable, error) { return vars, nil },
		PickRunner: func(context.Context, string) (string, Requester, error) { return fr.id, fr, nil },
		CloneToken: func(context.Context, string) (string, error) { return "ghs_clone", nil },
		Redact: func(_ context.Context, _ string, text string) string {
			return strings.ReplaceAll(text, "ghp_"+strings.Repeat("A", 36), "[masked]")
		},
	})
	fr.svc = svc
	return svc, st, fr, repo
}

// newSession makes a Session of the dev user's on a Runner of theirs.
func newSession(t *testing.T, st *store.Store, repo store.Repo) (store.User, store.Session) {
	t.Helper()
	ctx := context.Background()
	u, _ := st.Members.DevUser(ctx)
	rn, _, _ := st.Runners.CreateRunner(ctx, "r", u.ID)
	x, err := st.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: u.ID, RunnerID: rn.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return u, x
}

func testAndWait(t *testing.T, svc *Service, repo store.Repo) store.TestBuild {
	t.Helper()
	tb, err := svc.Test(context.Background(), repo, "u1")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitShort, "the Test build's end", func() bool {
		tb, _ = svc.TestBuild(context.Background(), repo.ID, tb.ID)
		return tb.State != store.TestRunning
	})
	return tb
}

// TestADraftThatChangesTheBuildAppliesOnlyAfterItsOwnTestBuildPassed: the
// gate of issue 13, against a real store.
func TestADraftThatChangesTheBuildAppliesOnlyAfterItsOwnTestBuildPassed(t *testing.T) {
	svc, _, fr, repo := newService(t)
	ctx := context.Background()
	draft := Config{Image: "debian:12", Bootstrap: "apt-get install -y jq\n"}
	if _, err := svc.Edit(ctx, repo.ID, draft, "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Apply(ctx, repo.ID, "u1"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "kndl env test") {
		t.Fatalf("apply without a Test build: %v, want refused, naming kndl env test", err)
	}

	fr.result = errors.New("the Bootstrap script failed: exit status 100")
	if tb := testAndWait(t, svc, repo); tb.State != store.TestFailed || !strings.Contains(tb.Detail, "exit status 100") {
		t.Fatalf("a failed Test build: %+v", tb)
	}
	if _, err := svc.Apply(ctx, repo.ID, "u1"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("apply after a failed Test build: %v, want refused", err)
	}

	fr.result = nil
	tb := testAndWait(t, svc, repo)
	if tb.State != store.TestPassed || !strings.Contains(tb.Log, "building\n") || strings.Contains(tb.Log, "ghp_") {
		t.Fatalf("a passed Test build: %+v, want its log, redacted", tb)
	}
	if got := fr.got[len(fr.got)-1]; got.RepoURL != repo.URL || got.Environment.Bootstrap != draft.Bootstrap || len(got.Variables) != 1 || got.Variables[0].Name != "AT" || got.CloneToken != "ghs_clone" {
		t.Fatalf("the Runner was asked %+v, want the draft with the Variables at build only", got)
	}
	// An edit after the Test build needs another.
	draft.Bootstrap += "apt-get install -y make\n"
	if _, err := svc.Edit(ctx, repo.ID, draft, "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Apply(ctx, repo.ID, "u1"); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("apply of an edited draft on the last one's Test build: %v, want refused", err)
	}
	testAndWait(t, svc, repo)
	v1, err := svc.Apply(ctx, repo.ID, "u1")
	if err != nil || v1.Version != 1 || v1.BuildVersion != 1 || !strings.Contains(v1.Changes, "Bootstrap script added") {
		t.Fatalf("apply after its Test build passed: %+v, %v", v1, err)
	}

	// Resources alone: at once, and the Build stays version 1's.
	draft.CPUs = 2
	if v, err := svc.Edit(ctx, repo.ID, draft, "u1"); err != nil || v.Draft.NeedsTest {
		t.Fatalf("a resources-only draft: %+v, %v; want no Test build needed", v.Draft, err)
	}
	v2, err := svc.Apply(ctx, repo.ID, "u1")
	if err != nil || v2.Version != 2 || v2.BuildVersion != 1 {
		t.Fatalf("a resources-only apply: %+v, %v; want version 2 on version 1's Build", v2, err)
	}
	if _, err := svc.Apply(ctx, repo.ID, "u1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("apply with no draft: %v, want not found", err)
	}
	log, err := svc.Log(ctx, repo.ID)
	if err != nil || len(log) != 2 || log[0].Version != 2 || log[0].CreatedBy != "u1" {
		t.Fatalf("the change log: %+v, %v", log, err)
	}
}

func TestAStaleDraftIsRefused(t *testing.T) {
	svc, st, _, repo := newService(t)
	ctx := context.Background()
	if _, err := svc.Edit(ctx, repo.ID, Config{CPUs: 1}, "u1"); err != nil {
		t.Fatal(err)
	}
	d, _ := st.Environments.Draft(ctx, repo.ID)
	if _, err := svc.Apply(ctx, repo.ID, "u1"); err != nil {
		t.Fatal(err)
	}
	// The same draft again, made from version 0 while version 1 applied.
	st.Environments.SaveDraft(ctx, store.EnvironmentDraft{RepoID: repo.ID, BaseVersion: d.BaseVersion, Config: Config{CPUs: 3}.JSON(), UpdatedBy: "u2"})
	if _, err := svc.Apply(ctx, repo.ID, "u2"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "edit the draft again") {
		t.Fatalf("a stale draft: %v, want refused", err)
	}
}

func TestATestBuildsLogComesOnlyFromItsRunnerAndARestartEndsIt(t *testing.T) {
	svc, st, _, repo := newService(t)
	ctx := context.Background()
	tb, err := st.Environments.CreateTestBuild(ctx, store.TestBuild{ID: "t1", RepoID: repo.ID, BuildDigest: "d", RunnerID: "runner-1", StartedBy: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.TestLog(ctx, "runner-2", protocol.EnvTestLog{TestID: tb.ID, Lines: []string{"forged"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another Runner's lines: %v, want not found", err)
	}
	if err := svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := svc.TestBuild(ctx, repo.ID, tb.ID)
	if got.State != store.TestFailed || strings.Contains(got.Log, "forged") || !strings.Contains(got.Detail, "restarted") {
		t.Fatalf("after the Hub's restart: %+v, want failed, saying why", got)
	}
}

// TestClosingEndsTheTestBuildsUnderWay: Close returns at once though a
// Runner holds a Test build unanswered (up to testTimeout), recording it
// failed as stopped; a Test build asked for after Close is refused and
// recorded the same way, never left running.
func TestClosingEndsTheTestBuildsUnderWay(t *testing.T) {
	svc, st, fr, repo := newService(t)
	ctx := context.Background()
	if _, err := svc.Edit(ctx, repo.ID, Config{Bootstrap: "make\n"}, "u1"); err != nil {
		t.Fatal(err)
	}
	fr.hold = true
	held, err := svc.Test(ctx, repo, "u1")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitShort, "the Runner asked", func() bool {
		fr.mu.Lock()
		defer fr.mu.Unlock()
		return len(fr.got) == 1
	})
	closed := make(chan struct{})
	go func() { svc.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(testenv.WaitShort):
		t.Fatal("Close waits for the Runner's answer")
	}
	if _, err := svc.Test(ctx, repo, "u1"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("a Test build after Close: %v, want unavailable", err)
	}
	refused, err := st.Environments.LatestTestBuild(ctx, repo.ID, held.BuildDigest)
	if err != nil || refused.ID == held.ID {
		t.Fatalf("the refused Test build is not recorded: %+v, %v", refused, err)
	}
	held, _ = st.Environments.TestBuild(ctx, repo.ID, held.ID)
	for _, tb := range []store.TestBuild{held, refused} {
		if tb.State != store.TestFailed || !strings.Contains(tb.Detail, "Hub stopped") {
			t.Errorf("Test build %s after Close: %s %q, want failed, saying the Hub stopped", tb.ID, tb.State, tb.Detail)
		}
	}
}

// TestASessionStartsOnTheCurrentVersionAndIsToldOfANewerOne: a start
// records the version it got; a later one waits for the next start.
func TestASessionStartsOnTheCurrentVersionAndIsToldOfANewerOne(t *testing.T) {
	svc, st, _, repo := newService(t)
	ctx := context.Background()
	u, x := newSession(t, st, repo)
	if env, err := svc.ForStart(ctx, x.ID, repo.ID); err != nil || env != nil {
		t.Fatalf("with no version: %+v, %v; want the Runner's defaults", env, err)
	}
	allow := egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"pypi"}}
	v, _ := svc.Edit(ctx, repo.ID, Config{CPUs: 2, Egress: allow}, u.ID)
	if v.Draft == nil || v.Draft.NeedsTest || !slices.Contains(v.Draft.Changes, "egress: open -> allowlist: pypi") {
		t.Fatalf("the draft: %+v; want the egress change, applying without a Test build", v.Draft)
	}
	if _, err := svc.Apply(ctx, repo.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	if on, waiting, err := svc.OfSession(ctx, x.ID, repo.ID); err != nil || on != 0 || waiting != 1 {
		t.Fatalf("before its next start: on %d, waiting %d, %v; want 0 and 1", on, waiting, err)
	}
	env, err := svc.ForStart(ctx, x.ID, repo.ID)
	if err != nil || env == nil || env.Version != 1 || env.CPUs != 2 || !slices.Equal(env.Egress.Allow, allow.Allow) || !env.Egress.Restricted() {
		t.Fatalf("its next start: %+v, %v; want version 1", env, err)
	}
	if on, waiting, _ := svc.OfSession(ctx, x.ID, repo.ID); on != 1 || waiting != 0 {
		t.Fatalf("after it: on %d, waiting %d; want 1 and none", on, waiting)
	}
}

// TestAVersionsPortsKeepTheirLabelsThroughTheStoreAndStayTheHubs: ports
// and their labels, set by hand, apply without a Test build, come back
// from the store as they were, are named in the change log, and are what
// PortsOf offers the view of a Session on that version; the Runner is
// never sent them.
func TestAVersionsPortsKeepTheirLabelsThroughTheStoreAndStayTheHubs(t *testing.T) {
	svc, st, _, repo := newService(t)
	ctx := context.Background()
	u, x := newSession(t, st, repo)
	ports := []protocol.OfferedPort{{Port: 3000, Label: `<b>Web</b> & "docs" ✓`}, {Port: 8080}}
	v, err := svc.Edit(ctx, repo.ID, Config{Ports: ports}, u.ID)
	if err != nil || v.Draft.NeedsTest {
		t.Fatalf("a draft of ports: %+v, %v; want one that needs no Test build", v.Draft, err)
	}
	if _, err := svc.Apply(ctx, repo.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Edit(ctx, repo.ID, Config{Ports: ports[1:]}, u.ID); err != nil {
		t.Fatal(err)
	}
	v2, err := svc.Apply(ctx, repo.ID, u.ID)
	if err != nil || v2.BuildVersion != 1 || !strings.Contains(v2.Changes, `ports: 3000 "<b>Web</b> & \"docs\" ✓", 8080 -> 8080`) {
		t.Fatalf("version 2: %+v, %v; want version 1's Build and the ports' change logged", v2, err)
	}
	log, err := svc.Log(ctx, repo.ID)
	if err != nil || len(log) != 2 || !reflect.DeepEqual(log[1].Settings.Ports, ports) || !reflect.DeepEqual(log[0].Settings.Ports, ports[1:]) {
		t.Fatalf("the versions from the store: %+v, %v; want each one's ports and labels as set", log, err)
	}
	env, err := svc.ForStart(ctx, x.ID, repo.ID)
	if err != nil || env == nil || env.Version != 2 || env.Ports != nil {
		t.Fatalf("the Runner's start: %+v, %v; want version 2 without the ports", env, err)
	}
	on, err := st.Sessions.SessionByID(ctx, x.ID)
	if err != nil || on.EnvironmentVersion != 2 {
		t.Fatalf("the Session as read: on version %d, %v; want 2", on.EnvironmentVersion, err)
	}
	for range 2 { // read, then kept
		if got, err := svc.PortsOf(ctx, repo.ID, on.EnvironmentVersion); err != nil || !reflect.DeepEqual(got, ports[1:]) {
			t.Fatalf("the Session's offered ports: %+v, %v; want version 2's", got, err)
		}
	}
	if got, err := svc.PortsOf(ctx, repo.ID, 1); err != nil || !reflect.DeepEqual(got, ports) {
		t.Fatalf("version 1's offered ports: %+v, %v; want its own", got, err)
	}
}

func TestAnAllowlistsNewHostsReachAnAwakeSessionNowAndASwitchOfModeWaitsForItsWake(t *testing.T) {
	svc, st, _, repo := newService(t)
	ctx := context.Background()
	u, _ := st.Members.DevUser(ctx)
	rn, _, _ := st.Runners.CreateRunner(ctx, "r", u.ID)
	session := func() string {
		x, err := st.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: u.ID, RunnerID: rn.ID, Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.ForStart(ctx, x.ID, repo.ID); err != nil {
			t.Fatal(err)
		}
		return x.ID
	}
	apply := func(c Config) Version {
		t.Helper()
		if _, err := svc.Edit(ctx, repo.ID, c, u.ID); err != nil {
			t.Fatal(err)
		}
		v, err := svc.Apply(ctx, repo.ID, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	open := session()
	apply(Config{Egress: egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"npm"}}})
	listed := session()
	swapped := map[string][]string{}
	swap := func(_ context.Context, id string, p egress.Policy) error {
		swapped[id] = p.Allow
		return nil
	}

	// New hosts: the Session under the allowlist takes them now and runs
	// on the new version; the open one waits for its wake.
	v2 := apply(Config{Egress: egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"npm", "pypi"}}})
	notes, err := svc.EgressNow(ctx, v2, []string{open, listed}, swap)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(swapped[listed], []string{"npm", "pypi"}) || swapped[open] != nil {
		t.Fatalf("swapped %v; want the listed Session's allowlist swapped, the open one's not", swapped)
	}
	if notes[listed] != "egress: Environment version 2's allowlist: npm, pypi applies now" || !strings.Contains(notes[open], "applies at the next wake") {
		t.Fatalf("notes %q", notes)
	}
	if on, waiting, _ := svc.OfSession(ctx, listed, repo.ID); on != 2 || waiting != 0 {
		t.Fatalf("the swapped Session: on %d, waiting %d; want on version 2", on, waiting)
	}

	// A version that changes the CPUs too: the hosts swap now, the
	// Session still waits for the version.
	v3 := apply(Config{CPUs: 2, Egress: egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"pypi"}}})
	notes, _ = svc.EgressNow(ctx, v3, []string{listed}, swap)
	if !slices.Equal(swapped[listed], []string{"pypi"}) || !strings.HasSuffix(notes[listed], "applies now") {
		t.Fatalf("swapped %v, notes %q; want pypi's now", swapped, notes)
	}
	if on, waiting, _ := svc.OfSession(ctx, listed, repo.ID); on != 2 || waiting != 3 {
		t.Fatalf("after a version with its CPUs changed: on %d, waiting %d; want 2, waiting for 3", on, waiting)
	}

	// A Runner that does not take it, and a switch to open: each at the
	// next wake; a version that leaves egress alone notes nothing.
	refuse := func(context.Context, string, egress.Policy) error {
		return errors.New("the Session's Runner is not connected")
	}
	v4 := apply(Config{CPUs: 2, Egress: egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"go"}}})
	if notes, _ := svc.EgressNow(ctx, v4, []string{listed}, refuse); !strings.Contains(notes[listed], "applies at the next wake: the Runner did not take it now (the Session's Runner is not connected)") {
		t.Fatalf("notes %q; want it at the next wake, saying why", notes)
	}
	v5 := apply(Config{CPUs: 2})
	if notes, _ := svc.EgressNow(ctx, v5, []string{listed}, refuse); !strings.Contains(notes[listed], "version 5's open applies at the next wake: a switch between open and allowlist") {
		t.Fatalf("notes %q; want the switch to open at the next wake", notes)
	}
	v6 := apply(Config{CPUs: 3})
	if notes, err := svc.EgressNow(ctx, v6, []string{listed, open}, refuse); len(notes) != 0 || err != nil {
		t.Fatalf("a version that leaves egress alone: %q, %v", notes, err)
	}
}
