package apiclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/protocol"
)

// recorder is a Hub that answers every call with JSON null (which decodes
// into any answer) and records each as "METHOD URI BODY".
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	line := r.Method + " " + r.RequestURI
	if len(b) > 0 {
		line += " " + strings.TrimSpace(string(b))
	}
	rec.mu.Lock()
	rec.calls = append(rec.calls, line)
	rec.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer kndlc_token" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Write([]byte("null"))
}

func (rec *recorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	calls := rec.calls
	rec.calls = nil
	return calls
}

// TestEachCallSendsItsRequestToItsRoute: every typed call goes out as the
// method, path (each id escaped into one segment) and body the Hub's route
// takes, with the CLI token.
func TestEachCallSendsItsRequestToItsRoute(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Token: "kndlc_token", HTTP: srv.Client()}
	ctx := context.Background()
	ignore := func(_ any, err error) error { return err }
	title := "t"
	tests := []struct {
		call func() error
		want string
	}{
		{func() error {
			return ignore(c.NewSession(ctx, api.NewSession{Repo: "r", Prompt: "hi"}))
		}, `POST /api/sessions {"repo":"r","prompt":"hi"}`},
		{func() error {
			return ignore(c.NewAttempts(ctx, api.NewAttempts{NewSession: api.NewSession{Repo: "r", Prompt: "hi"}, Attempts: 3}))
		}, `POST /api/attempts {"repo":"r","prompt":"hi","attempts":3}`},
		{func() error { return ignore(c.Attempts(ctx, "a/b")) }, "GET /api/attempts/a%2Fb"},
		{func() error {
			return ignore(c.KeepAttempt(ctx, "a1", api.KeepAttempt{SessionID: "s1", Others: "sleep"}))
		}, `POST /api/attempts/a1/keep {"session_id":"s1","others":"sleep"}`},
		{func() error { return ignore(c.Sessions(ctx, api.SessionFilter{})) }, "GET /api/sessions"},
		{func() error {
			return ignore(c.Sessions(ctx, api.SessionFilter{Mine: true, States: []api.SessionState{api.Active, api.Asleep}, Search: "a b"}))
		}, "GET /api/sessions?mine=true&search=a+b&state=active%2Casleep"},
		{func() error { return ignore(c.Session(ctx, "s1")) }, "GET /api/sessions/s1"},
		{func() error { return ignore(c.Session(ctx, "a/b c")) }, "GET /api/sessions/a%2Fb%20c"},
		{func() error { return ignore(c.Events(ctx, "s1")) }, "GET /api/sessions/s1/events"},
		{func() error {
			return ignore(c.UpdateSession(ctx, "s1", api.SessionUpdate{Title: &title}))
		}, `PATCH /api/sessions/s1 {"title":"t"}`},
		{func() error { return c.Act(ctx, "s1", apiclient.StopTurn) }, "POST /api/sessions/s1/stop-turn"},
		{func() error { return c.Act(ctx, "s1", apiclient.Sleep) }, "POST /api/sessions/s1/sleep"},
		{func() error { return c.Act(ctx, "s1", apiclient.Wake) }, "POST /api/sessions/s1/wake"},
		{func() error { return c.Act(ctx, "s1", apiclient.Restart) }, "POST /api/sessions/s1/restart"},
		{func() error { return c.Act(ctx, "s1", apiclient.Archive) }, "POST /api/sessions/s1/archive"},
		{func() error { return c.Act(ctx, "s1", apiclient.Restore) }, "POST /api/sessions/s1/restore"},
		{func() error { return c.KeepAwake(ctx, "s1", false) }, `PUT /api/sessions/s1/keep-awake {"on":false}`},
		{func() error {
			return ignore(c.QueuePrompt(ctx, "s1", api.PromptRequest{Text: "go", Attachments: []string{"a1"}}))
		}, `POST /api/sessions/s1/prompts {"text":"go","attachments":["a1"]}`},
		{func() error {
			return c.EditPrompt(ctx, "s1", "p1", api.PromptRequest{Text: "new"})
		}, `PATCH /api/sessions/s1/prompts/p1 {"text":"new"}`},
		{func() error {
			return c.MovePrompt(ctx, "s1", "p1", api.PromptMove{Position: 2})
		}, `POST /api/sessions/s1/prompts/p1/move {"position":2}`},
		{func() error { return c.CancelPrompt(ctx, "s1", "p1") }, "DELETE /api/sessions/s1/prompts/p1"},
		{func() error {
			return c.Answer(ctx, "s1", api.Answer{Answers: []api.Choice{{Option: 1}}})
		}, `POST /api/sessions/s1/answer {"answers":[{"option":1}]}`},
		{func() error { return c.StopSubagent(ctx, "s1", "a1") }, "POST /api/sessions/s1/subagents/a1/stop"},
		{func() error {
			return ignore(c.Attach(ctx, "s1", "my notes.txt", strings.NewReader("hello"), 5))
		}, "POST /api/sessions/s1/attachments?name=my+notes.txt hello"},
		{func() error { return ignore(c.Attachments(ctx, "s1")) }, "GET /api/sessions/s1/attachments"},
		{func() error {
			return c.DownloadAttachment(ctx, "s1", "at1", io.Discard)
		}, "GET /api/sessions/s1/attachments/at1"},
		{func() error { return c.SetClaudeToken(ctx, "sk-x") }, `PUT /api/account/claude-token {"token":"sk-x"}`},
		{func() error { return ignore(c.AddRepo(ctx, "https://github.com/o/r")) }, `POST /api/repos {"url":"https://github.com/o/r"}`},
		{func() error { return ignore(c.SharedVariables(ctx)) }, "GET /api/variables"},
		{func() error { return ignore(c.RepoVariables(ctx, "r1")) }, "GET /api/repos/r1/variables"},
		{func() error {
			return ignore(c.SetVariable(ctx, "r1", "K", api.VariableRequest{Value: "v"}))
		}, `PUT /api/repos/r1/variables/K {"value":"v","sensitive":false,"at_build":false}`},
		{func() error {
			return ignore(c.SetVariable(ctx, "", "K", api.VariableRequest{Value: "v", Sensitive: true}))
		}, `PUT /api/variables/K {"value":"v","sensitive":true,"at_build":false}`},
		{func() error { return c.DeleteVariable(ctx, "r1", "K") }, "DELETE /api/repos/r1/variables/K"},
		{func() error { return c.DeleteVariable(ctx, "", "K") }, "DELETE /api/variables/K"},
		{func() error { return c.LinkVariable(ctx, "r1", "K") }, "PUT /api/repos/r1/links/K"},
		{func() error { return c.UnlinkVariable(ctx, "r1", "K") }, "DELETE /api/repos/r1/links/K"},
		{func() error { return ignore(c.Environment(ctx, "r1")) }, "GET /api/repos/r1/environment"},
		{func() error {
			return ignore(c.EditEnvironment(ctx, "r1", api.EnvironmentSettings{Image: "i"}))
		}, `PUT /api/repos/r1/environment/draft {"image":"i"}`},
		{func() error { return ignore(c.EnvironmentFromDevcontainer(ctx, "r1", api.FromDevcontainer{})) }, `POST /api/repos/r1/environment/draft/devcontainer {}`},
		{func() error { return ignore(c.TestEnvironment(ctx, "r1")) }, "POST /api/repos/r1/environment/tests"},
		{func() error { return ignore(c.TestBuild(ctx, "r1", "t1")) }, "GET /api/repos/r1/environment/tests/t1"},
		{func() error { return ignore(c.ApplyEnvironment(ctx, "r1")) }, "POST /api/repos/r1/environment/apply"},
		{func() error { return ignore(c.EnvironmentLog(ctx, "r1")) }, "GET /api/repos/r1/environment/log"},
		{func() error {
			return ignore(c.AddMCPServer(ctx, api.MCPServer{ID: "hub:x", Name: "X", URL: "https://x", Auth: "none"}))
		}, `POST /api/mcp/servers {"id":"hub:x","name":"X","url":"https://x","auth":"none","headers":null}`},
		{func() error {
			return ignore(c.EditMCPServer(ctx, api.MCPServer{ID: "hub:x"}, true))
		}, `PUT /api/mcp/servers/hub:x?dry_run=1 {"id":"hub:x","name":"","url":"","auth":"","headers":null}`},
		{func() error {
			return ignore(c.EditMCPServer(ctx, api.MCPServer{ID: "hub:x"}, false))
		}, `PUT /api/mcp/servers/hub:x {"id":"hub:x","name":"","url":"","auth":"","headers":null}`},
		{func() error { return ignore(c.MCPServers(ctx)) }, "GET /api/mcp/servers"},
		{func() error {
			return ignore(c.Install(ctx, api.InstallationRequest{ID: "i1", Server: "hub:x", Name: "X", Global: true}))
		}, `POST /api/mcp/installations {"id":"i1","server":"hub:x","name":"X","global":true}`},
		{func() error { return ignore(c.Installations(ctx, "")) }, "GET /api/mcp/installations"},
		{func() error { return ignore(c.Installations(ctx, "r1")) }, "GET /api/mcp/installations?repo=r1"},
		{func() error {
			return ignore(c.SetInstallationRepos(ctx, "i1", []string{"r1"}))
		}, `PUT /api/mcp/installations/i1/repos {"repos":["r1"]}`},
		{func() error {
			return ignore(c.SetInstallationSecret(ctx, "i1", "api-key", "v"))
		}, `PUT /api/mcp/installations/i1/secrets/api-key {"value":"v"}`},
		{func() error { return ignore(c.ConnectInstallation(ctx, "i1")) }, "POST /api/mcp/installations/i1/connect"},
		{func() error { return c.DisconnectInstallation(ctx, "i1") }, "DELETE /api/mcp/installations/i1/connect"},
		{func() error {
			return ignore(c.SetInstallationClient(ctx, "i1", api.OAuthClient{ClientID: "c", ClientSecret: "s"}))
		}, `PUT /api/mcp/installations/i1/client {"client_id":"c","client_secret":"s"}`},
		{func() error { return ignore(c.TurnInstallation(ctx, "r1", "i1", true)) }, "PUT /api/repos/r1/mcp/i1/off"},
		{func() error { return ignore(c.TurnInstallation(ctx, "r1", "i1", false)) }, "DELETE /api/repos/r1/mcp/i1/off"},
		{func() error { return ignore(c.InstallationLog(ctx, "r1")) }, "GET /api/repos/r1/mcp/log"},
		{func() error { return ignore(c.Members(ctx)) }, "GET /api/members"},
		{func() error { return c.RemoveMember(ctx, "u1") }, "DELETE /api/members/u1"},
		{func() error {
			return ignore(c.Invite(ctx, api.InviteRequest{GitHubLogin: "octo", ExpiresInHours: 2}))
		}, `POST /api/invites {"github_login":"octo","expires_in_hours":2}`},
		{func() error { return ignore(c.Invites(ctx)) }, "GET /api/invites"},
		{func() error { return c.RevokeInvite(ctx, "inv1") }, "DELETE /api/invites/inv1"},
		{func() error { return ignore(c.Runners(ctx)) }, "GET /api/runners"},
		{func() error { return ignore(c.Account(ctx)) }, "GET /api/account"},
		{func() error { return ignore(c.PairRunner(ctx, "box")) }, `POST /api/runners {"name":"box"}`},
		{func() error { return c.RevokeRunner(ctx, "rn1") }, "DELETE /api/runners/rn1"},
		{func() error { return c.ShareRunner(ctx, "rn1", true) }, `PUT /api/runners/rn1/shared {"shared":true}`},
		{func() error { return ignore(c.Audit(ctx, 0, 50)) }, "GET /api/audit?limit=50"},
		{func() error { return ignore(c.Audit(ctx, 7, 10)) }, "GET /api/audit?before=7&limit=10"},
		{func() error { return ignore(c.VerifyAudit(ctx)) }, "GET /api/audit/verify"},
	}
	for _, tt := range tests {
		if err := tt.call(); err != nil {
			t.Errorf("%s: %v", tt.want, err)
		}
		if got := rec.take(); len(got) != 1 || got[0] != tt.want {
			t.Errorf("sent %q, want %q", got, tt.want)
		}
	}
}

// TestARefusalIsTheHubsSentence: an answer the Hub refuses is its message,
// with the way out when the CLI token is not taken.
func TestARefusalIsTheHubsSentence(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer kndlc_token" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"message":"This CLI token is revoked."}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"message":"There is no such Session."}`))
	}))
	defer srv.Close()
	tests := []struct {
		token  string
		status int
		want   string
	}{
		{"kndlc_token", http.StatusNotFound, "There is no such Session."},
		{"kndlc_old", http.StatusUnauthorized, "This CLI token is revoked. (sign in again with kndl login)"},
	}
	for _, tt := range tests {
		c := &apiclient.Client{BaseURL: srv.URL, Token: tt.token, HTTP: srv.Client()}
		_, err := c.Session(context.Background(), "s1")
		var apiErr *apiclient.Error
		if !errors.As(err, &apiErr) || apiErr.Status != tt.status || err.Error() != tt.want {
			t.Errorf("token %s: got %v, want %d %q", tt.token, err, tt.status, tt.want)
		}
	}
}

// TestWatchFollowsEventsAndARefusedOneSaysWhy: a watch reads the Events
// the Hub sends after the sequence number asked for; a watch the Hub
// refuses is the API's sentence for why, not the socket's bare status.
func TestWatchFollowsEventsAndARefusedOneSaysWhy(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/sessions/s1/watch", func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		var b bytes.Buffer
		json.NewEncoder(&b).Encode(api.LiveMessage{Type: "event", Event: &api.Event{Seq: 8, Kind: protocol.EventText, Text: "after " + r.URL.Query().Get("after")}})
		ws.Write(r.Context(), websocket.MessageText, b.Bytes())
		ws.Close(websocket.StatusNormalClosure, "")
	})
	mux.HandleFunc("GET /api/sessions/gone/watch", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	})
	mux.HandleFunc("GET /api/sessions/gone", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"message":"There is no such Session."}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Token: "kndlc_token", HTTP: srv.Client()}
	ctx := context.Background()

	w, err := c.Watch(ctx, "s1", 7)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	m, err := w.Next(ctx)
	if err != nil || m.Event == nil || m.Event.Seq != 8 || m.Event.Text != "after 7" {
		t.Fatalf("got %+v, %v; want Event 8 sent after 7", m, err)
	}

	_, err = c.Watch(ctx, "gone", 0)
	var apiErr *apiclient.Error
	if !errors.As(err, &apiErr) || err.Error() != "There is no such Session." {
		t.Fatalf("got %v, want the Hub's sentence: There is no such Session.", err)
	}
}
