package security

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

const tokenOf = "sk-ant-oat01-security-test-%s-0123456789"

// fakeRunner is a Runner on the real protocol, paired by a Member on the
// Hub's API: it says hello and answers what the Hub asks as done,
// telling which Sessions the Hub started on it.
type fakeRunner struct {
	api.CreatedRunner
	conn    *protocol.Conn
	started chan string
	starts  sync.Map // Session id -> the raw session.start it got last
	files   sync.Map // a Workspace file's path -> the bytes it holds
	// changes is what it answers session.diff with, as JSON.
	changes sync.Map // Session id -> protocol.Changes
}

// pair has b pair a Runner named name and connects it.
func (e *env) pair(b *browser, name string) *fakeRunner {
	e.t.Helper()
	code, body := e.do(b.Client, req{method: "POST", path: "/api/runners", body: fmt.Sprintf(`{"name":%q}`, name), origin: "self"})
	var rn fakeRunner
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &rn.CreatedRunner) != nil {
		e.t.Fatalf("pair %s: %d %s", name, code, body)
	}
	conn, err := e.dialRunner(rn.Token)
	if err != nil {
		e.t.Fatalf("runner %s dials: %v", name, err)
	}
	rn.conn, rn.started = conn, make(chan string, 16)
	done := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	conn.Handle(protocol.TypeSessionStart, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var m protocol.SessionStart
		json.Unmarshal(body, &m)
		rn.starts.Store(m.SessionID, append(json.RawMessage(nil), body...))
		rn.started <- m.SessionID
		return nil, nil
	})
	conn.Handle(protocol.TypeSessionFile, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var m protocol.SessionFile
		json.Unmarshal(body, &m)
		return rn.sendFile(ctx, e, m)
	})
	conn.Handle(protocol.TypeSessionDiff, false, func(ctx context.Context, body json.RawMessage) (any, error) {
		var m protocol.SessionDiff
		json.Unmarshal(body, &m)
		ch, ok := rn.changes.Load(m.SessionID)
		if !ok {
			return nil, fmt.Errorf("no Workspace of session %s here: %w", m.SessionID, errdefs.ErrNotFound)
		}
		data, _ := json.Marshal(ch)
		if err := rn.sendStream(ctx, e, m.Stream, data); err != nil {
			return nil, err
		}
		return protocol.SessionDiffInfo{Size: int64(len(data))}, nil
	})
	conn.Handle(protocol.TypeSessionDeliver, false, func(context.Context, json.RawMessage) (any, error) {
		return protocol.SessionDelivered{Taken: true, Tries: 1}, nil
	})
	for _, typ := range []string{protocol.TypeSessionStop, protocol.TypeSessionStopTurn, protocol.TypeSessionArchive, protocol.TypeSessionRestore} {
		conn.Handle(typ, false, done)
	}
	go conn.Serve(context.Background())
	e.t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "test over") })
	if err := conn.Request(context.Background(), protocol.TypeHello, protocol.Hello{MinVersion: 1, MaxVersion: protocol.Version, Models: claude.Models(), Name: name}, nil); err != nil {
		e.t.Fatalf("runner %s hello: %v", name, err)
	}
	return &rn
}

// sendFile sends a file of rn.files over the stream the Hub asked for, as
// a Runner does: it dials the stream back, answers with the size, then
// writes the bytes.
func (rn *fakeRunner) sendFile(ctx context.Context, e *env, m protocol.SessionFile) (any, error) {
	data, ok := rn.files.Load(m.Path)
	if !ok {
		return nil, fmt.Errorf("no file %s in the Workspace: %w", m.Path, errdefs.ErrNotFound)
	}
	if err := rn.sendStream(ctx, e, m.Stream, data.([]byte)); err != nil {
		return nil, err
	}
	return protocol.SessionFileInfo{Name: path.Base(m.Path), Size: int64(len(data.([]byte)))}, nil
}

// sendStream dials the stream back and writes data on it.
func (rn *fakeRunner) sendStream(ctx context.Context, e *env, stream string, data []byte) error {
	ws, _, err := websocket.Dial(ctx, e.wsURL("/runner/stream/"+stream), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + rn.Token}}})
	if err != nil {
		return err
	}
	go func() {
		nc := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
		nc.Write(data)
		nc.Close()
	}()
	return nil
}

// dialRunner opens a Runner's connection with token, not yet served.
func (e *env) dialRunner(token string) (*protocol.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitShort)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, e.wsURL("/runner/connect"), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%w (%d)", err, resp.StatusCode)
		}
		return nil, err
	}
	return protocol.NewConn(ws, slog.New(slog.NewTextHandler(io.Discard, nil))), nil
}

// share has b share r (on) or unshare it, and returns the Hub's answer.
func (e *env) share(b *browser, r *fakeRunner, on bool) (int, string) {
	e.t.Helper()
	return e.do(b.Client, req{method: "PUT", path: "/api/runners/" + r.ID + "/shared", body: fmt.Sprintf(`{"shared":%v}`, on), origin: "self"})
}

// shared has the Owner share r (on) or unshare it.
func (e *env) shared(owner *browser, r *fakeRunner, on bool) {
	e.t.Helper()
	if code, body := e.share(owner, r, on); code != http.StatusNoContent {
		e.t.Fatalf("the Owner shares %s (%v): %d %s", r.Name, on, code, body)
	}
}

// credentials asks the Hub for a Session's credentials as this Runner.
func (r *fakeRunner) credentials(id string) (protocol.SessionCredentials, error) {
	var got protocol.SessionCredentials
	err := r.conn.Request(context.Background(), protocol.TypeSessionCredentials, protocol.SessionRef{SessionID: id}, &got)
	return got, err
}

// next returns the next Session the Hub starts on r.
func (r *fakeRunner) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-r.started:
		return id
	case <-time.After(testenv.WaitShort):
		t.Fatalf("the Hub started no Session on Runner %s", r.Name)
		return ""
	}
}

// nothingStarted fails if the Hub started a Session on r.
func (r *fakeRunner) nothingStarted(t *testing.T, what string) {
	t.Helper()
	select {
	case id := <-r.started:
		t.Fatalf("%s: the Hub started Session %s on Runner %s", what, id, r.Name)
	default:
	}
}

// storeToken has b store their Claude setup token.
func (e *env) storeToken(b *browser) {
	e.t.Helper()
	if code, body := e.do(b.Client, req{method: "PUT", path: "/api/account/claude-token", body: fmt.Sprintf(`{"token":%q}`, fmt.Sprintf(tokenOf, b.login)), origin: "self"}); code != http.StatusNoContent {
		e.t.Fatalf("%s stores a token: %d %s", b.login, code, body)
	}
}

// start has b start a Session of acme/app, on the Runner named runner
// if set, and returns the Hub's status and answer.
func (e *env) start(b *browser, runner string) (int, string, api.Session) {
	e.t.Helper()
	body, _ := json.Marshal(api.NewSession{Repo: e.gh.RepoURL("acme/app"), Prompt: "hello", Runner: runner})
	code, answer := e.do(b.Client, req{method: "POST", path: "/api/sessions", body: string(body), origin: "self"})
	var s api.Session
	json.Unmarshal([]byte(answer), &s)
	return code, answer, s
}

// team is the Owner olivia and the Members bob and carol, each with a
// setup token stored and access to acme/app.
func (e *env) team() (owner, bob, carol *browser) {
	e.t.Helper()
	owner = e.owner()
	bob, carol = e.member(owner, "bob"), e.member(owner, "carol")
	e.gh.InstallApp("acme/app")
	for _, b := range []*browser{owner, bob, carol} {
		e.gh.SetCollaborator("acme/app", b.login, true)
		e.storeToken(b)
	}
	return owner, bob, carol
}

// running has b start a Session on r, named, and waits for it to be
// Active there.
func (e *env) running(b *browser, r *fakeRunner) api.Session {
	e.t.Helper()
	code, body, s := e.start(b, r.Name)
	if code != http.StatusCreated || s.RunnerID != r.ID {
		e.t.Fatalf("%s starts a Session on %s: %d %s", b.login, r.Name, code, body)
	}
	if got := r.next(e.t); got != s.ID {
		e.t.Fatalf("%s started %s, want %s", r.Name, got, s.ID)
	}
	e.waitState(s.ID, store.Active)
	return s
}

// waitState waits for Session id to be in state st, and returns it.
func (e *env) waitState(id string, st store.SessionState) store.Session {
	e.t.Helper()
	var s store.Session
	testenv.Eventually(e.t, testenv.WaitShort, "session "+id+" "+string(st), func() bool {
		s, _ = e.store.Sessions.SessionByID(context.Background(), id)
		return s.State == st
	})
	return s
}

// TestAMembersIdleRunnerNeverGetsAnotherMembersSession: the Hub runs a
// Session only on a Runner of its Creator's or a shared one, however idle
// another Member's is; with none connected it refuses, saying what to do;
// a Runner asking for the credentials of a Session not on it gets nothing.
func TestAMembersIdleRunnerNeverGetsAnotherMembersSession(t *testing.T) {
	e := newEnv(t)
	_, bob, carol := e.team()
	bobs := e.pair(bob, "bobs-box")

	code, body, _ := e.start(carol, "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no Runner you may use is connected") || !strings.Contains(body, "ask the Owner to share one") {
		t.Fatalf("carol with no Runner of her own: %d %s, want 503 naming the way out", code, body)
	}
	bobs.nothingStarted(t, "carol with no Runner")

	carols := e.pair(carol, "carols-box")
	var first string
	for i := range 3 { // carols-box is busier each time; bobs-box stays idle
		code, body, s := e.start(carol, "")
		if code != http.StatusCreated || s.RunnerID != carols.ID {
			t.Fatalf("carol's Session %d: %d %s, want it on carols-box", i, code, body)
		}
		if got := carols.next(t); got != s.ID {
			t.Fatalf("carols-box started %s, want %s", got, s.ID)
		}
		if i == 0 {
			first = s.ID
		}
	}
	bobs.nothingStarted(t, "carol's Sessions")
	e.waitState(first, store.Active)
	if got, err := bobs.credentials(first); err == nil || got.ClaudeToken != "" {
		t.Fatalf("bobs-box asked for carol's Session's credentials: %+v %v, want nothing", got, err)
	}
	if got, err := carols.credentials(first); err != nil || got.ClaudeToken != fmt.Sprintf(tokenOf, "carol") {
		t.Fatalf("carols-box asked for her Session's credentials: %+v %v", got, err)
	}
}

// TestARunnerNamedThatIsNotYoursIsRefusedAndASharedOneIsUsed: kndl new
// --runner NAME with another Member's Runner is refused, saying it is not
// theirs; once the Owner shares it, it runs the Session, named or picked.
func TestARunnerNamedThatIsNotYoursIsRefusedAndASharedOneIsUsed(t *testing.T) {
	e := newEnv(t)
	owner, bob, carol := e.team()
	bobs := e.pair(bob, "bobs-box")

	code, body, _ := e.start(carol, "bobs-box")
	if code != http.StatusForbidden || !strings.Contains(body, "not yours and not shared") {
		t.Fatalf("carol naming bobs-box: %d %s, want 403 saying it is not hers", code, body)
	}
	if code, body, _ := e.start(carol, "nobodys-box"); code != http.StatusNotFound {
		t.Fatalf("carol naming a Runner never paired: %d %s, want 404", code, body)
	}
	bobs.nothingStarted(t, "refused")

	e.shared(owner, bobs, true)
	for _, name := range []string{"bobs-box", ""} {
		code, body, s := e.start(carol, name)
		if code != http.StatusCreated || s.RunnerID != bobs.ID {
			t.Fatalf("carol on shared bobs-box (named %q): %d %s", name, code, body)
		}
		bobs.next(t)
	}
}

// TestAnUnsharedRunnerKeepsNoOtherMembersSession: a shared Runner gets
// another Member's credentials; unshared, it puts their Sessions there to
// sleep, saying why, and they can't wake there nor get credentials; its
// owner's own Sessions run on. (internal/hub's
// TestCredentialsGoOnlyToARunnerTheCreatorMayUse holds credentials to the
// rule at the moment they are asked, whatever the Session's state.)
func TestAnUnsharedRunnerKeepsNoOtherMembersSession(t *testing.T) {
	e := newEnv(t)
	owner, bob, carol := e.team()
	bobs := e.pair(bob, "bobs-box")
	e.shared(owner, bobs, true)
	cs, bs := e.running(carol, bobs), e.running(bob, bobs)
	if got, err := bobs.credentials(cs.ID); err != nil || got.ClaudeToken != fmt.Sprintf(tokenOf, "carol") {
		t.Fatalf("shared bobs-box asked for carol's credentials: %+v %v", got, err)
	}

	e.shared(owner, bobs, false)
	got := e.waitState(cs.ID, store.Asleep)
	if !strings.Contains(got.StateDetail, "unshared its Runner bobs-box") {
		t.Errorf("carol's Session sleeps saying %q, want why", got.StateDetail)
	}
	if s, _ := e.store.Sessions.SessionByID(context.Background(), bs.ID); s.State != store.Active {
		t.Errorf("bob's own Session on his Runner is %s, want active", s.State)
	}
	if _, err := bobs.credentials(cs.ID); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("unshared bobs-box asked for carol's credentials: %v, want forbidden", err)
	}
	code, body := e.do(carol.Client, req{method: "POST", path: "/api/sessions/" + cs.ID + "/wake", origin: "self"})
	if code != http.StatusConflict || !strings.Contains(body, "no longer shared") {
		t.Fatalf("carol wakes her Session on unshared bobs-box: %d %s, want 409 saying why", code, body)
	}
	bobs.nothingStarted(t, "carol's wake")
}

// TestOnlyTheOwnerSharesARunner, and only its owner or the Owner removes
// one.
func TestOnlyTheOwnerSharesARunner(t *testing.T) {
	e := newEnv(t)
	owner, bob, carol := e.team()
	bobs := e.pair(bob, "bobs-box")
	for _, b := range []*browser{bob, carol} {
		for _, on := range []bool{true, false} {
			if code, body := e.share(b, bobs, on); code != http.StatusForbidden || !strings.Contains(body, "only the Hub's Owner shares Runners") {
				t.Errorf("%s shares bobs-box (%v): %d %s, want 403", b.login, on, code, body)
			}
		}
	}
	if code, body := e.do(carol.Client, req{method: "DELETE", path: "/api/runners/" + bobs.ID, origin: "self"}); code != http.StatusForbidden {
		t.Errorf("carol removes bob's Runner: %d %s, want 403", code, body)
	}
	if rn, _ := e.store.Runners.RunnerByID(context.Background(), bobs.ID); rn.Shared || !rn.RevokedAt.IsZero() {
		t.Fatalf("refused requests changed bobs-box: %+v", rn)
	}
	var rs []api.RunnerStatus
	if code, body := e.do(carol.Client, req{method: "GET", path: "/api/runners"}); code != http.StatusOK || json.Unmarshal([]byte(body), &rs) != nil || len(rs) != 1 {
		t.Fatalf("carol lists Runners: %d %s", code, body)
	}
	if rs[0].Owner != "bob" || rs[0].Shared || rs[0].Usable {
		t.Errorf("carol sees bobs-box as %+v, want bob's, not shared, not hers to use", rs[0])
	}
	e.shared(owner, bobs, true)
	if code, body := e.do(bob.Client, req{method: "DELETE", path: "/api/runners/" + bobs.ID, origin: "self"}); code != http.StatusNoContent {
		t.Fatalf("bob removes his own Runner: %d %s", code, body)
	}
}

// TestRemovingAMemberRevokesTheirRunners: their Runners' connections close
// within a second, their tokens are refused, and every Session there,
// theirs or another Member's on a shared one, is Failed saying why.
func TestRemovingAMemberRevokesTheirRunners(t *testing.T) {
	e := newEnv(t)
	owner, bob, carol := e.team()
	bobs := e.pair(bob, "bobs-box")
	carols := e.pair(carol, "carols-box")
	e.shared(owner, bobs, true)
	bs, cs, kept := e.running(bob, bobs), e.running(carol, bobs), e.running(carol, carols)

	if code, body := e.do(owner.Client, req{method: "DELETE", path: "/api/members/" + e.userOf("bob").ID, origin: "self"}); code != http.StatusNoContent {
		t.Fatalf("remove bob: %d %s", code, body)
	}
	closesWithin(t, bobs.conn.Done(), time.Second, "a removed Member's Runner's connection")
	if _, err := e.dialRunner(bobs.Token); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a removed Member's Runner dials again: %v, want 401", err)
	}
	for _, id := range []string{bs.ID, cs.ID} {
		got := e.waitState(id, store.Failed)
		if want := "its Runner's owner was removed from the Hub"; !strings.Contains(got.StateDetail, want) {
			t.Errorf("Session %s on bobs-box failed saying %q, want %q", id, got.StateDetail, want)
		}
	}
	if s, _ := e.store.Sessions.SessionByID(context.Background(), kept.ID); s.State != store.Active {
		t.Errorf("carol's Session on her own Runner is %s, want active", s.State)
	}
	select {
	case <-carols.conn.Done():
		t.Fatal("removing bob closed carol's Runner")
	default:
	}
}
