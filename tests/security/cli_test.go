package security

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
)

// TestCLISignsInThroughTheBrowserAndLogoutRevokes: kndl login gets a CLI
// token a signed-in browser approves, keeps it in a config file only its
// user can read, and the Hub only its hash; kndl logout revokes it on the
// Hub, closing what it opened.
func TestCLISignsInThroughTheBrowserAndLogoutRevokes(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	bob := e.member(owner, "bob")
	token := e.cliLogin(bob)
	if auth.KindOf(token) != auth.CLI {
		t.Fatalf("saved token %q is not a CLI token", token)
	}
	path, _ := apiclient.ConfigPath()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file %s: %v, mode %v; want 0600", path, err, fi.Mode().Perm())
	}
	if e.stored(token) || !e.stored(string(auth.Hash(token))) {
		t.Fatal("the Hub holds the CLI token rather than its hash alone")
	}
	code, body := e.do(nil, req{method: "GET", path: "/api/account", bearer: token})
	if code != http.StatusOK || !strings.Contains(body, e.userOf("bob").ID) {
		t.Fatalf("the new token: %d %s, want bob's account", code, body)
	}
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "bob", true)
	s := e.session(e.userOf("bob"), "acme/app")
	closed := e.watch(s.ID, http.Header{"Authorization": {"Bearer " + token}})

	if err := apiclient.Logout(context.Background()); err != nil {
		t.Fatalf("kndl logout: %v", err)
	}
	closesWithin(t, closed, time.Second, "a WebSocket of a logged-out CLI")
	if code, _ := e.do(nil, req{method: "GET", path: "/api/account", bearer: token}); code != http.StatusUnauthorized {
		t.Fatalf("the token after logout: %d, want 401", code)
	}
	if cfg, _ := apiclient.LoadConfig(); cfg.Token != "" {
		t.Fatal("logout left the token in the config file")
	}
}

// TestCLILoginIsApprovedOnlyByASignedInBrowserOnTheHubsPage: a login waits
// until a signed-in browser approves it from the Hub's own page; no cookie,
// a foreign origin, or a wrong code approves nothing; a denied login's token
// never works; a wrong device code is refused.
func TestCLILoginIsApprovedOnlyByASignedInBrowserOnTheHubsPage(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	token, hash := auth.NewToken(auth.CLI)
	code, body := e.do(nil, req{method: "POST", path: "/api/cli/login",
		body: `{"machine":"laptop","token_sha256":"` + hex.EncodeToString(hash) + `"}`})
	var start struct {
		DeviceCode string `json:"device_code"`
		UserCode   string `json:"user_code"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &start) != nil || start.UserCode == "" {
		t.Fatalf("start: %d %s", code, body)
	}
	poll := func(device string) (int, string) {
		return e.do(nil, req{method: "POST", path: "/api/cli/login/poll", body: `{"device_code":"` + device + `"}`})
	}
	pending := func() {
		t.Helper()
		if code, body := poll(start.DeviceCode); code != http.StatusOK || !strings.Contains(body, `"pending"`) {
			t.Fatalf("poll: %d %s, want pending", code, body)
		}
	}
	approveForm := url.Values{"code": {start.UserCode}, "action": {"approve"}}.Encode()
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}

	// A browser that isn't signed in is sent to sign in first.
	resp := e.send(nil, req{method: "GET", path: "/cli/login?code=" + start.UserCode, header: http.Header{"Accept": {"text/html"}}})
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin?next=") {
		t.Fatalf("approval page without a sign-in: %d to %q, want 303 to sign-in", resp.StatusCode, loc)
	}
	// Signing in there comes back to the approval page.
	fresh := &browser{Client: e.gh.NewBrowser("olivia"), login: "olivia"}
	_, page := e.do(fresh.Client, req{method: "GET", path: "/cli/login?code=" + start.UserCode, header: http.Header{"Accept": {"text/html"}}})
	link := regexp.MustCompile(`href="(/signin/github\?next=[^"]+)"`).FindStringSubmatch(page)
	if link == nil {
		t.Fatalf("the sign-in page has no GitHub link carrying where to come back: %.400s", page)
	}
	if code, body := e.do(fresh.Client, req{method: "GET", path: html.UnescapeString(link[1])}); code != http.StatusOK || !strings.Contains(body, start.UserCode) {
		t.Fatalf("after signing in: %d %.300s, want the approval page for %s", code, body, start.UserCode)
	}
	if code, _ := e.do(nil, req{method: "POST", path: "/cli/login", body: approveForm, origin: "self", header: form}); code != http.StatusUnauthorized {
		t.Fatalf("approving without a sign-in: %d, want 401", code)
	}
	cli, _ := e.store.Signins.CreateCLIToken(context.Background(), e.userOf("olivia").ID, "other")
	if code, _ := e.do(nil, req{method: "POST", path: "/cli/login", body: approveForm, bearer: cli, header: form}); code != http.StatusUnauthorized {
		t.Fatalf("approving with a CLI token: %d, want 401", code)
	}
	if code, _ := e.do(owner.Client, req{method: "POST", path: "/cli/login", body: approveForm, origin: "https://evil.example", header: form}); code != http.StatusForbidden {
		t.Fatalf("approving from another origin: %d, want 403", code)
	}
	wrong := url.Values{"code": {"BBBB-BBBB"}, "action": {"approve"}}.Encode()
	if code, _ := e.do(owner.Client, req{method: "POST", path: "/cli/login", body: wrong, origin: "self", header: form}); code != http.StatusNotFound {
		t.Fatalf("approving a code nobody shows: %d, want 404", code)
	}
	pending()
	if code, _ := e.do(nil, req{method: "GET", path: "/api/account", bearer: token}); code != http.StatusUnauthorized {
		t.Fatal("the token works before anyone approved it")
	}
	if code, _ := poll("not-a-device-code"); code != http.StatusNotFound {
		t.Fatalf("polling a wrong device code: %d, want 404", code)
	}
	e.approve(owner, start.UserCode, e.url+"/cli/login?code="+start.UserCode, "deny")
	if code, body := poll(start.DeviceCode); code != http.StatusOK || !strings.Contains(body, `"denied"`) {
		t.Fatalf("poll after deny: %d %s", code, body)
	}
	if code, _ := e.do(nil, req{method: "GET", path: "/api/account", bearer: token}); code != http.StatusUnauthorized {
		t.Fatal("a denied login's token works")
	}
	// A login asks with a hash, never a secret the Hub could hold.
	if code, _ := e.do(nil, req{method: "POST", path: "/api/cli/login", body: `{"machine":"x","token_sha256":"` + token + `"}`}); code != http.StatusBadRequest {
		t.Fatalf("a login sending a token rather than its hash: %d, want 400", code)
	}
}

// TestTheApprovalPageSaysWhereALoginComesFrom: the page that approves a
// kndl login shows the address the Hub saw it from and the client it
// named, warns plainly when that address is one a connected Runner of this
// Hub connects from (a Session's Sandbox reaches the Hub from there, and a
// prompt-injected Claude can ask its Creator to approve its code), doesn't
// for another address, and says what approving gives.
func TestTheApprovalPageSaysWhereALoginComesFrom(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	const runnerAddr, elsewhere = "203.0.113.7", "198.51.100.9"
	var box api.CreatedRunner
	json.Unmarshal([]byte(e.must(owner.Client, req{method: "POST", path: "/api/runners", body: `{"name":"build-box"}`, origin: "self"}, http.StatusCreated)), &box)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitShort)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.wsURL("/runner/connect"), &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + box.Token}, "X-Forwarded-For": {runnerAddr}}})
	if err != nil {
		t.Fatalf("the Runner dials: %v", err)
	}
	conn := protocol.NewConn(ws, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go conn.Serve(context.Background())
	t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "test over") })
	if err := conn.Request(ctx, protocol.TypeHello, protocol.Hello{MinVersion: 1, MaxVersion: protocol.Version, Models: claude.Models(), Name: "build-box"}, nil); err != nil {
		t.Fatalf("the Runner's hello: %v", err)
	}

	bob := e.member(owner, "bob")
	page := func(viewer *browser, from, client string) string {
		t.Helper()
		_, hash := auth.NewToken(auth.CLI)
		var start api.CLILoginCode
		body := e.must(nil, req{method: "POST", path: "/api/cli/login", from: from, header: http.Header{"User-Agent": {client}},
			body: `{"machine":"laptop","token_sha256":"` + hex.EncodeToString(hash) + `"}`}, http.StatusOK)
		json.Unmarshal([]byte(body), &start)
		return e.must(viewer.Client, req{method: "GET", path: "/cli/login?code=" + start.UserCode}, http.StatusOK)
	}
	gives := regexp.MustCompile(`Approving gives that kndl CLI a token that acts as you</strong>, with your access to every Repo`)
	tests := []struct {
		name, from, client string
		fromRunner         bool
	}{
		{"from the Runner's address", runnerAddr, "kndl-cli (linux/amd64)", true},
		{"from elsewhere", elsewhere, "curl/8.5.0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := page(owner, tt.from, tt.client)
			if !strings.Contains(got, `id="login-address">`+tt.from+" ") || !strings.Contains(got, `id="login-client"><code>`+html.EscapeString(tt.client)+`</code>`) {
				t.Errorf("the page does not show the address %s and the client %q:\n%s", tt.from, tt.client, got)
			}
			warned := regexp.MustCompile(`id="from-runner"><strong>This login comes from the address a Runner of this Hub connects from</strong> \(build-box\)\. It may come from a Session's Sandbox`).MatchString(got)
			cleared := strings.Contains(got, `id="not-from-runner"`)
			if warned != tt.fromRunner || cleared == tt.fromRunner {
				t.Errorf("warned that it may come from a Sandbox: %v, said no Runner connects from there: %v; want %v, %v:\n%s", warned, cleared, tt.fromRunner, !tt.fromRunner, got)
			}
			if !gives.MatchString(got) {
				t.Errorf("the page does not say what approving gives:\n%s", got)
			}
		})
	}

	// Someone else's Runner is counted, not named.
	if got := page(bob, runnerAddr, "kndl-cli (linux/amd64)"); !strings.Contains(got, "connects from</strong> (a Runner you don&#39;t use).") {
		t.Errorf("bob's page does not count the Runner he doesn't use:\n%s", got)
	}

	// kndl login names itself.
	e.t.Setenv("KNDL_CONFIG", filepath.Join(t.TempDir(), "cli.json"))
	err = apiclient.Login(context.Background(), e.url, "laptop", func(code, approveURL string) {
		got := e.must(owner.Client, req{method: "GET", path: strings.TrimPrefix(approveURL, e.url)}, http.StatusOK)
		if !strings.Contains(got, "<code>"+html.EscapeString(apiclient.UserAgent)+"</code>") {
			t.Errorf("the page does not name the client %q:\n%s", apiclient.UserAgent, got)
		}
		e.approve(owner, code, approveURL, "deny")
	})
	if err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("kndl login: %v, want it denied", err)
	}
}
