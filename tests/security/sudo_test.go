package security

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/hub"
)

// ageSignIns makes every browser sign-in, and the sign-in behind every CLI
// token, d older, as if made d ago; nothing else about them changes.
func (e *env) ageSignIns(d time.Duration) {
	e.t.Helper()
	e.exec(`UPDATE signins SET created_at = created_at - ?`, d.Milliseconds())
	e.exec(`UPDATE cli_tokens SET signed_in_at = signed_in_at - ?`, d.Milliseconds())
}

// privileged is every act that asks for a recent sign-in, against a Hub
// where bob is a Member and box a Runner.
func privileged(bobID, boxID string) []req {
	return []req{
		{method: "POST", path: "/api/invites", body: `{"github_login":"carol"}`},
		{method: "DELETE", path: "/api/members/" + bobID},
		{method: "POST", path: "/api/runners", body: `{"name":"box-2"}`},
		{method: "PUT", path: "/api/runners/" + boxID + "/shared", body: `{"shared":true}`},
		{method: "PUT", path: "/api/account/claude-token", body: `{"token":"sk-ant-oat01-a-setup-token-stored-late-0123456789"}`},
		{method: "POST", path: "/api/account/webhooks", body: `{"url":"https://203.0.113.7/hook","format":"json"}`},
	}
}

// state is what the privileged acts would change: Members, Invites,
// Runners, the Owner's setup token and webhooks.
func (e *env) state() string {
	e.t.Helper()
	rs, _ := e.store.Runners.List(context.Background())
	_, at, _ := e.store.Members.UserSecret(context.Background(), e.userOf("olivia").ID, "claude-token")
	ws, _ := e.store.Notify.NotifyWebhooks(context.Background(), e.userOf("olivia").ID)
	b, _ := json.Marshal(rs)
	return e.snapshot() + string(b) + at.String() + fmt.Sprint(len(ws))
}

// startLogin starts a kndl login as the CLI does and returns its user
// code, device code and token.
func (e *env) startLogin() (string, string, string) {
	e.t.Helper()
	token, hash := auth.NewToken(auth.CLI)
	var start struct {
		DeviceCode string `json:"device_code"`
		UserCode   string `json:"user_code"`
	}
	body := e.must(nil, req{method: "POST", path: "/api/cli/login", body: `{"machine":"laptop","token_sha256":"` + hex.EncodeToString(hash) + `"}`}, 200)
	json.Unmarshal([]byte(body), &start)
	return start.UserCode, start.DeviceCode, token
}

// TestPrivilegedActsNeedARecentSignIn: inviting, removing a Member, pairing
// or sharing a Runner, storing a setup token and approving a CLI login each
// ask for a browser sign-in within HUB_SUDO_MAX_AGE (10 minutes). An older
// one gets 403 saying to sign in again, marked for the web UI to send the
// person to sign in and back, and changes nothing; reads and other changes
// still work; signing in again, or a longer HUB_SUDO_MAX_AGE, lets the acts
// through.
func TestPrivilegedActsNeedARecentSignIn(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	e.member(owner, "bob")
	bob := e.userOf("bob")
	var box api.CreatedRunner
	json.Unmarshal([]byte(e.must(owner.Client, req{method: "POST", path: "/api/runners", body: `{"name":"box"}`, origin: "self"}, 201)), &box)

	e.ageSignIns(11 * time.Minute)
	before := e.state()
	for _, r := range privileged(bob.ID, box.ID) {
		r.origin = "self"
		resp := e.send(owner.Client, r)
		var msg struct{ Message string }
		json.NewDecoder(resp.Body).Decode(&msg)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(msg.Message, "sign in again") || resp.Header.Get("X-Kndl-Sign-In-Again") != "600" {
			t.Errorf("%s %s with a sign-in 11 minutes old: %d %q (header %q), want 403 saying to sign in again",
				r.method, r.path, resp.StatusCode, msg.Message, resp.Header.Get("X-Kndl-Sign-In-Again"))
		}
	}
	if after := e.state(); after != before {
		t.Fatalf("refused acts changed the Hub:\n%s\n->\n%s", before, after)
	}
	// Reads, and acts that ask no recent sign-in, still work.
	e.must(owner.Client, req{method: "GET", path: "/api/members"}, 200)
	e.must(owner.Client, req{method: "PUT", path: "/api/variables/COLOR", body: `{"value":"blue"}`, origin: "self"}, 200)

	// A browser signed in too long ago approves no CLI login: its page
	// sends it to sign in and back, and an approval posted anyway is
	// refused, the login still waiting.
	code, device, token := e.startLogin()
	page := e.must(owner.Client, req{method: "GET", path: "/cli/login?code=" + code}, 200)
	back := `/signin?next=` + url.QueryEscape("/cli/login?code="+code)
	if !strings.Contains(page, `id="sign-in-again"`) || !strings.Contains(page, strings.ReplaceAll(back, "&", "&amp;")) || strings.Contains(page, `value="approve"`) {
		t.Fatalf("the approval page for a stale sign-in:\n%s\nwant a link to %s and no Approve", page, back)
	}
	form := url.Values{"code": {code}, "action": {"approve"}}
	approve := req{method: "POST", path: "/cli/login", body: form.Encode(), origin: "self", header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}
	if got, body := e.do(owner.Client, approve); got != http.StatusForbidden || !strings.Contains(body, "sign in again") {
		t.Fatalf("approving with a stale sign-in: %d %.300s, want 403", got, body)
	}
	if got := e.must(nil, req{method: "POST", path: "/api/cli/login/poll", body: `{"device_code":"` + device + `"}`}, 200); !strings.Contains(got, "pending") {
		t.Fatalf("the login after a refused approval: %s, want pending", got)
	}
	e.must(nil, req{method: "GET", path: "/api/account", bearer: token}, 401)

	// Signed in again, the same browser does it all.
	if got, _ := e.signIn(owner); got != http.StatusOK {
		t.Fatalf("sign in again: %d", got)
	}
	for _, r := range privileged(bob.ID, box.ID) {
		r.origin = "self"
		if got, body := e.do(owner.Client, r); got >= 300 {
			t.Errorf("%s %s after signing in again: %d %.200s", r.method, r.path, got, body)
		}
	}
	e.must(owner.Client, approve, 200)
	e.must(nil, req{method: "GET", path: "/api/account", bearer: token}, 200)

	t.Run("HUB_SUDO_MAX_AGE", func(t *testing.T) {
		if cfg := hub.FromEnv(envVars{"HUB_SUDO_MAX_AGE": "1h"}.get, t.TempDir()); cfg.Check() != nil || cfg.SudoMaxAge != time.Hour {
			t.Fatalf("HUB_SUDO_MAX_AGE=1h reads as %v", cfg.SudoMaxAge)
		}
		e := newEnv(t, func(c *hub.Config) { c.SudoMaxAge = time.Hour })
		owner := e.owner()
		e.ageSignIns(11 * time.Minute)
		e.must(owner.Client, req{method: "POST", path: "/api/invites", body: `{"github_login":"carol"}`, origin: "self"}, 201)
		e.ageSignIns(50 * time.Minute)
		e.must(owner.Client, req{method: "POST", path: "/api/invites", body: `{"github_login":"dave"}`, origin: "self"}, 403)
	})
	t.Run("dev login counts as a sign-in", func(t *testing.T) {
		e := newEnv(t, func(c *hub.Config) { c.DevLogin = true })
		jar, _ := cookiejar.New(nil)
		dev := noRedirect(jar)
		e.must(dev, req{method: "POST", path: "/signin/dev", origin: "self"}, http.StatusSeeOther)
		e.must(dev, req{method: "POST", path: "/api/runners", body: `{"name":"dev-box"}`, origin: "self"}, 201)
		e.ageSignIns(11 * time.Minute)
		e.must(dev, req{method: "POST", path: "/api/runners", body: `{"name":"dev-box-2"}`, origin: "self"}, 403)
	})
}

// envVars is a getenv of fixed variables.
type envVars map[string]string

func (m envVars) get(k string) string { return m[k] }

// TestACLITokenActsPrivilegedOnlyWhileTheSignInThatApprovedItIsRecent: a
// CLI token was approved in a browser, and it does privileged acts only
// within HUB_SUDO_MAX_AGE of that browser's sign-in, never of the approval
// (so a stale cookie can't mint a fresh token, and a stolen token does them
// for ten minutes at most, not forever). A token the Hub has no sign-in
// time for does none. Reads and other acts keep working; the refusal says
// to run kndl login again.
func TestACLITokenActsPrivilegedOnlyWhileTheSignInThatApprovedItIsRecent(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	token := e.cliLogin(owner)
	invite := func(tok, login string) (int, string) {
		return e.do(nil, req{method: "POST", path: "/api/invites", body: fmt.Sprintf(`{"github_login":%q}`, login), bearer: tok})
	}
	if code, body := invite(token, "bob"); code != http.StatusCreated {
		t.Fatalf("a CLI token approved just now: %d %s", code, body)
	}
	e.ageSignIns(11 * time.Minute)
	if code, body := invite(token, "carol"); code != http.StatusForbidden || !strings.Contains(body, "run kndl login again") {
		t.Fatalf("a CLI token whose sign-in is 11 minutes old: %d %s, want 403 saying to run kndl login again", code, body)
	}
	out, errOut, code := e.kndl("invite", "carol")
	if code != 1 || !strings.Contains(errOut, "kndl login again") {
		t.Fatalf("kndl invite with a stale token: %d %s %s", code, out, errOut)
	}
	e.must(nil, req{method: "GET", path: "/api/members", bearer: token}, 200)
	e.must(nil, req{method: "PUT", path: "/api/variables/COLOR", body: `{"value":"blue"}`, bearer: token}, 200)

	// Approved by a sign-in 9 minutes old, a new token is as old as that
	// sign-in: two minutes on, it is refused though approved 2 minutes ago.
	if got, _ := e.signIn(owner); got != http.StatusOK {
		t.Fatalf("sign in again: %d", got)
	}
	e.ageSignIns(9 * time.Minute)
	fresh := e.cliLogin(owner)
	if code, body := invite(fresh, "dave"); code != http.StatusCreated {
		t.Fatalf("a token approved by a sign-in 9 minutes old: %d %s", code, body)
	}
	e.ageSignIns(2 * time.Minute)
	if code, body := invite(fresh, "erin"); code != http.StatusForbidden {
		t.Fatalf("a token approved 2 minutes ago by a sign-in 11 minutes old: %d %s, want 403", code, body)
	}

	// A token from before the Hub kept its sign-in's time does none.
	if got, _ := e.signIn(owner); got != http.StatusOK {
		t.Fatalf("sign in again: %d", got)
	}
	old := e.cliLogin(owner)
	e.exec(`UPDATE cli_tokens SET signed_in_at = NULL WHERE token_hash = ?`, auth.Hash(old))
	if code, _ := invite(old, "frank"); code != http.StatusForbidden {
		t.Fatalf("a token with no sign-in time: %d, want 403", code)
	}
}
