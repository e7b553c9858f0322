package security

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/auth"
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
	cli, _ := e.store.CreateCLIToken(context.Background(), e.userOf("olivia").ID, "other")
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
