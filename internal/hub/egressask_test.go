package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/hub/notify"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testkit"
)

// egressFixture is acme/app under an allowlist of npm, with bob and olivia
// pushing, rita reading and nora outside, and rita's Session, whose
// Runner noted registry.example.com refused.
type egressFixture struct {
	*fixture
	repo                                store.Repo
	session                             store.Session
	bobTok, ritaTok, noraTok, oliviaTok string
	bob, rita                           store.User
}

const refusedHost = "registry.example.com"

func newEgressFixture(t *testing.T) egressFixture {
	gh := testkit.NewGitHub(t)
	f := newFixture(t, withGitHub(gh, time.Minute), loopbackHooks(time.Second))
	ctx := context.Background()
	_, oliviaTok := member(t, f, "olivia")
	bob, bobTok := member(t, f, "bob")
	rita, ritaTok := member(t, f, "rita")
	_, noraTok := member(t, f, "nora")
	gh.InstallApp("acme/app")
	for _, login := range []string{"olivia", "bob", "rita"} {
		gh.SetCollaborator("acme/app", login, true)
	}
	gh.SetReadOnly("acme/app", "rita", true)
	repo, _ := f.store.Repos.EnsureRepo(ctx, gh.RepoURL("acme/app"), "acme/app")
	allowlist := environment.Config{Egress: egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"npm"}}}
	if _, err := f.hub.envs.Edit(ctx, repo.ID, allowlist, bob.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.hub.envs.Apply(ctx, repo.ID, bob.ID); err != nil {
		t.Fatal(err)
	}
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: rita.ID, RunnerID: f.runner.ID, Title: "add the client"})
	if err != nil {
		t.Fatal(err)
	}
	// As the Runner notes a refusal; a Requested it sends is not its to set.
	blocked := protocol.Event{Kind: protocol.EventNote, Text: "blocked: " + refusedHost + ":443 (off the list)", Blocked: refusedHost, Requested: refusedHost}
	if err := f.hub.sessions.Events(ctx, s, protocol.SessionEvents{SessionID: s.ID, Events: []protocol.Event{blocked}}); err != nil {
		t.Fatal(err)
	}
	return egressFixture{fixture: f, repo: repo, session: s, bobTok: bobTok, ritaTok: ritaTok, noraTok: noraTok, oliviaTok: oliviaTok, bob: bob, rita: rita}
}

// allowlist is the Repo's current version and its list.
func (f egressFixture) allowlist(t *testing.T) (int, []string) {
	t.Helper()
	v, err := f.hub.envs.Show(context.Background(), f.repo.ID)
	if err != nil {
		t.Fatal(err)
	}
	return v.Current.Version, v.Current.Settings.Egress.Allow
}

// refusal is one caller's ask for a host that path must refuse, with the
// status and the words it answers.
type refusal struct {
	who, token, host string
	status           int
	says             string
}

// refuses posts each refusal's host to path as its caller and checks the
// answer.
func (f *egressFixture) refuses(t *testing.T, path string, rs []refusal) {
	t.Helper()
	for _, r := range rs {
		if status, text := postAs(t, f.fixture, r.token, path, api.EgressHost{Host: r.host}); status != r.status || !strings.Contains(text, r.says) {
			t.Errorf("%s: %d %q, want %d saying %q", r.who, status, text, r.status, r.says)
		}
	}
}

// TestOnlyAMemberWithPushAllowsAHostTheSessionWasRefused: Allow in the
// Session view adds a host to the Repo's allowlist for a Member with push
// alone, and only a host that Session's history shows refused, one exact
// name; every refusal leaves the Environment as it was.
func TestOnlyAMemberWithPushAllowsAHostTheSessionWasRefused(t *testing.T) {
	f := newEgressFixture(t)
	path := "/api/sessions/" + f.session.ID + "/egress/allow"
	f.refuses(t, path, []refusal{
		{"the Creator without push", f.ritaTok, refusedHost, http.StatusForbidden, "takes write (push) permission"},
		{"someone without access", f.noraTok, refusedHost, http.StatusNotFound, "session"},
		{"a host not refused in this Session", f.bobTok, "other.example.com", http.StatusBadRequest, "was not refused other.example.com"},
		{"a host that is no host name", f.bobTok, "Registry.Example.com:443", http.StatusBadRequest, "is not a host name"},
		{"a wildcard", f.bobTok, "*.example.com", http.StatusBadRequest, "is not a host name"},
		{"a preset", f.bobTok, "pypi", http.StatusBadRequest, "is not a host name"},
	})
	if v, list := f.allowlist(t); v != 1 || strings.Join(list, ",") != "npm" {
		t.Fatalf("after the refusals the Environment is version %d allowing %v, want version 1 allowing npm alone", v, list)
	}

	status, raw := askAs(t, f.fixture, f.bobTok, http.MethodPost, path, api.EgressHost{Host: refusedHost})
	var applied api.EnvironmentVersion
	if status != http.StatusOK || json.Unmarshal(raw, &applied) != nil || applied.Version != 2 {
		t.Fatalf("a Member with push allows %s: %d %s, want version 2", refusedHost, status, raw)
	}
	if v, list := f.allowlist(t); v != 2 || strings.Join(list, ",") != "npm,"+refusedHost {
		t.Fatalf("after Allow the Environment is version %d allowing %v, want version 2 allowing npm and %s", v, list, refusedHost)
	}
	if status, text := postAs(t, f.fixture, f.oliviaTok, path, api.EgressHost{Host: refusedHost}); status != http.StatusConflict || !strings.Contains(text, "already") {
		t.Errorf("allowing it again: %d %q, want 409 saying it is on the list already", status, text)
	}
}

// TestAllowAppliesNoOnesDraft: with a draft waiting, Allow refuses rather
// than apply the draft's changes with the host, and leaves the draft.
func TestAllowAppliesNoOnesDraft(t *testing.T) {
	f := newEgressFixture(t)
	ctx := context.Background()
	draft := environment.Config{CPUs: 2, Egress: egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"npm"}}}
	if _, err := f.hub.envs.Edit(ctx, f.repo.ID, draft, f.bob.ID); err != nil {
		t.Fatal(err)
	}
	status, text := postAs(t, f.fixture, f.bobTok, "/api/sessions/"+f.session.ID+"/egress/allow", api.EgressHost{Host: refusedHost})
	if status != http.StatusConflict || !strings.Contains(text, "has a draft") {
		t.Fatalf("Allow with a draft waiting: %d %q, want 409 naming the draft", status, text)
	}
	v, _ := f.hub.envs.Show(ctx, f.repo.ID)
	if v.Current.Version != 1 || v.Draft == nil || v.Draft.Settings.CPUs != 2 {
		t.Fatalf("after the refusal: version %d, draft %+v, want version 1 and the draft as it was", v.Current.Version, v.Draft)
	}
}

// TestACreatorWithoutPushRequestsAHostOnceAndTheMembersWithPushAreTold:
// Request is the Creator's who has no push; it goes to the webhooks of the
// Repo's Members with push as egress_requested, once per host per
// Session, and is noted in its history.
func TestACreatorWithoutPushRequestsAHostOnceAndTheMembersWithPushAreTold(t *testing.T) {
	f := newEgressFixture(t)
	ctx := context.Background()
	pushers, others := newEndpoint(t, nil), newEndpoint(t, nil)
	f.addWebhook(t, f.bobTok, pushers.URL+"/bob", "json")
	f.addWebhook(t, f.oliviaTok, pushers.URL+"/olivia", "slack")
	f.addWebhook(t, f.ritaTok, others.URL+"/rita", "json")
	f.addWebhook(t, f.noraTok, others.URL+"/nora", "json")
	path := "/api/sessions/" + f.session.ID + "/egress/request"
	f.refuses(t, path, []refusal{
		{"a Member with push, not the Creator", f.bobTok, refusedHost, http.StatusForbidden, "only the Session's Creator"},
		{"someone without access", f.noraTok, refusedHost, http.StatusNotFound, "session"},
		{"a host not refused in this Session", f.ritaTok, "other.example.com", http.StatusBadRequest, "was not refused other.example.com"},
		{"a host that is no host name", f.ritaTok, "-x-", http.StatusBadRequest, "is not a host name"},
	})
	if _, err := f.store.Sessions.NoteWith(ctx, f.session.ID, "requested", refusedHost); err == nil {
		t.Fatal("the Runner's event set Requested, or a refused Request was noted")
	}

	status, raw := askAs(t, f.fixture, f.ritaTok, http.MethodPost, path, api.EgressHost{Host: refusedHost})
	// Bob, Olivia and the fixture's dev user, who pushes everywhere.
	var asked api.EgressAsked
	if status != http.StatusOK || json.Unmarshal(raw, &asked) != nil || asked.Asked != 3 {
		t.Fatalf("the Creator's Request: %d %s, want 200 asking 3 Members", status, raw)
	}
	byPath := map[string]post{}
	for range 2 {
		p := pushers.next(t)
		byPath[p.path] = p
	}
	var ev notify.Event
	j := byPath["/bob"]
	if err := json.Unmarshal(j.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Kind != notify.EgressRequested || j.kind != notify.EgressRequested || ev.Session.ID != f.session.ID || ev.Session.Repo != f.repo.URL ||
		!strings.Contains(ev.Text, "Rita asks to allow "+refusedHost) || !strings.HasSuffix(ev.Session.URL, "/sessions/"+f.session.ID) {
		t.Errorf("bob's post: %s (header %q), want egress_requested naming the Session, Rita and %s", j.body, j.kind, refusedHost)
	}
	var slack struct{ Text string }
	if json.Unmarshal(byPath["/olivia"].body, &slack); !strings.Contains(slack.Text, "Asked to allow a host") || !strings.Contains(slack.Text, refusedHost) {
		t.Errorf("olivia's Slack post: %s", byPath["/olivia"].body)
	}
	if _, err := f.store.Sessions.NoteWith(ctx, f.session.ID, "requested", refusedHost); err != nil {
		t.Errorf("the Request is not noted in the Session's history: %v", err)
	}

	if status, text := postAs(t, f.fixture, f.ritaTok, path, api.EgressHost{Host: refusedHost}); status != http.StatusConflict || !strings.Contains(text, "asked for in this Session already") {
		t.Errorf("a second Request for the host: %d %q, want 409", status, text)
	}
	pushers.none(t, 200*time.Millisecond)
	others.none(t, 0)
}

// TestARefusedHostCarryingASensitiveValueIsNotOffered: a Runner's note of
// a name that carries a Sensitive value (a Sandbox can look one up to send
// it out) keeps no host to allow, and the value is stored nowhere.
func TestARefusedHostCarryingASensitiveValueIsNotOffered(t *testing.T) {
	f := newEgressFixture(t)
	ctx := context.Background()
	const secret = "hunter2dbpassword77"
	if code, body := f.call(t, http.MethodPut, "/api/repos/"+f.repo.ID+"/variables/DB_PASSWORD", `{"value":"`+secret+`","sensitive":true}`); code != http.StatusOK {
		t.Fatalf("set the variable: %d %s", code, body)
	}
	host := secret + ".evil.example"
	blocked := protocol.Event{Kind: protocol.EventNote, Text: "blocked: " + host + " (off the list)", Blocked: host}
	if err := f.hub.sessions.Events(ctx, f.session, protocol.SessionEvents{SessionID: f.session.ID, Events: []protocol.Event{blocked}}); err != nil {
		t.Fatal(err)
	}
	evs, _ := f.store.Sessions.Events(ctx, f.session.ID, 0, 1000)
	if got := string(evs[len(evs)-1].Data); strings.Contains(got, secret) || strings.Contains(got, `"blocked"`) {
		t.Fatalf("the note as stored: %s, want the value masked and no host to allow", got)
	}
	if status, text := postAs(t, f.fixture, f.bobTok, "/api/sessions/"+f.session.ID+"/egress/allow", api.EgressHost{Host: host}); status != http.StatusBadRequest {
		t.Fatalf("Allow of the host carrying the value: %d %q, want 400", status, text)
	}
}

// TestRequestsAtOnceForOneHostAskOnce: the Creator's tabs asking for the
// same host at once get one Request through; the rest are refused as
// asked already.
func TestRequestsAtOnceForOneHostAskOnce(t *testing.T) {
	f := newEgressFixture(t)
	const tries = 8
	codes := make(chan int, tries)
	var wg sync.WaitGroup
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _ := askAs(t, f.fixture, f.ritaTok, http.MethodPost, "/api/sessions/"+f.session.ID+"/egress/request", api.EgressHost{Host: refusedHost})
			codes <- status
		}()
	}
	wg.Wait()
	close(codes)
	byCode := map[int]int{}
	for c := range codes {
		byCode[c]++
	}
	if byCode[http.StatusOK] != 1 || byCode[http.StatusConflict] != tries-1 {
		t.Fatalf("%d Requests at once answered %v, want one 200 and the rest 409", tries, byCode)
	}
}
