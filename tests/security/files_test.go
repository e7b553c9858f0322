package security

import (
	"net/http"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
)

// The Sensitive Variable's value of watchedSecret's Repo, and a token of a
// Marked shape nobody told the Hub about.
const secretValue, secretShaped = "deploy-secret-value-5e8b", "ghp_0123456789abcdefghijABCDEFGHIJ012345"

// watched is bob's running Session, on his own Runner, in a Repo with a
// Sensitive Variable, which carol watches.
type watched struct {
	bob, carol *browser
	runner     *fakeRunner
	session    api.Session
}

// watchedSecret makes the team, bob's Repo with DEPLOY_KEY=secretValue
// (Sensitive), his Runner and his running Session there.
func (e *env) watchedSecret() watched {
	e.t.Helper()
	_, bob, carol := e.team()
	repo := e.addRepo(bob, "acme/app")
	e.must(bob.Client, req{method: "PUT", path: "/api/repos/" + repo + "/variables/DEPLOY_KEY", body: `{"value":"` + secretValue + `","sensitive":true}`, origin: "self"}, 200)
	bobs := e.pair(bob, "bobs-box")
	return watched{bob: bob, carol: carol, runner: bobs, session: e.running(bob, bobs)}
}

// TestAWatcherDownloadsAWorkspaceFileMaskedAndItsCreatorAsItIs: a file in
// a Session's Workspace, such as a .env Claude wrote from Sensitive values,
// goes to the Session's Creator byte for byte, and to anyone else with
// access masked as the Session's Events are, by value and by shape; a file
// past what the Hub masks goes to the Creator alone, and the refusal says
// so.
func TestAWatcherDownloadsAWorkspaceFileMaskedAndItsCreatorAsItIs(t *testing.T) {
	e := newEnv(t)
	w := e.watchedSecret()
	bob, carol, bobs, s := w.bob, w.carol, w.runner, w.session
	const value, shaped = secretValue, secretShaped
	dotenv := "DEPLOY_KEY=" + value + "\nGITHUB_TOKEN=" + shaped + "\n"
	bobs.files.Store(".env", []byte(dotenv))
	big := strings.Repeat("x", 16<<20+1)
	bobs.files.Store("big.bin", []byte(big))
	download := func(b *browser, file string) (int, string) {
		return e.do(b.Client, req{method: "GET", path: "/api/sessions/" + s.ID + "/files/" + file})
	}

	if code, got := download(bob, ".env"); code != http.StatusOK || got != dotenv {
		t.Fatalf("bob, the Creator, downloads .env: %d %q, want it byte for byte", code, got)
	}
	code, got := download(carol, ".env")
	if code != http.StatusOK || strings.Contains(got, value) || strings.Contains(got, shaped) || !strings.HasPrefix(got, "DEPLOY_KEY=*") {
		t.Fatalf("carol, a watcher, downloads .env: %d %q, want it masked", code, got)
	}
	if code, got := download(bob, "big.bin"); code != http.StatusOK || got != big {
		t.Fatalf("bob downloads a file past what the Hub masks: %d, %d bytes, want all %d", code, len(got), len(big))
	}
	if code, got := download(carol, "big.bin"); code != http.StatusRequestEntityTooLarge || !strings.Contains(got, "its Creator can download it") {
		t.Fatalf("carol downloads a file past what the Hub masks: %d %.200q, want 413 saying the Creator can", code, got)
	}
}
