package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestAllowInTheSessionViewOpensARefusedHostToTheAwakeSession: under an
// allowlist, an awake Session's git to a host off it is refused and its
// history notes the host with an Allow button for a Member with push. The
// button asks first, naming the host and that every Session of the
// Environment may reach it; confirmed, the Repo's allowlist has the host
// in a new version, and the same Session's next request passes with no
// sleep or wake.
func TestAllowInTheSessionViewOpensARefusedHostToTheAwakeSession(t *testing.T) {
	t.Parallel()
	ln := testkit.ListenForSandboxesOn(t, 443)[0]
	names := &testkit.Resolver{}
	names.Set("later.test", ln.Addr().(*net.TCPAddr).IP.String())
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+r.URL.Path)
		mu.Unlock()
	}))
	srv.Listener = ln
	srv.StartTLS()
	t.Cleanup(srv.Close)

	s := Start(t, WithRunnerResolver(names))
	repo := s.Repo()
	s.kndl("", "env", "edit", "--repo", repo, "--egress", "allowlist", "--allow", "*.allowed.test")
	if out, errOut, code := s.kndl("", "env", "apply", "--repo", repo); code != 0 {
		t.Fatalf("kndl env apply: exit %d\n%s\n%s", code, out, errOut)
	}
	s.Model.On(testkit.PromptContains("egress"), testkit.Text("Ready."))
	v := s.NewSession(repo, "egress")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the first turn's end", kind(protocol.EventTurnEnd))

	fetch := func() (string, int) {
		return s.Exec(v.ID, "bash", "-c", "git -c http.sslVerify=false ls-remote https://later.test/repo.git 2>&1")
	}
	if out, code := fetch(); !strings.Contains(out, "Could not resolve host") {
		t.Fatalf("git to later.test, off the list: exit %d\n%s\nwant its name unresolved", code, out)
	}
	s.WaitEvent(v.ID, testenv.WaitMedium, "the note of later.test refused", func(e protocol.Event) bool {
		return e.Kind == protocol.EventNote && e.Blocked == "later.test"
	})

	b := NewBrowser(t)
	s.SignInDev(b)
	allow := `button.allow-host[data-host="later.test"]`
	b.Go(s.URL+"/sessions/"+v.ID, allow)
	b.Screenshot("session-egress-allow.png")
	Eval[bool](b, `(window.confirm = (m) => (window.asked = m, true), document.querySelector('`+allow+`').click(), true)`)
	b.Wait(testenv.WaitMedium, "the host allowed in version 2", `[...document.querySelectorAll("#transcript .ev.note")].some((li) => li.textContent.includes("Allowed in Environment version 2"))`)
	if asked := Eval[string](b, `window.asked`); !strings.Contains(asked, "Allow later.test?") || !strings.Contains(asked, "every Session of this Environment may reach later.test") {
		t.Errorf("the confirmation asked %q, want it to name later.test and every Session of the Environment", asked)
	}
	if out, _, _ := s.kndl("", "env", "show", "--repo", repo); !strings.Contains(out, "egress:             allowlist: *.allowed.test, later.test") {
		t.Fatalf("kndl env show after Allow:\n%s\nwant later.test on the allowlist", out)
	}

	if out, code := fetch(); strings.Contains(out, "unable to access") {
		t.Fatalf("git to later.test once allowed, in the same awake Session: exit %d\n%s", code, out)
	}
	mu.Lock()
	if !slices.Contains(seen, "later.test/repo.git/info/refs") {
		t.Fatalf("the server had %v; want git's request", seen)
	}
	mu.Unlock()
	s.WaitEvent(v.ID, testenv.WaitMedium, "the note that the allowlist applied", func(e protocol.Event) bool {
		return e.Kind == protocol.EventNote && e.Text == "egress: Environment version 2's allowlist: *.allowed.test, later.test applies now"
	})
}
