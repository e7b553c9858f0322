package security

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
)

// TestASessionsChangesShowMaskedAsItsEventsToEveryoneWhoWatchesIt: the
// diff its Runner sends shows a Sensitive value Claude wrote into a file,
// and a credential's shape, masked wherever they are (a diff line, a file
// name, a commit's subject), to its Creator and to a watcher alike.
func TestASessionsChangesShowMaskedAsItsEventsToEveryoneWhoWatchesIt(t *testing.T) {
	e := newEnv(t)
	w := e.watchedSecret()
	const value, shaped = secretValue, secretShaped
	s := w.session
	w.runner.changes.Store(s.ID, protocol.Changes{Base: "main", BaseCommit: strings.Repeat("a", 40),
		Files: []protocol.ChangedFile{
			{Path: ".env", Status: "added", Additions: 2, Diff: "diff --git a/.env b/.env\n+DEPLOY_KEY=" + value + "\n+GITHUB_TOKEN=" + shaped + "\n"},
			{Path: "keys/" + value + ".txt", Status: "added", Diff: "diff --git a/keys b/keys\n"},
		},
		Commits: []protocol.Commit{{Hash: strings.Repeat("b", 40), Subject: "use " + value, Pushed: true}},
	})
	for _, b := range []*browser{w.bob, w.carol} {
		code, body := e.do(b.Client, req{method: "GET", path: "/api/sessions/" + s.ID + "/changes"})
		var ch api.Changes
		if code != http.StatusOK || json.Unmarshal([]byte(body), &ch) != nil || len(ch.Files) != 2 || len(ch.Commits) != 1 {
			t.Fatalf("%s asks for the changes: %d %.300s", b.login, code, body)
		}
		if strings.Contains(body, value) || strings.Contains(body, shaped) {
			t.Errorf("%s sees a Sensitive value or a token in the changes: %s", b.login, body)
		}
		if !strings.Contains(ch.Files[0].Diff, "+DEPLOY_KEY=*") || ch.Files[1].Path != "keys/"+strings.Repeat("*", len(value))+".txt" || !ch.Commits[0].Pushed {
			t.Errorf("%s: got %+v, want the diff masked and the rest as sent", b.login, ch)
		}
	}
}
