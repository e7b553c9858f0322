package hub

import (
	"context"
	"crypto/hmac"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/hub/notify"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// post is one request a webhook endpoint received.
type post struct {
	path  string
	at    time.Time
	body  []byte
	sig   string
	kind  string
	id    string
	given int // the status answered
}

// endpoint is a webhook's receiving end: it answers each post with the
// status answer gives (200 when nil) and keeps what it got.
type endpoint struct {
	*httptest.Server
	mu     sync.Mutex
	posts  []post
	got    chan post
	answer func(n int, r *http.Request) int
}

func newEndpoint(t *testing.T, answer func(n int, r *http.Request) int) *endpoint {
	e := &endpoint{got: make(chan post, 100), answer: answer}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		n := len(e.posts)
		code := http.StatusOK
		if e.answer != nil {
			code = e.answer(n, r)
		}
		p := post{path: r.URL.Path, at: time.Now(), body: b, sig: r.Header.Get(notify.SignatureHeader),
			kind: r.Header.Get(notify.KindHeader), id: r.Header.Get(notify.DeliveryHeader), given: code}
		e.posts = append(e.posts, p)
		e.mu.Unlock()
		w.WriteHeader(code)
		e.got <- p
	}))
	t.Cleanup(e.Close)
	return e
}

// next is the next post the endpoint got, failing the test after 5 s.
func (e *endpoint) next(t *testing.T) post {
	t.Helper()
	select {
	case p := <-e.got:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no post came to the webhook in 5 s")
		return post{}
	}
}

// none fails the test if a post comes within d.
func (e *endpoint) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case p := <-e.got:
		t.Fatalf("a post came that should not have: %s %s", p.kind, p.body)
	case <-time.After(d):
	}
}

// loopbackHooks lets the Hub post to the test's endpoints on loopback, as
// HUB_OUTBOUND_ALLOW opens it, and retry after retry.
func loopbackHooks(retry time.Duration) func(*Config) {
	return func(c *Config) { c.Outbound.Allow, c.NotifyRetry = outbound.AllowLoopback, retry }
}

// addWebhook adds a webhook for the CLI token's person through the API.
func (f *fixture) addWebhook(t *testing.T, token, url, format string) api.NotifyWebhookCreated {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/api/account/webhooks", strings.NewReader(`{"url":"`+url+`","format":"`+format+`"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var w api.NotifyWebhookCreated
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil || resp.StatusCode != http.StatusCreated || len(w.Secret) < 32 {
		t.Fatalf("add a webhook: %d %v %+v", resp.StatusCode, err, w)
	}
	return w
}

// sessionOf makes a sleeping Session of the user's on the fixture's Repo.
func (f *fixture) sessionOf(t *testing.T, repoID, userID string) store.Session {
	t.Helper()
	s, err := f.store.Sessions.CreateSession(context.Background(), store.Session{RepoID: repoID, CreatorID: userID, RunnerID: f.runner.ID, Title: "fix the build"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fixture) repo(t *testing.T) api.Repo {
	t.Helper()
	code, body := f.call(t, http.MethodPost, "/api/repos", `{"url":"/srv/app"}`)
	var repo api.Repo
	if code != http.StatusOK || json.Unmarshal([]byte(body), &repo) != nil {
		t.Fatalf("add repo: %d %s", code, body)
	}
	return repo
}

// question is Claude's AskUserQuestion asking q.
func question(q string) protocol.Event {
	in, _ := json.Marshal(map[string]any{"questions": []map[string]any{{"question": q, "options": []map[string]string{{"label": "yes"}, {"label": "no"}}}}})
	return protocol.Event{Kind: protocol.EventQuestion, Tool: "AskUserQuestion", ToolID: "q1", Input: in}
}

// TestAMembersWebhookGetsAQuestionWaitingSignedWithTheSensitiveValueMasked:
// a question Claude asks on a Member's Session reaches their json webhook
// signed with its secret and their Slack webhook as {"text": ...}, the
// Sensitive Variable's value in it masked in both.
func TestAMembersWebhookGetsAQuestionWaitingSignedWithTheSensitiveValueMasked(t *testing.T) {
	f := newFixture(t, loopbackHooks(time.Second))
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	repo := f.repo(t)
	const secret = "hunter2-db-password-77"
	if code, body := f.call(t, http.MethodPut, "/api/repos/"+repo.ID+"/variables/DB_PASSWORD", `{"value":"`+secret+`","sensitive":true}`); code != http.StatusOK {
		t.Fatalf("set the variable: %d %s", code, body)
	}
	ep := newEndpoint(t, nil)
	jsonHook := f.addWebhook(t, f.cli, ep.URL+"/json", "json")
	f.addWebhook(t, f.cli, ep.URL+"/slack", "slack")
	s := f.sessionOf(t, repo.ID, dev.ID)

	if err := f.hub.sessions.Record(ctx, s.ID, question("Shall I log in with "+secret+" to reset the table?")); err != nil {
		t.Fatal(err)
	}
	byPath := map[string]post{}
	for range 2 {
		p := ep.next(t)
		byPath[p.path] = p
	}
	j, sl := byPath["/json"], byPath["/slack"]
	if !hmac.Equal([]byte(j.sig), []byte(notify.Sign(jsonHook.Secret, j.body))) {
		t.Fatalf("the json post's signature %q is not the body's HMAC under the webhook's secret", j.sig)
	}
	var ev notify.Event
	if err := json.Unmarshal(j.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Kind != notify.QuestionWaiting || j.kind != notify.QuestionWaiting || ev.Session.ID != s.ID || !strings.Contains(ev.Text, "reset the table") {
		t.Fatalf("the json post: %s (header %q)", j.body, j.kind)
	}
	var slack struct{ Text string }
	if err := json.Unmarshal(sl.body, &slack); err != nil || !strings.Contains(slack.Text, "reset the table") || !strings.Contains(slack.Text, "Claude asks") {
		t.Fatalf("the slack post: %s", sl.body)
	}
	for _, p := range []post{j, sl} {
		if strings.Contains(string(p.body), secret) || strings.Contains(string(p.body), "hunter2") {
			t.Fatalf("a post carries the Sensitive value: %s", p.body)
		}
	}
	// A Turn's end is told too; what Claude writes meanwhile is not.
	f.hub.sessions.Record(ctx, s.ID, protocol.Event{Kind: protocol.EventText, Text: "working"}, protocol.Event{Kind: protocol.EventTurnEnd, Reason: "done"})
	for range 2 {
		if p := ep.next(t); p.kind != notify.TurnEnded {
			t.Fatalf("after the Turn: %s %s", p.kind, p.body)
		}
	}
	ep.none(t, 200*time.Millisecond)
}

// TestANotificationIsRetriedWithBackoffUntilTheEndpointTakesIt: an
// endpoint answering 500 twice gets the same notification again after the
// first wait and then after twice that; the Account shows it failing
// meanwhile, and not once it took it.
func TestANotificationIsRetriedWithBackoffUntilTheEndpointTakesIt(t *testing.T) {
	const retry = 150 * time.Millisecond
	f := newFixture(t, loopbackHooks(retry))
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	ep := newEndpoint(t, func(n int, _ *http.Request) int {
		if n < 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	f.addWebhook(t, f.cli, ep.URL, "json")
	s := f.sessionOf(t, f.repo(t).ID, dev.ID)
	f.hub.sessions.Record(ctx, s.ID, question("Which table?"))

	first := ep.next(t)
	second := ep.next(t)
	ws, _ := f.store.Notify.NotifyWebhooks(ctx, dev.ID)
	if len(ws) != 1 || ws[0].FailingSince.IsZero() || !strings.Contains(ws[0].LastError, "500") {
		t.Fatalf("while failing, the webhook shows %+v", ws)
	}
	third := ep.next(t)
	if first.id != second.id || second.id != third.id || string(first.body) != string(third.body) {
		t.Fatalf("the retries are not the same notification: %q %q %q", first.id, second.id, third.id)
	}
	// The store keeps when a retry is due to the millisecond, cut short:
	// a retry may come up to one early.
	const stored = time.Millisecond
	if gap := second.at.Sub(first.at); gap < retry-stored {
		t.Errorf("first retry after %v, want at least %v", gap, retry)
	}
	if gap := third.at.Sub(second.at); gap < 2*retry-stored {
		t.Errorf("second retry after %v, want at least %v (doubled)", gap, 2*retry)
	}
	ep.none(t, 3*retry)
	code, body := f.call(t, http.MethodGet, "/api/account/webhooks", "")
	var got []api.NotifyWebhook
	json.Unmarshal([]byte(body), &got)
	if code != http.StatusOK || len(got) != 1 || !got[0].FailingSince.IsZero() || got[0].LastError != "" {
		t.Fatalf("once delivered, the webhook shows %d %s", code, body)
	}
}

// TestAWebhookFailingForADayIsStoppedUntilEdited: a failure a day after
// the first stops the webhook, dropping what waits for it; editing it
// starts it again.
func TestAWebhookFailingForADayIsStoppedUntilEdited(t *testing.T) {
	f := newFixture(t, loopbackHooks(time.Hour))
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	failing := true
	var mu sync.Mutex
	ep := newEndpoint(t, func(int, *http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return http.StatusBadGateway
		}
		return http.StatusOK
	})
	w := f.addWebhook(t, f.cli, ep.URL, "json")
	db, err := sql.Open("sqlite", "file:"+f.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE notify_webhooks SET failing_since = ?, last_error = 'the endpoint answered 502' WHERE id = ?`,
		time.Now().Add(-25*time.Hour).UnixMilli(), w.ID); err != nil {
		t.Fatal(err)
	}
	s := f.sessionOf(t, f.repo(t).ID, dev.ID)
	f.hub.sessions.Record(ctx, s.ID, question("Which table?"))
	ep.next(t)
	var ws []store.NotifyWebhook
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ws, _ = f.store.Notify.NotifyWebhooks(ctx, dev.ID); len(ws) == 1 && !ws[0].StoppedAt.IsZero() {
			break
		}
	}
	if len(ws) != 1 || ws[0].StoppedAt.IsZero() {
		t.Fatalf("a day of failures did not stop the webhook: %+v", ws)
	}
	f.hub.sessions.Record(ctx, s.ID, question("Still there?"))
	ep.none(t, 300*time.Millisecond)

	mu.Lock()
	failing = false
	mu.Unlock()
	if code, body := f.call(t, http.MethodPut, "/api/account/webhooks/"+w.ID, `{"url":"`+ep.URL+`","format":"json"}`); code != http.StatusOK || strings.Contains(body, "stopped_at") {
		t.Fatalf("edit: %d %s", code, body)
	}
	f.hub.sessions.Record(ctx, s.ID, question("And now?"))
	if p := ep.next(t); p.given != http.StatusOK || !strings.Contains(string(p.body), "And now?") {
		t.Fatalf("after the edit: %d %s", p.given, p.body)
	}
}

// TestANotificationPendingAtAHubRestartIsDeliveredOnce: a post under way
// when the Hub closes stays in the store, and the next Hub over it posts
// it, once.
func TestANotificationPendingAtAHubRestartIsDeliveredOnce(t *testing.T) {
	st, cfg := bareStore(t)
	loopbackHooks(time.Hour)(&cfg)
	ctx := context.Background()
	dev, _ := st.Members.DevUser(ctx)
	held := make(chan struct{})
	ep := newEndpoint(t, func(n int, r *http.Request) int {
		if n == 0 { // the first Hub's post: held until it gives up at Close
			close(held)
			<-r.Context().Done()
		}
		return http.StatusOK
	})
	h1, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h1.notify.Add(ctx, dev.ID, ep.URL, notify.FormatJSON); err != nil {
		t.Fatal(err)
	}
	h1.notify.Session(ctx, store.Session{ID: "s-1", CreatorID: dev.ID, Title: "t"}, notify.QuestionWaiting, "Which table?")
	<-held
	h1.Close()
	ep.next(t) // the one the first Hub gave up on

	h2, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if p := ep.next(t); p.given != http.StatusOK || !strings.Contains(string(p.body), "Which table?") {
		t.Fatalf("after the restart: %d %s", p.given, p.body)
	}
	ep.none(t, 300*time.Millisecond)
	if _, pending, _ := st.Notify.NextNotificationDue(ctx); pending {
		t.Fatal("the delivered notification is still pending")
	}
}

// TestAWebhookToAPrivateAddressIsRefused: a URL whose host is in a range
// the outbound guard refuses is refused at once, saying so, and nothing is
// stored.
func TestAWebhookToAPrivateAddressIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://10.1.2.3/hook", "http://169.254.169.254/latest/meta-data", "https://[::1]/hook", "http://[fd00:ec2::254]/"} {
		code, body := f.call(t, http.MethodPost, "/api/account/webhooks", `{"url":"`+u+`","format":"json"}`)
		if code != http.StatusForbidden || !strings.Contains(body, "which no request made on someone's behalf reaches") {
			t.Errorf("%s: %d %s, want the outbound guard's 403", u, code, body)
		}
	}
	for _, bad := range []string{`{"url":"ftp://203.0.113.7/x","format":"json"}`, `{"url":"https://203.0.113.7/x","format":"xml"}`} {
		if code, body := f.call(t, http.MethodPost, "/api/account/webhooks", bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", bad, code, body)
		}
	}
	if ws, _ := f.store.Notify.NotifyWebhooks(ctx, dev.ID); len(ws) != 0 {
		t.Fatalf("refused webhooks were stored: %+v", ws)
	}
}

// TestOnlyTheCreatorsOwnSessionsNotifyThem: another Member's Session, which
// they may watch, tells them nothing; their own does; and another Member
// can't see, edit or remove their webhook.
func TestOnlyTheCreatorsOwnSessionsNotifyThem(t *testing.T) {
	f := newFixture(t, loopbackHooks(time.Second))
	ctx := context.Background()
	alice, aliceCLI := member(t, f, "alice")
	bob, bobCLI := member(t, f, "bob")
	repo := f.repo(t)
	ep := newEndpoint(t, nil)
	w := f.addWebhook(t, aliceCLI, ep.URL, "json")

	bobs := f.sessionOf(t, repo.ID, bob.ID)
	f.hub.sessions.Record(ctx, bobs.ID, question("Bob's question"), protocol.Event{Kind: protocol.EventTurnEnd, Reason: "done"})
	alices := f.sessionOf(t, repo.ID, alice.ID)
	f.hub.sessions.Record(ctx, alices.ID, question("Alice's question"))
	if p := ep.next(t); !strings.Contains(string(p.body), "Alice's question") {
		t.Fatalf("alice's webhook got %s", p.body)
	}
	ep.none(t, 200*time.Millisecond)

	for _, r := range []struct{ method, path, body string }{
		{http.MethodPut, "/api/account/webhooks/" + w.ID, `{"url":"https://203.0.113.9/steal","format":"json"}`},
		{http.MethodDelete, "/api/account/webhooks/" + w.ID, ""},
	} {
		req, _ := http.NewRequest(r.method, f.srv.URL+r.path, strings.NewReader(r.body))
		req.Header.Set("Authorization", "Bearer "+bobCLI)
		resp, _ := http.DefaultClient.Do(req)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob %s alice's webhook: %d, want 404", r.method, resp.StatusCode)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/account/webhooks", nil)
	req.Header.Set("Authorization", "Bearer "+bobCLI)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("bob's list: %d %s", resp.StatusCode, b)
	}
	if ws, _ := f.store.Notify.NotifyWebhooks(ctx, alice.ID); len(ws) != 1 || ws[0].URL != ep.URL {
		t.Fatalf("alice's webhook changed: %+v", ws)
	}
}

// TestASessionFailedForGoodIsToldAndARetriedStartIsNot: a start that
// fails for want of its Runner, which the Hub retries itself, tells the
// webhook nothing; a Session failed because its Runner was removed is
// told, with the reason.
func TestASessionFailedForGoodIsToldAndARetriedStartIsNot(t *testing.T) {
	f := newFixture(t, loopbackHooks(time.Second))
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	repo := f.repo(t)
	ep := newEndpoint(t, nil)
	f.addWebhook(t, f.cli, ep.URL, "json")

	retried, err := f.hub.sessions.Create(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "no runner"},
		store.Prompt{AuthorID: dev.ID, Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s, _ := f.store.Sessions.SessionByID(ctx, retried.ID); s.State == store.Failed && s.Transient {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the start without a Runner is %s (transient %v), want a Failed start to retry", s.State, s.Transient)
		}
	}
	ep.none(t, 300*time.Millisecond)

	gone := f.sessionOf(t, repo.ID, dev.ID)
	f.hub.sessions.RunnerRemoved(ctx, f.runner.ID, "its Runner was removed")
	p := ep.next(t)
	var ev notify.Event
	json.Unmarshal(p.body, &ev)
	if ev.Kind != notify.SessionFailed || ev.Session.ID != gone.ID || !strings.Contains(ev.Text, "Runner was removed") {
		t.Fatalf("the failure's post: %s", p.body)
	}
	ep.none(t, 200*time.Millisecond)
}

// TestALimitReachedIsToldToTheCreator: the limit Event the Hub records
// where a limit holds a Session reaches its Creator's webhook as
// limit_reached, masked as every text is; one a Runner sends is a note,
// and tells nothing.
func TestALimitReachedIsToldToTheCreator(t *testing.T) {
	f := newFixture(t, loopbackHooks(time.Second))
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	repo := f.repo(t)
	f.call(t, http.MethodPut, "/api/repos/"+repo.ID+"/variables/TOKEN", `{"value":"limit-secret-value-9","sensitive":true}`)
	ep := newEndpoint(t, nil)
	f.addWebhook(t, f.cli, ep.URL, "json")
	s := f.sessionOf(t, repo.ID, dev.ID)
	if err := f.hub.sessions.Events(ctx, s, protocol.SessionEvents{SessionID: s.ID, Events: []protocol.Event{{Kind: protocol.EventLimit, Text: "a Runner's own limit"}}}); err != nil {
		t.Fatal(err)
	}
	f.hub.sessions.Record(ctx, s.ID, protocol.Event{Kind: protocol.EventLimit, Text: "Limit reached: 20 Turns (limit-secret-value-9), so it sleeps."})
	p := ep.next(t)
	var ev notify.Event
	json.Unmarshal(p.body, &ev)
	if ev.Kind != notify.LimitReached || p.kind != notify.LimitReached || !strings.Contains(ev.Text, "20 Turns") || strings.Contains(ev.Text, "limit-secret-value-9") {
		t.Fatalf("the limit's post: %s", p.body)
	}
	ep.none(t, 200*time.Millisecond)
}
