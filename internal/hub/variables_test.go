package hub

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

func (f *fixture) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	resp, b := f.send(t, req)
	return resp.StatusCode, string(b)
}

// send sends req with the dev user's CLI token and reads the answer.
func (f *fixture) send(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	req.Header.Set("Authorization", "Bearer "+f.cli)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestSensitiveVariablesAreSealedWriteOnlyAndChecked(t *testing.T) {
	f := newFixture(t)
	code, body := f.call(t, http.MethodPost, "/api/repos", `{"url":"/srv/app"}`)
	var repo api.Repo
	if code != http.StatusOK || json.Unmarshal([]byte(body), &repo) != nil {
		t.Fatalf("add repo: %d %s", code, body)
	}
	base := "/api/repos/" + repo.ID + "/variables/"
	const secret = "postgres://app:hunter2hunter2@db/app"
	tests := []struct {
		name, path, body string
		want             int
	}{
		{"sensitive", base + "DB_URL", `{"value":"` + secret + `","sensitive":true}`, http.StatusOK},
		{"too short to find", base + "PIN", `{"value":"123","sensitive":true}`, http.StatusBadRequest},
		{"bad name", base + "1BAD", `{"value":"x"}`, http.StatusBadRequest},
		{"name with a dash", base + "BAD-NAME", `{"value":"x"}`, http.StatusBadRequest},
		{"oversized", base + "BIG", `{"value":"` + strings.Repeat("x", maxVariableBytes+1) + `"}`, http.StatusRequestEntityTooLarge},
		{"unknown field", base + "X", `{"value":"x","secret":true}`, http.StatusBadRequest},
		{"unknown repo", "/api/repos/nope/variables/X", `{"value":"x"}`, http.StatusNotFound},
	}
	for _, tt := range tests {
		if code, body := f.call(t, http.MethodPut, tt.path, tt.body); code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, code, body, tt.want)
		}
	}
	code, body = f.call(t, http.MethodGet, "/api/repos/"+repo.ID+"/variables", "")
	if code != http.StatusOK || strings.Contains(body, "hunter2") || !strings.Contains(body, `"DB_URL"`) {
		t.Fatalf("list: %d %s", code, body)
	}
	vs, _ := f.store.Variables.List(context.Background(), repo.ID)
	if len(vs) != 1 {
		t.Fatalf("bad requests changed the store: %d variables, want 1", len(vs))
	}
	for _, p := range []string{f.dbPath, f.dbPath + "-wal"} {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "hunter2") {
			t.Fatalf("%s holds the Sensitive value in the clear", p)
		}
	}
}

// TestEventsAreMaskedWithTheSessionsValues: every Event recorded for a
// Session is masked with its set; a value replaced while it runs stays
// masked, and the new one is masked at once.
func TestEventsAreMaskedWithTheSessionsValues(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	f.hub.StoreClaudeToken(ctx, dev.ID, setupToken)
	code, body := f.call(t, http.MethodPost, "/api/repos", `{"url":"/srv/app"}`)
	var repo api.Repo
	json.Unmarshal([]byte(body), &repo)
	f.call(t, http.MethodPut, "/api/repos/"+repo.ID+"/variables/TOKEN", `{"value":"first-value-1","sensitive":true}`)
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
	if err != nil || code != http.StatusOK {
		t.Fatal(err, code)
	}
	record := f.recorder(t, s.ID)
	got := record(protocol.Event{Kind: protocol.EventText, Text: "token first-value-1, setup " + setupToken})
	if strings.Contains(got.Text, "first-value-1") || strings.Contains(got.Text, setupToken) {
		t.Fatalf("text not masked: %q", got.Text)
	}
	got = record(protocol.Event{Kind: protocol.EventToolUse, Tool: "Bash", Input: json.RawMessage(`{"command":"curl -H 'X: first-value-1' x"}`)})
	if strings.Contains(string(got.Input), "first-value-1") || !json.Valid(got.Input) {
		t.Fatalf("input not masked, or no longer JSON: %s", got.Input)
	}
	// Replaced while the Session runs: both stay masked.
	f.call(t, http.MethodPut, "/api/repos/"+repo.ID+"/variables/TOKEN", `{"value":"second-value-2","sensitive":true}`)
	got = record(protocol.Event{Kind: protocol.EventText, Text: "old first-value-1 new second-value-2"})
	if strings.Contains(got.Text, "first-value-1") || strings.Contains(got.Text, "second-value-2") {
		t.Fatalf("after a replacement: %q", got.Text)
	}
	// By shape as well, in what the Hub says itself.
	got = record(protocol.Event{Kind: protocol.EventError, Text: "clone failed: https://bot:ghp_0123456789abcdefghijABCDEFGHIJ012345@github.com/x"})
	if strings.Contains(got.Text, "ghp_0123456789") {
		t.Fatalf("an error Event kept a credential's shape: %q", got.Text)
	}
	// Every text field by value, and kndl's own tokens (an env listing
	// shows the Session token) by shape in every Event.
	sessionToken, _ := auth.NewToken(auth.Session)
	got = record(protocol.Event{Kind: protocol.EventToolResult, Text: "KNDL_MOD_TOKEN=" + sessionToken + "\nHOME=/root",
		Tool: "first-value-1", ToolID: "first-value-1", Agent: "first-value-1", Parent: "first-value-1", Reason: "first-value-1"})
	if b, _ := json.Marshal(got); strings.Contains(string(b), "first-value-1") || strings.Contains(string(b), sessionToken) || !strings.Contains(got.Text, "HOME=/root") {
		t.Fatalf("a field kept a value, or the Session token showed: %s", b)
	}
}

// TestEventsAreMaskedByShape: a credential nobody registered, with a mark
// of its own (a Slack or GitHub token a file Claude reads holds), is masked
// in every Event, and says which rule masked it; an assignment to a
// credential-named variable is masked in what the Hub says itself, and in
// every Event only with HUB_REDACT_SHAPES=all.
func TestEventsAreMaskedByShape(t *testing.T) {
	slack := "xoxb-" + randomDigits(12) + "-" + randomDigits(13) + "-" + randomAlnum(24)
	github := "ghp_" + randomAlnum(36)
	// A fixed value: gitleaks' generic rule lets a value through that holds
	// one of its stopwords or no digit, which 1.2% of random ones did.
	assignment := `API_SECRET="Q7vZp2Lx9Rk4Wt8Nb3Hj6Yc1Fm5Gd0S"`
	output := "SLACK_BOT=" + slack + "\nGH=" + github + "\n" + assignment + "\nHOME=/root"
	for _, all := range []bool{false, true} {
		f := newFixture(t, func(c *Config) { c.RedactAllShapes = all })
		ctx := context.Background()
		dev, _ := f.store.Members.DevUser(ctx)
		_, body := f.call(t, http.MethodPost, "/api/repos", `{"url":"/srv/app"}`)
		var repo api.Repo
		json.Unmarshal([]byte(body), &repo)
		s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		record := f.recorder(t, s.ID)
		for _, kind := range []string{protocol.EventToolResult, protocol.EventText, protocol.EventError} {
			got := record(protocol.Event{Kind: kind, Text: output})
			if strings.Contains(got.Text, slack) || strings.Contains(got.Text, github) ||
				!strings.Contains(got.Text, "[masked: slack-bot-token]") || !strings.Contains(got.Text, "[masked: github-pat]") {
				t.Errorf("all=%v, %s: a marked credential showed, or its mark is missing: %q", all, kind, got.Text)
			}
			if wantMasked := all || kind == protocol.EventError; strings.Contains(got.Text, assignment) == wantMasked {
				t.Errorf("all=%v, %s: the assignment masked %v, want %v: %q", all, kind, !wantMasked, wantMasked, got.Text)
			}
			if !strings.Contains(got.Text, "HOME=/root") {
				t.Errorf("all=%v, %s: ordinary text went too: %q", all, kind, got.Text)
			}
		}
		got := record(protocol.Event{Kind: protocol.EventToolUse, Tool: "Bash", Input: json.RawMessage(`{"command":"echo ` + slack + `"}`)})
		if strings.Contains(string(got.Input), slack) || !json.Valid(got.Input) {
			t.Errorf("all=%v: tool input kept the token, or is no longer JSON: %s", all, got.Input)
		}
	}
}

// recorder returns a function that records an Event of the Session as its
// Runner would and returns it as stored.
func (f *fixture) recorder(t *testing.T, sessionID string) func(protocol.Event) protocol.Event {
	return func(ev protocol.Event) protocol.Event {
		ctx := context.Background()
		if err := f.hub.sessions.Record(ctx, sessionID, ev); err != nil {
			t.Fatal(err)
		}
		evs, _ := f.store.Sessions.Events(ctx, sessionID, 0, 1000)
		var got protocol.Event
		json.Unmarshal(evs[len(evs)-1].Data, &got)
		return got
	}
}

func randomDigits(n int) string { return randomFrom("0123456789", n) }
func randomAlnum(n int) string {
	return randomFrom("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", n)
}

func randomFrom(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

// TestAReplacedValueStaysMaskedAcrossAHubRestart: a Session that started
// with a Sensitive value goes on masking it once it is replaced, after
// the Hub restarts too; the value is kept only sealed, and dropped when
// the Session stops.
func TestAReplacedValueStaysMaskedAcrossAHubRestart(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	_, body := f.call(t, http.MethodPost, "/api/repos", `{"url":"/srv/app"}`)
	var repo api.Repo
	json.Unmarshal([]byte(body), &repo)
	f.call(t, http.MethodPut, "/api/repos/"+repo.ID+"/variables/TOKEN", `{"value":"started-with-1","sensitive":true}`)
	s, _ := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
	f.store.Sessions.MoveSession(ctx, s.ID, store.Starting, store.Active, "", false)
	f.call(t, http.MethodPut, "/api/repos/"+repo.ID+"/variables/TOKEN", `{"value":"replaced-by-2","sensitive":true}`)
	if f.storedInTheClear(t, "started-with-1") {
		t.Fatal("the replaced value is in the store in the clear")
	}

	f.hub.Close()
	h, err := New(f.hub.cfg, f.store)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.sessions.Record(ctx, s.ID, protocol.Event{Kind: protocol.EventText, Text: "old started-with-1 new replaced-by-2"}); err != nil {
		t.Fatal(err)
	}
	evs, _ := f.store.Sessions.Events(ctx, s.ID, 0, 1000)
	if got := string(evs[len(evs)-1].Data); strings.Contains(got, "started-with-1") || strings.Contains(got, "replaced-by-2") {
		t.Fatalf("after the restart: %s", got)
	}
	effects{h}.Stopped(s.ID)
	if kept, _ := f.store.Variables.SessionMasks(ctx, s.ID); len(kept) != 0 {
		t.Fatalf("%d masks kept after the Session stopped", len(kept))
	}
}

// storedInTheClear reports whether the store's files hold s.
func (f *fixture) storedInTheClear(t *testing.T, s string) bool {
	t.Helper()
	for _, p := range []string{f.dbPath, f.dbPath + "-wal"} {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

// TestASessionTakesItsPullRequestsTitleMaskedAndCut: the title of a pull
// request becomes the Session's title with its Sensitive values masked, on
// one line, cut to maxTitle bytes on a character's boundary; once a person
// renames the Session, a pull request's title no longer does.
func TestASessionTakesItsPullRequestsTitleMaskedAndCut(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	code, body := f.call(t, http.MethodPost, "/api/repos", `{"url":"/srv/app"}`)
	var repo api.Repo
	if code != http.StatusOK || json.Unmarshal([]byte(body), &repo) != nil {
		t.Fatalf("add repo: %d %s", code, body)
	}
	const secret = "pr-title-secret-42"
	f.call(t, http.MethodPut, "/api/repos/"+repo.ID+"/variables/TOKEN", `{"value":"`+secret+`","sensitive":true}`)
	dev, _ := f.store.Members.DevUser(ctx)
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "from the prompt"})
	if err != nil {
		t.Fatal(err)
	}
	title := func() string {
		got, _ := f.store.Sessions.SessionByID(ctx, s.ID)
		return got.Title
	}
	newSessionsAPI(f.hub).titleFromPull(ctx, s.ID, "Rotate "+secret+"\nnow")
	if got := title(); got != "Rotate "+strings.Repeat("*", len(secret))+" now" {
		t.Fatalf("title %q, want the pull request's, masked, on one line", got)
	}
	newSessionsAPI(f.hub).titleFromPull(ctx, s.ID, strings.Repeat("é", maxTitle))
	if got := title(); len(got) > maxTitle || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("a long title became %q (%d bytes), want it cut to %d on a character's boundary", got, len(got), maxTitle)
	}
	if code, body := f.call(t, http.MethodPatch, "/api/sessions/"+s.ID, `{"title":"Named by hand"}`); code != http.StatusOK {
		t.Fatalf("rename: %d %s", code, body)
	}
	newSessionsAPI(f.hub).titleFromPull(ctx, s.ID, "Another pull request")
	if got := title(); got != "Named by hand" {
		t.Fatalf("title %q after a rename, want the person's kept", got)
	}
}
