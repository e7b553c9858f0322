package security

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/hub"
)

// snapshot is what the Hub knows of who may get in.
func (e *env) snapshot() string {
	e.t.Helper()
	ctx := context.Background()
	ms, err := e.store.Members.List(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	invs, err := e.store.Members.Invites(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := json.Marshal([]any{ms, invs})
	return string(b)
}

// TestStrangersAreRefusedAlikeAndLeaveNoRecord signs in, through GitHub,
// people who bring no Invite, one never made, one expired, revoked, used,
// or made for another login, or a used Setup link: each gets the same
// invite-only page, and the Hub records nothing of them.
func TestStrangersAreRefusedAlikeAndLeaveNoRecord(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	link, _ := e.hub.SetupLink(ctx)
	ownerB := e.browser("olivia")
	e.claim(ownerB, fragment(t, link))
	if code, _ := e.signIn(ownerB); code != http.StatusOK {
		t.Fatalf("owner sign-in: %d", code)
	}
	owner := e.userOf("olivia")

	// A used Invite: its Member was removed since.
	usedLink := e.invite(ownerB, "ursula2")
	u2 := e.browser("ursula2")
	e.claim(u2, fragment(t, usedLink))
	if code, _ := e.signIn(u2); code != http.StatusOK {
		t.Fatal("ursula2 did not get in with her Invite")
	}
	if code, body := e.do(ownerB.Client, req{method: "DELETE", path: "/api/members/" + e.userOf("ursula2").ID, origin: "self"}); code != http.StatusNoContent {
		t.Fatalf("remove: %d %s", code, body)
	}
	_, expired, err := e.store.Members.CreateInvite(ctx, "eve", owner.ID, -time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	revokedLink := e.invite(ownerB, "rex")
	invs, _ := e.store.Members.Invites(ctx)
	for _, inv := range invs {
		if inv.GitHubLogin == "rex" {
			if code, _ := e.do(ownerB.Client, req{method: "DELETE", path: "/api/invites/" + inv.ID, origin: "self"}); code != http.StatusNoContent {
				t.Fatal("revoke invite")
			}
		}
	}
	bobsLink := e.invite(ownerB, "bob")
	neverMade, _ := auth.NewToken(auth.Invite)

	tests := []struct {
		name, login, secret string
		b                   *browser // nil: a new GitHub account
	}{
		{"no invite", "nora", "", nil},
		{"an invite never made", "nemo", neverMade, nil},
		{"an expired invite", "eve", expired, nil},
		{"a revoked invite", "rex", fragment(t, revokedLink), nil},
		{"an invite for another login", "mallory", fragment(t, bobsLink), nil},
		{"a used invite", "ursula2", fragment(t, usedLink), u2},
		{"a used setup link", "sam", fragment(t, link), nil},
	}
	// Logins an Invite names are in the store already.
	named := map[string]bool{"eve": true, "rex": true, "ursula2": true}
	before := e.snapshot()
	var first string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.b
			if b == nil {
				b = e.browser(tt.login)
			}
			if tt.secret != "" {
				e.claim(b, tt.secret)
			}
			code, body := e.signIn(b)
			if code != http.StatusForbidden || !strings.Contains(body, "This Hub is invite-only.") {
				t.Fatalf("got %d %.200s, want 403 and the invite-only page", code, body)
			}
			if first == "" {
				first = body
			} else if body != first {
				t.Errorf("refusal differs from the first one:\n%s\nvs\n%s", body, first)
			}
			if c := e.cookieOf(b); c != "" {
				if code, _ := e.do(nil, req{method: "GET", path: "/api/members", cookie: c}); code != http.StatusUnauthorized {
					t.Errorf("a refused person's cookie gets %d, want 401", code)
				}
			}
			if after := e.snapshot(); after != before {
				t.Errorf("the refusal changed what the Hub knows:\n%s\n->\n%s", before, after)
			}
			if !named[tt.login] && e.stored(tt.login) {
				t.Errorf("the store holds the login %q of someone refused", tt.login)
			}
		})
	}
	// Bob's Invite was not used up by mallory's try.
	b := e.browser("bob")
	e.claim(b, fragment(t, bobsLink))
	if code, _ := e.signIn(b); code != http.StatusOK {
		t.Fatal("bob's Invite no longer lets bob in after someone else tried it")
	}
}

// TestSetupLinkWorksOnce: the Setup link makes the first person to use it
// the Owner, and nobody after; a newer link replaces an older one, and
// once there is an Owner no link is made.
func TestSetupLinkWorksOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	old, _ := e.hub.SetupLink(ctx)
	link, _ := e.hub.SetupLink(ctx)
	if old == "" || link == "" || old == link {
		t.Fatalf("setup links %q, %q", old, link)
	}
	if !strings.HasPrefix(link, e.url+"/setup#kndlo_") {
		t.Fatalf("setup link %q: want %s/setup#<secret>", link, e.url)
	}
	// The replaced link doesn't work.
	early := e.browser("early")
	e.claim(early, fragment(t, old))
	if code, _ := e.signIn(early); code != http.StatusForbidden {
		t.Fatalf("a replaced setup link: %d, want 403", code)
	}
	owner := e.browser("olivia")
	e.claim(owner, fragment(t, link))
	if code, body := e.signIn(owner); code != http.StatusOK || !strings.Contains(body, "the Owner") {
		t.Fatalf("first use: %d %.200s", code, body)
	}
	second := e.browser("sam")
	e.claim(second, fragment(t, link))
	if code, _ := e.signIn(second); code != http.StatusForbidden {
		t.Fatalf("second use: %d, want 403", code)
	}
	if again, err := e.hub.SetupLink(ctx); again != "" || err != nil {
		t.Fatalf("with an Owner, SetupLink = %q, %v; want none", again, err)
	}
	ms, _ := e.store.Members.List(ctx)
	if len(ms) != 1 || !ms[0].IsOwner || ms[0].GitHubLogin != "olivia" {
		t.Fatalf("members = %+v, want olivia alone, the Owner", ms)
	}
}

// TestSecretsAreKeptOnlyAsHashes: the Setup link, an Invite, a sign-in
// cookie and a CLI token are in the store only as their SHA-256.
func TestSecretsAreKeptOnlyAsHashes(t *testing.T) {
	e := newEnv(t)
	link, _ := e.hub.SetupLink(context.Background())
	owner := e.browser("olivia")
	e.claim(owner, fragment(t, link))
	e.signIn(owner)
	invite := e.invite(owner, "bob")
	bob := e.member(owner, "carol")
	cli := e.cliLogin(bob)
	secrets := map[string]string{"setup link": fragment(t, link), "invite": fragment(t, invite),
		"sign-in cookie": e.cookieOf(owner), "CLI token": cli}
	for what, s := range secrets {
		if s == "" {
			t.Fatalf("no %s", what)
		}
		if e.stored(s) {
			t.Errorf("the store holds a %s in the clear", what)
		}
		if !e.stored(string(auth.Hash(s))) {
			t.Errorf("the store holds no SHA-256 of the %s", what)
		}
	}
}

// TestAMemberSignsInAgainByTheirGitHubID: a Member needs no Invite to sign
// in again, even under a new GitHub login; someone who takes their old
// login gets nothing of theirs.
func TestAMemberSignsInAgainByTheirGitHubID(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	bob := e.member(owner, "bob")
	id := e.userOf("bob").ID
	if code, _ := e.do(bob.Client, req{method: "POST", path: "/signout", origin: "self"}); code != http.StatusOK {
		t.Fatalf("sign out: %d", code)
	}
	e.gh.RenameUser("bob", "robert")
	again := &browser{Client: e.gh.NewBrowser("robert"), login: "robert"}
	if code, body := e.signIn(again); code != http.StatusOK {
		t.Fatalf("a Member under a new login: %d %.200s", code, body)
	}
	if u := e.userOf("robert"); u.ID != id {
		t.Fatalf("the renamed Member is user %s, want %s", u.ID, id)
	}
	impostor := e.browser("bob")
	if code, _ := e.signIn(impostor); code != http.StatusForbidden {
		t.Fatalf("a new account with a Member's old login: %d, want 403", code)
	}
}

// TestOnlyTheOwnerInvitesAndRemoves: a Member can't make, list or revoke
// Invites or remove anyone, and the Owner can't be removed.
func TestOnlyTheOwnerInvitesAndRemoves(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	bob := e.member(owner, "bob")
	carol := e.member(owner, "carol")
	carolID := e.userOf("carol").ID
	ownerID := e.userOf("olivia").ID
	before := e.snapshot()
	tests := []req{
		{method: "POST", path: "/api/invites", body: `{"github_login":"dave"}`},
		{method: "GET", path: "/api/invites"},
		{method: "DELETE", path: "/api/members/" + carolID},
		{method: "DELETE", path: "/api/members/" + ownerID},
	}
	for _, r := range tests {
		r.origin = "self"
		if code, body := e.do(bob.Client, r); code != http.StatusForbidden {
			t.Errorf("a Member's %s %s: %d %s, want 403", r.method, r.path, code, body)
		}
	}
	if code, _ := e.do(owner.Client, req{method: "DELETE", path: "/api/members/" + ownerID, origin: "self"}); code != http.StatusConflict {
		t.Errorf("the Owner removing themselves: %d, want 409", code)
	}
	if after := e.snapshot(); after != before {
		t.Fatalf("refused requests changed members or invites:\n%s\n->\n%s", before, after)
	}
	// Any Member may see who the Members are, and pair Runners.
	if code, body := e.do(carol.Client, req{method: "GET", path: "/api/members"}); code != http.StatusOK || !strings.Contains(body, `"bob"`) {
		t.Fatalf("a Member listing Members: %d %s", code, body)
	}
	if code, body := e.do(carol.Client, req{method: "POST", path: "/api/runners", body: `{"name":"carols-box"}`, origin: "self"}); code != http.StatusCreated {
		t.Fatalf("a Member pairing a Runner: %d %s", code, body)
	}
	if code, body := e.do(owner.Client, req{method: "POST", path: "/api/invites", body: `{"github_login":"not a login"}`, origin: "self"}); code != http.StatusBadRequest {
		t.Fatalf("an Invite for a malformed login: %d %s", code, body)
	}
}

// TestSignInSendsTheBrowserOnlyToAPathOnTheHub: the next a sign-in goes on
// to, through GitHub or dev login, is a path on the Hub or else "/": no
// Location a browser would read as another host (a tab or newline it
// drops, a backslash it reads as a slash, a second slash) gets out.
func TestSignInSendsTheBrowserOnlyToAPathOnTheHub(t *testing.T) {
	tricks := []string{"//evil.example", "/\\evil.example", "/\t/evil.example", "/\n/evil.example", "\t//evil.example",
		"/%09/evil.example", "%2F%2Fevil.example", "https://evil.example", " /evil.example", ""}
	const ok = "/sessions?view=mine"

	e := newEnv(t, func(c *hub.Config) { c.DevLogin = true })
	e.owner()
	b := e.browser("olivia")
	// where follows GitHub's sign-in from /signin/github?next=next, and
	// returns where the Hub then sends the browser.
	where := func(next string) string {
		t.Helper()
		var loc string
		b.CheckRedirect = func(r *http.Request, via []*http.Request) error {
			if prev := via[len(via)-1]; prev.URL.Path == "/signin/github/callback" {
				loc = r.Response.Header.Get("Location")
				return http.ErrUseLastResponse
			}
			return nil
		}
		e.do(b.Client, req{method: "GET", path: "/signin/github?next=" + url.QueryEscape(next), from: nextAddr()})
		return loc
	}
	dev := func(next string) string {
		t.Helper()
		resp := e.send(nil, req{method: "POST", path: "/signin/dev", origin: "self",
			body: "next=" + url.QueryEscape(next), header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}})
		resp.Body.Close()
		return resp.Header.Get("Location")
	}
	for _, via := range []struct {
		name string
		loc  func(string) string
	}{{"GitHub", where}, {"dev login", dev}} {
		if got := via.loc(ok); got != ok {
			t.Errorf("%s with next %q: sent to %q, want it", via.name, ok, got)
		}
		for _, next := range tricks {
			if got := via.loc(next); got != "/" {
				t.Errorf("%s with next %q: sent to %q, want /", via.name, next, got)
			}
		}
	}
}
