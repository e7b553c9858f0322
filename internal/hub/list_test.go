package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// listConn is a Sessions list's WebSocket, as a tab reads it.
type listConn struct {
	t      *testing.T
	ch     chan listMsg
	closed chan struct{} // closed when the Hub ends the socket
}

func openList(t *testing.T, f *fixture, token string) *listConn {
	t.Helper()
	return openListOf(t, f, token, "")
}

// openListOf opens the list's WebSocket with a filter, query ("?state=active").
func openListOf(t *testing.T, f *fixture, token, query string) *listConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/api/sessions/live"+query,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	c := &listConn{t: t, ch: make(chan listMsg, 100), closed: make(chan struct{})}
	go func() {
		defer close(c.closed)
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var m listMsg
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("not a list message: %s", b)
			}
			c.ch <- m
		}
	}()
	return c
}

// next returns the next message.
func (c *listConn) next() listMsg {
	c.t.Helper()
	select {
	case m := <-c.ch:
		return m
	case <-time.After(testenv.WaitShort):
		c.t.Fatal("no message on the Sessions list")
		return listMsg{}
	}
}

// until reads messages until one has a row ok accepts, and returns it.
func (c *listConn) until(what string, ok func(api.Session) bool) api.Session {
	c.t.Helper()
	deadline := time.After(testenv.WaitShort)
	for {
		select {
		case m := <-c.ch:
			for _, s := range m.Sessions {
				if ok(s) {
					return s
				}
			}
		case <-deadline:
			c.t.Fatalf("the Sessions list never showed %s", what)
			return api.Session{}
		}
	}
}

func ids(ss []api.Session) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	slices.Sort(out)
	return out
}

// member admits a GitHub login to the Hub (the first as its Owner) and
// returns them with a CLI token.
func member(t *testing.T, f *fixture, login string) (store.User, string) {
	t.Helper()
	ms, _ := f.store.Members.List(context.Background())
	return admitted(t, f, store.GitHubIdentity{ID: int64(1000 + len(ms)), Login: login, Name: strings.ToUpper(login[:1]) + login[1:]})
}

// admitted admits the GitHub identity gh to the Hub (the first as its
// Owner) and returns them with a CLI token.
func admitted(t *testing.T, f *fixture, gh store.GitHubIdentity) (store.User, string) {
	t.Helper()
	ctx := context.Background()
	ms, _ := f.store.Members.List(ctx)
	login := gh.Login
	var u store.User
	var err error
	if has, _ := f.store.Members.HasOwner(ctx); !has {
		secret, _ := f.store.Members.NewSetupLink(ctx)
		u, err = f.store.Members.ClaimSetupLink(ctx, secret, gh)
	} else {
		var secret string
		var owner string
		for _, m := range ms {
			if m.IsOwner {
				owner = m.ID
			}
		}
		if _, secret, err = f.store.Members.CreateInvite(ctx, login, owner, time.Hour); err == nil {
			u, err = f.store.Members.RedeemInvite(ctx, secret, gh)
		}
	}
	if err != nil {
		t.Fatalf("admit %s: %v", login, err)
	}
	tok, err := f.store.Signins.CreateCLIToken(ctx, u.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	return u, tok
}

// TestTheSessionsListShowsOnlySessionsThePersonMaySee: a person's list
// holds the Sessions of Repos they have access to and never a row of
// another, however it changes; once they lose access, the Session's rows
// stop and it goes from the list.
func TestTheSessionsListShowsOnlySessionsThePersonMaySee(t *testing.T) {
	const ttl = 300 * time.Millisecond
	gh := testkit.NewGitHub(t)
	f := newFixture(t, withGitHub(gh, ttl))
	ctx := context.Background()
	olivia, oliviaTok := member(t, f, "olivia")
	_, bobTok := member(t, f, "bob")
	gh.InstallApp("acme/app")
	gh.InstallApp("acme/secret")
	gh.SetCollaborator("acme/app", "olivia", true)
	gh.SetCollaborator("acme/secret", "olivia", true)
	gh.SetCollaborator("acme/app", "bob", true)
	session := func(repo string) store.Session {
		r, _ := f.store.Repos.EnsureRepo(ctx, gh.RepoURL(repo), repo)
		s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: r.ID, CreatorID: olivia.ID, RunnerID: f.runner.ID, Title: repo})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	app, secret := session("acme/app"), session("acme/secret")

	bob := openList(t, f, bobTok)
	m := bob.next()
	if m.Type != "list" || !slices.Equal(ids(m.Sessions), []string{app.ID}) || m.Names[olivia.ID] != "Olivia" {
		t.Fatalf("bob's list = %+v, want only %s (acme/app) with its Creator's name", m, app.ID)
	}
	if m := openList(t, f, oliviaTok).next(); !slices.Equal(ids(m.Sessions), ids([]api.Session{{ID: app.ID}, {ID: secret.ID}})) {
		t.Fatalf("olivia's list = %v, want both", ids(m.Sessions))
	}

	// A change of each: bob hears of his alone.
	if err := f.hub.sessions.SetKeepAwake(ctx, secret.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := f.hub.sessions.SetKeepAwake(ctx, app.ID, true); err != nil {
		t.Fatal(err)
	}
	m = bob.next()
	if m.Type != "changed" || len(m.Sessions) != 1 || m.Sessions[0].ID != app.ID || !m.Sessions[0].KeepAwake {
		t.Fatalf("bob got %+v, want acme/app's row alone, kept awake", m)
	}

	// Bob loses access: the Hub ends his list, or tells it the Session
	// is gone; it never sends the row again.
	gh.SetCollaborator("acme/app", "bob", false)
	lost := time.Now()
	on := false
	for {
		select {
		case m := <-bob.ch:
			if slices.Contains(m.Gone, app.ID) {
				t.Logf("gone from bob's list after %v", time.Since(lost))
				return
			}
			if len(m.Sessions) > 0 && time.Since(lost) > 2*ttl {
				t.Fatalf("bob still gets acme/app's row %v after losing access", time.Since(lost))
			}
		case <-bob.closed:
			t.Logf("bob's list ended after %v", time.Since(lost))
			return
		case <-time.After(ttl / 4):
			if time.Since(lost) > testenv.WaitShort {
				t.Fatal("bob's list neither ended nor dropped the Session once he lost access")
			}
			on = !on
			f.hub.sessions.SetKeepAwake(ctx, app.ID, on)
		}
	}
}

// TestTheSessionsListTellsOfEachChange: a new Session appears in the list,
// its failure with the reason, and Keep awake, a
// Runner's Session taken back and the Turn it runs each reach the list
// without being asked for.
func TestTheSessionsListTellsOfEachChange(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	repo, _ := f.store.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	list := openList(t, f, f.cli)
	if m := list.next(); m.Type != "list" || len(m.Sessions) != 0 {
		t.Fatalf("first message %+v, want an empty list", m)
	}

	// No Runner is connected: the start fails, saying why.
	s, err := f.hub.sessions.Create(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "first"},
		store.Prompt{AuthorID: dev.ID, Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	// Its start and its failure may come as one row: the list reads
	// each Session once a burst of changes.
	failed := list.until("the new Session, failed", func(a api.Session) bool { return a.ID == s.ID && a.Title == "first" && a.State == api.Failed })
	if !strings.Contains(failed.StateDetail, "not connected") {
		t.Fatalf("failed with %q, want the reason", failed.StateDetail)
	}
	if err := f.hub.sessions.SetKeepAwake(ctx, s.ID, true); err != nil {
		t.Fatal(err)
	}
	list.until("Keep awake on", func(a api.Session) bool { return a.ID == s.ID && a.KeepAwake })

	// A Session its Runner still runs comes back Active; then a Turn.
	run, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "running"})
	if err != nil {
		t.Fatal(err)
	}
	f.store.Sessions.MoveSession(ctx, run.ID, store.Starting, store.Frozen, "", false)
	helloWith(t, f, f.rtoken, []string{run.ID})
	list.until("the Session back Active", func(a api.Session) bool { return a.ID == run.ID && a.State == api.Active && a.Activity == "" })
	f.hub.sessions.Accepted(run.ID)
	list.until("a Turn running", func(a api.Session) bool { return a.ID == run.ID && a.Activity == "turn" })
	f.hub.sessions.TurnEnded(run.ID)
	list.until("the Turn over", func(a api.Session) bool { return a.ID == run.ID && a.Activity == "" })
}
