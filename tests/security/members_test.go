package security

import (
	"context"
	"kndl.dev/kndl/internal/store"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRemovedMemberIsCutOffEverywhereAtOnce: removing a Member closes their
// open WebSockets, from a browser and from the CLI, within a second; their
// sign-in cookie and CLI token stop working; and GitHub sign-in no longer
// lets them in.
func TestRemovedMemberIsCutOffEverywhereAtOnce(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	bob := e.member(owner, "bob")
	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "bob", true)
	bobUser := e.userOf("bob")
	s := e.session(bobUser, "acme/app")
	if err := e.store.Sessions.MoveSession(context.Background(), s.ID, store.Starting, store.Active, "", false); err != nil {
		t.Fatal(err)
	}
	cookie := e.cookieOf(bob)
	cli, err := e.store.Signins.CreateCLIToken(context.Background(), bobUser.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	fromBrowser := e.watch(s.ID, http.Header{"Cookie": {"kndl=" + cookie}, "Origin": {e.url}})
	fromCLI := e.watch(s.ID, http.Header{"Authorization": {"Bearer " + cli}})
	// Olivia's own connection stays open.
	e.gh.SetCollaborator("acme/app", "olivia", true)
	ownerCookie := e.cookieOf(owner)
	ownersWatch := e.watch(s.ID, http.Header{"Cookie": {"kndl=" + ownerCookie}, "Origin": {e.url}})

	if code, body := e.do(owner.Client, req{method: "DELETE", path: "/api/members/" + bobUser.ID, origin: "self"}); code != http.StatusNoContent {
		t.Fatalf("remove: %d %s", code, body)
	}
	closesWithin(t, fromBrowser, time.Second, "a removed Member's browser WebSocket")
	if got, _ := e.store.Sessions.SessionByID(context.Background(), s.ID); got.State != store.Asleep {
		t.Errorf("a removed Member's awake Session is %s, want asleep", got.State)
	}
	closesWithin(t, fromCLI, time.Second, "a removed Member's CLI WebSocket")
	select {
	case <-ownersWatch:
		t.Fatal("removing bob closed the Owner's WebSocket")
	default:
	}
	if code, _ := e.do(nil, req{method: "GET", path: "/api/sessions", cookie: cookie}); code != http.StatusUnauthorized {
		t.Errorf("a removed Member's cookie: %d, want 401", code)
	}
	if code, _ := e.do(nil, req{method: "GET", path: "/api/sessions", bearer: cli}); code != http.StatusUnauthorized {
		t.Errorf("a removed Member's CLI token: %d, want 401", code)
	}
	again := &browser{Client: e.gh.NewBrowser("bob"), login: "bob"}
	if code, body := e.signIn(again); code != http.StatusForbidden || !strings.Contains(body, "invite-only") {
		t.Errorf("a removed Member signing in again: %d, want the invite-only page", code)
	}
	if code, _ := e.do(owner.Client, req{method: "GET", path: "/api/members"}); code != http.StatusOK {
		t.Fatalf("the Owner after removing bob: %d", code)
	}
	// Invited again, they are the same user, with their Sessions.
	back := e.member(owner, "bob")
	if u := e.userOf("bob"); u.ID != bobUser.ID {
		t.Fatalf("bob invited again is user %s, want %s", u.ID, bobUser.ID)
	}
	if code, _ := e.do(back.Client, req{method: "GET", path: "/api/sessions/" + s.ID}); code != http.StatusOK {
		t.Fatalf("bob back, on his Session: %d", code)
	}
}
