package hub

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

const setupToken = "sk-ant-oat01-unit-test-token-0123456789"

// TestClaudeTokenIsWriteOnlyAndSealed: the API takes the token and never
// gives it back; the store holds it sealed.
func TestClaudeTokenIsWriteOnlyAndSealed(t *testing.T) {
	f := newFixture(t)
	do := func(method, body string) (int, string) {
		req, _ := http.NewRequest(method, f.srv.URL+"/api/account"+map[bool]string{true: "/claude-token", false: ""}[method != http.MethodGet], strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.cli)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do(http.MethodPut, `{"token":"too short"}`); code != http.StatusBadRequest {
		t.Fatalf("a bad token: %d %s, want 400", code, body)
	}
	if code, body := do(http.MethodPut, `{"token":"`+setupToken+`"}`); code != http.StatusNoContent {
		t.Fatalf("set: %d %s", code, body)
	}
	code, body := do(http.MethodGet, "")
	if code != http.StatusOK || strings.Contains(body, "sk-ant") || !strings.Contains(body, "claude_token_set_at") {
		t.Fatalf("account = %d %s; want when it was set and never the token", code, body)
	}
	for _, p := range []string{f.dbPath, f.dbPath + "-wal"} {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), setupToken) {
			t.Fatalf("%s holds the setup token in the clear", p)
		}
	}
}

// TestCredentialsGoOnlyToTheSessionsOwnRunner: the Hub gives a Creator's
// token only to the Runner of a Session of theirs that is starting or
// awake, and only while they have one.
func TestCredentialsGoOnlyToTheSessionsOwnRunner(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	repo, _ := f.store.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	_, otherToken, _ := f.store.Runners.CreateRunner(ctx, "r2", dev.ID)

	ask := func(token string) (protocol.SessionCredentials, error) {
		c, _ := helloWith(t, f, token, nil)
		var got protocol.SessionCredentials
		err := c.Request(ctx, protocol.TypeSessionCredentials, protocol.SessionRef{SessionID: s.ID}, &got)
		return got, err
	}
	if _, err := ask(f.rtoken); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("no token stored: err = %v, want forbidden", err)
	}
	if err := f.hub.StoreClaudeToken(ctx, dev.ID, setupToken); err != nil {
		t.Fatal(err)
	}
	got, err := ask(f.rtoken)
	if err != nil || got.ClaudeToken != setupToken || got.ClaudeTokenInSandbox {
		t.Fatalf("own Runner: %+v, %v, want the token, for the relay to hold (HUB_CLAUDE_TOKEN's default)", got, err)
	}
	if _, err := ask(otherToken); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another Runner: err = %v, want not found", err)
	}
	f.store.Sessions.MoveSession(ctx, s.ID, store.Starting, store.Asleep, "", false)
	if _, err := ask(f.rtoken); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("an asleep Session: err = %v, want forbidden", err)
	}
}

// TestCredentialsGoOnlyToARunnerTheCreatorMayUse: a Runner another Member
// paired gets a Session's credentials only while it is shared, asked at
// the moment it answers: whatever the Session's state, and on a connection
// opened while it was shared.
func TestCredentialsGoOnlyToARunnerTheCreatorMayUse(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	bob, _ := member(t, f, "bob")
	bobs, bobsToken, err := f.store.Runners.CreateRunner(ctx, "bobs-box", bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.hub.StoreClaudeToken(ctx, dev.ID, setupToken); err != nil {
		t.Fatal(err)
	}
	repo, _ := f.store.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: bobs.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	f.store.Sessions.MoveSession(ctx, s.ID, store.Starting, store.Active, "", false)
	c, _ := helloWith(t, f, bobsToken, []string{s.ID}) // it runs there
	ask := func() (protocol.SessionCredentials, error) {
		var got protocol.SessionCredentials
		err := c.Request(ctx, protocol.TypeSessionCredentials, protocol.SessionRef{SessionID: s.ID}, &got)
		return got, err
	}
	if got, err := ask(); !errors.Is(err, errdefs.ErrForbidden) || got.ClaudeToken != "" {
		t.Fatalf("bob's unshared Runner: %+v %v, want forbidden", got, err)
	}
	f.store.Runners.SetRunnerShared(ctx, bobs.ID, true)
	if got, err := ask(); err != nil || got.ClaudeToken != setupToken {
		t.Fatalf("bob's Runner shared: %+v %v", got, err)
	}
	f.store.Runners.SetRunnerShared(ctx, bobs.ID, false) // the store alone: the Session stays Active
	if got, err := ask(); !errors.Is(err, errdefs.ErrForbidden) || got.ClaudeToken != "" {
		t.Fatalf("bob's Runner unshared on the same connection: %+v %v, want forbidden", got, err)
	}
}

// TestRunnerMessagesBeforeHelloAreRefused: a Runner must say hello before
// anything else it sends is answered.
func TestRunnerMessagesBeforeHelloAreRefused(t *testing.T) {
	f := newFixture(t)
	c := connectRunner(t, f, f.rtoken)
	err := c.Request(context.Background(), protocol.TypeSessionCredentials, protocol.SessionRef{SessionID: "x"}, nil)
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("err = %v, want invalid (say hello first)", err)
	}
	testenv.Eventually(t, testenv.WaitShort, "not counted as connected", func() bool { return !f.hub.Connected(f.runner.ID) })
}

func TestCheckRepo(t *testing.T) {
	tests := []struct {
		repo string
		ok   bool
	}{
		{"https://github.com/acme/app.git", true},
		{"ssh://git@github.com/acme/app.git", true},
		{"git@github.com:acme/app.git", true},
		{"/srv/git/app", true},
		{"file:///srv/git/app", true},
		{"", false},
		{"https://user:token@github.com/acme/app.git", false},
		{"https://token@github.com/acme/app.git", false},
		{"ext::sh -c touch% /tmp/pwned", false},
		{"fd::17", false},
		{"--upload-pack=touch /tmp/pwned", false},
		{"relative/path", false},
		{"ftp://example.com/x", false},
		{"/srv/git/app\nother", false},
	}
	for _, tt := range tests {
		if err := checkRepo(tt.repo); (err == nil) != tt.ok {
			t.Errorf("checkRepo(%q) = %v, want ok=%v", tt.repo, err, tt.ok)
		}
	}
}

// TestALocalPathThatIsNoRepositoryIsRefused: on kndl dev, whose Runner
// clones from the same machine, a path that is not a git repository is
// refused before any Session is made.
func TestALocalPathThatIsNoRepositoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	work, bare, plain := filepath.Join(dir, "work"), filepath.Join(dir, "bare.git"), filepath.Join(dir, "plain")
	for _, d := range []string{filepath.Join(work, ".git"), filepath.Join(bare, "objects"), filepath.Join(bare, "refs"), plain} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(bare, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	tests := []struct {
		repo string
		ok   bool
	}{
		{work, true},
		{bare, true},
		{"https://github.com/acme/app.git", true},
		{plain, false},
		{filepath.Join(dir, "missing"), false},
		{filepath.Join(bare, "HEAD"), false},
	}
	for _, tt := range tests {
		err := checkLocalRepo(tt.repo)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, errdefs.ErrInvalid)) {
			t.Errorf("checkLocalRepo(%q) = %v, want ok=%v", tt.repo, err, tt.ok)
		}
	}
}

// TestTheHubOffersOnlyTheModelsEveryRunnerTakesAndRefusesAnyOther: with
// two Runners the Creator may use, one whose Claude Code lacks a model of
// the other's, the offer is what both take; a Session asked for on any
// other model or effort is refused naming the offer, and none is made;
// changing a Session's model is held to the same offer.
func TestTheHubOffersOnlyTheModelsEveryRunnerTakesAndRefusesAnyOther(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pinned := claude.Models()
	older := claude.Table{Version: "older", Models: pinned.Models[:len(pinned.Models)-1]}
	gone := pinned.Models[len(pinned.Models)-1]
	hello(t, f)
	_, token2, err := f.store.Runners.CreateRunner(ctx, "r2", f.runner.CreatedBy)
	if err != nil {
		t.Fatal(err)
	}
	c2 := connectRunner(t, f, token2)
	if err := c2.Request(ctx, protocol.TypeHello, protocol.Hello{MinVersion: protocol.MinVersion, MaxVersion: protocol.Version, Name: "r2", Models: older}, nil); err != nil {
		t.Fatal(err)
	}

	code, body := f.call(t, http.MethodGet, "/api/models", "")
	var offer claude.Table
	if err := json.Unmarshal([]byte(body), &offer); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/models: %d %s", code, body)
	}
	if !reflect.DeepEqual(offer.Models, older.Models) || offer.Version != "" {
		t.Fatalf("the offer is %+v, want what both Runners take, %+v, of no one version", offer, older.Models)
	}

	def, _ := pinned.Default()
	for _, req := range []string{
		`{"repo":"https://github.com/acme/app.git","prompt":"hi","model":"` + gone.Alias + `"}`,
		`{"repo":"https://github.com/acme/app.git","prompt":"hi","model":"no-such-model"}`,
		`{"repo":"https://github.com/acme/app.git","prompt":"hi","model":"` + def.Alias + `","effort":"warp"}`,
	} {
		code, body := f.call(t, http.MethodPost, "/api/sessions", req)
		if code != http.StatusBadRequest || !strings.Contains(body, def.Alias+" ("+def.ID+")") && !strings.Contains(body, strings.Join(def.Efforts, ", ")) {
			t.Errorf("POST /api/sessions %s: %d %s, want 400 naming what is offered", req, code, body)
		}
	}
	if ss, _ := f.store.Sessions.List(ctx, store.SessionFilter{}); len(ss) != 0 {
		t.Fatalf("a refused Session was made: %+v", ss)
	}

	dev, _ := f.store.Members.DevUser(ctx)
	repo, _ := f.store.Repos.EnsureRepo(ctx, "/srv/app", "app")
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := f.call(t, http.MethodPatch, "/api/sessions/"+s.ID, `{"model":"`+gone.Alias+`"}`); code != http.StatusBadRequest || !strings.Contains(body, "is not offered") {
		t.Errorf("PATCH to a model one Runner lacks: %d %s, want 400", code, body)
	}
	if code, body := f.call(t, http.MethodPatch, "/api/sessions/"+s.ID, `{"model":"`+def.ID+`","effort":"`+def.Efforts[0]+`"}`); code != http.StatusOK {
		t.Errorf("PATCH to an offered model by its id: %d %s, want 200", code, body)
	}
}

// TestAHelloWithoutItsModelsIsRefused: a Runner of this protocol version
// always reports its models, and one of version 4, which reports none, is
// refused for its version; neither counts as connected.
func TestAHelloWithoutItsModelsIsRefused(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct {
		hello protocol.Hello
		want  string
	}{
		{protocol.Hello{MinVersion: 4, MaxVersion: 4, Name: "r1"}, "no common protocol version"},
		{protocol.Hello{MinVersion: protocol.MinVersion, MaxVersion: protocol.Version, Name: "r1"}, "the Runner's models"},
	} {
		c := connectRunner(t, f, f.rtoken)
		if err := c.Request(context.Background(), protocol.TypeHello, tt.hello, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("hello %+v: %v, want refused saying %q", tt.hello, err, tt.want)
		}
		if f.hub.Connected(f.runner.ID) {
			t.Fatalf("hello %+v counts as connected", tt.hello)
		}
	}
}
