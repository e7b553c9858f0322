package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// storedSession records a Session straight in the Hub's store, in a state
// that runs nothing (asleep, failed), for a list to show.
func (s *System) storedSession(repoURL string, creator store.User, title string, state store.SessionState) string {
	s.t.Helper()
	ctx := context.Background()
	rns, err := s.Store.Runners.List(ctx)
	if err != nil || len(rns) == 0 {
		s.t.Fatalf("the Runners: %v %v", rns, err)
	}
	r, err := s.Store.Repos.EnsureRepo(ctx, repoURL, repoURL)
	if err != nil {
		s.t.Fatal(err)
	}
	x, err := s.Store.Sessions.CreateSession(ctx, store.Session{RepoID: r.ID, CreatorID: creator.ID, RunnerID: rns[0].ID, Title: title})
	if err == nil {
		err = s.Store.Sessions.MoveSession(ctx, x.ID, store.Starting, state, "", false)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return x.ID
}

// listRows is the titles of the Sessions list's rows, sorted, as the page
// shows them.
const listRows = `[...document.querySelectorAll("#repos li[data-id] a.title")].map((a) => a.textContent).sort().join("|")`

// TestTheSessionsListsAddressReproducesItsFilter: on the Sessions page,
// with Sessions of two Creators in two Repos, each choice of the filter
// goes into the page's address and shows the rows it keeps; that address,
// opened by another Member, shows the same rows and the same choices; a
// filtered list stays live (a Session that stops matching goes); and a
// wrong filter says why.
func TestTheSessionsListsAddressReproducesItsFilter(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	app, web := s.GitHubRepo("acme/app"), s.GitHubRepo("acme/web")
	s.GitHub.SetCollaborator("acme/app", "bob", true)
	s.GitHub.SetCollaborator("acme/web", "bob", true)
	s.Model.On(testkit.PromptContains("fix the login form"), testkit.Text("Fixed."))
	v := s.NewSession(app, "fix the login form")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the first turn's end", kind(protocol.EventTurnEnd))

	dev := NewBrowser(t)
	s.SignInDev(dev)
	bobs := NewBrowser(t)
	s.Member(bobs, "bob")
	ctx := context.Background()
	me, _ := s.Store.Members.DevUser(ctx)
	ms, _ := s.Store.Members.List(ctx)
	i := slices.IndexFunc(ms, func(m store.User) bool { return m.GitHubLogin == "bob" })
	if i < 0 {
		t.Fatalf("bob is not a Member: %+v", ms)
	}
	bob := ms[i]
	s.storedSession(web, me, "Add dark mode", store.Asleep)
	s.storedSession(app, bob, "Login flake", store.Asleep)
	s.storedSession(web, bob, "Refactor the build", store.Failed)

	all := "Add dark mode|Login flake|Refactor the build|fix the login form"
	dev.Go(s.URL+"/", "#filters")
	dev.Wait(testenv.WaitShort, "every row", listRows+` === "`+all+`"`)

	// A choice applies at once, and goes into the address.
	choose := func(what, js, search, rows string) {
		t.Helper()
		Eval[bool](dev, `(() => { `+js+`; return true; })()`)
		dev.Arrive(testenv.WaitMedium, what, `location.search === "`+search+`" && document.getElementById("filters") && `+listRows+` === "`+rows+`"`)
	}
	choose("bob's Sessions", `const c = document.querySelector("#filters select[name=creator]"); c.value = "bob"; c.dispatchEvent(new Event("change"))`,
		"?creator=bob", "Login flake|Refactor the build")
	choose("bob's with login in the title", `document.querySelector("#filters input[name=search]").value = "LOGIN"; document.getElementById("filters").requestSubmit()`,
		"?creator=bob&search=LOGIN", "Login flake")
	dev.Screenshot("sessions-list-filtered.png")

	// The address, shared: bob sees the same rows and the same choices.
	bobs.Go(s.URL+"/?creator=bob&search=LOGIN", "#filters")
	bobs.Wait(testenv.WaitShort, "the shared filter's rows and choices", listRows+` === "Login flake" && `+
		`document.querySelector("#filters select[name=creator]").value === "bob" && document.querySelector("#filters input[name=search]").value === "LOGIN"`)

	// A Repo's and a state's, from their address.
	dev.Go(s.URL+"/?repo="+v.RepoID+"&state=asleep", "#filters")
	dev.Wait(testenv.WaitShort, "acme/app's asleep Sessions", listRows+` === "Login flake"`)

	// Waiting on me, then live: the Session that stops waiting goes.
	dev.Go(s.URL+"/", "#filters")
	choose("the Sessions waiting on the dev user", `document.querySelector("#filters input[name=waiting]").click()`,
		"?waiting=true", "fix the login form")
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil); code != http.StatusNoContent {
		t.Fatalf("sleep: %d", code)
	}
	dev.Wait(testenv.WaitMedium, "the Session gone from the list once asleep", listRows+` === "" && !document.getElementById("no-sessions").hidden`)
	if got := Eval[string](dev, `document.getElementById("no-sessions").textContent`); !strings.Contains(got, "No Session matches this filter") {
		t.Errorf("an empty filtered list says %q", got)
	}

	// A wrong filter says why, and shows no rows.
	dev.Go(s.URL+"/?state=sleeping", "#filters")
	if got := Eval[string](dev, `document.getElementById("filter-error").hidden ? "" : document.getElementById("filter-error").textContent`); !strings.Contains(got, `no Session state "sleeping"`) {
		t.Errorf("a wrong filter's page says %q", got)
	}
	if got := Eval[string](dev, listRows); got != "" {
		t.Errorf("a wrong filter's page lists %q", got)
	}

	// kndl ls's filter is the API's.
	var ss []api.Session
	s.Do(http.MethodGet, "/api/sessions?creator=bob&state=failed", nil, &ss)
	if len(ss) != 1 || ss[0].Title != "Refactor the build" {
		t.Errorf("GET /api/sessions?creator=bob&state=failed: %+v, want bob's failed Session", ss)
	}
}
