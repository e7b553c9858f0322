package security

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/hub"
)

// auditLog is the whole audit log as the Owner's browser reads it through
// the API, oldest first.
func (e *env) auditLog(owner *browser) []api.AuditEntry {
	e.t.Helper()
	code, body := e.do(owner.Client, req{method: "GET", path: "/api/audit?limit=1000"})
	var es []api.AuditEntry
	if code != http.StatusOK || json.Unmarshal([]byte(body), &es) != nil {
		e.t.Fatalf("GET /api/audit: %d %.300s", code, body)
	}
	for i, j := 0, len(es)-1; i < j; i, j = i+1, j-1 {
		es[i], es[j] = es[j], es[i]
	}
	return es
}

// raw opens the store's file as whoever can write it does: from outside
// the Hub.
func (e *env) raw() *sql.DB {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	return db
}

// exec runs SQL on the store's file from outside the Hub.
func (e *env) exec(query string, args ...any) {
	e.t.Helper()
	if _, err := e.raw().Exec(query, args...); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
}

// kndl runs a kndl command (internal/cli) as this machine's CLI, signed in
// by cliLogin, and returns its output and exit code.
func (e *env) kndl(args ...string) (string, string, int) {
	e.t.Helper()
	return e.kndlIn("", args...)
}

// kndlIn is kndl with stdin.
func (e *env) kndlIn(stdin string, args ...string) (string, string, int) {
	e.t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), args, cli.IO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getenv: os.Getenv})
	return out.String(), errOut.String(), code
}

// must fails unless r gets want.
func (e *env) must(c *http.Client, r req, want int) string {
	e.t.Helper()
	code, body := e.do(c, r)
	if code != want {
		e.t.Fatalf("%s %s: %d %.300s, want %d", r.method, r.path, code, body, want)
	}
	return body
}

// wantEntry is an audit entry a test expects: its action and actor, how
// they came and from where ("" for any), and words its target holds.
type wantEntry struct{ action, actor, via, addr, target string }

// acts does, through the Hub's API as people do, every act the audit log
// records, and returns what it should record, in order, and every secret
// the acts carried (tokens, values, links, cookies), which it must not.
func (e *env) acts() (*browser, []wantEntry, []string) {
	e.t.Helper()
	owner := e.owner()
	want := []wantEntry{{"member.joined", "olivia", "github", "", "@olivia"}}
	at := func() string { return nextAddr() }

	a := at()
	link := e.invite(owner, "bob") // from the loopback
	want = append(want, wantEntry{"invite.made", "olivia", "browser", "127.0.0.1", "@bob"})
	bob := e.browser("bob")
	e.claim(bob, fragment(e.t, link))
	if code, _ := e.signIn(bob); code != http.StatusOK {
		e.t.Fatal("bob did not get in")
	}
	want = append(want, wantEntry{"member.joined", "bob", "github", "", "@bob"})

	var carol api.InviteCreated
	json.Unmarshal([]byte(e.must(owner.Client, req{method: "POST", path: "/api/invites", body: `{"github_login":"carol"}`, origin: "self", from: a}, 201)), &carol)
	want = append(want, wantEntry{"invite.made", "olivia", "browser", a, "@carol"})
	a = at()
	e.must(owner.Client, req{method: "DELETE", path: "/api/invites/" + carol.ID, origin: "self", from: a}, 204)
	want = append(want, wantEntry{"invite.revoked", "olivia", "browser", a, "@carol"})

	if code, _ := e.signIn(e.browser("nora")); code != http.StatusForbidden {
		e.t.Fatal("a stranger got in")
	}
	want = append(want, wantEntry{"signin.refused", "", "github", "", ""})

	a = at()
	var box api.CreatedRunner
	json.Unmarshal([]byte(e.must(owner.Client, req{method: "POST", path: "/api/runners", body: `{"name":"box"}`, origin: "self", from: a}, 201)), &box)
	want = append(want, wantEntry{"runner.paired", "olivia", "browser", a, "box"})
	a = at()
	e.must(owner.Client, req{method: "PUT", path: "/api/runners/" + box.ID + "/shared", body: `{"shared":true}`, origin: "self", from: a}, 204)
	want = append(want, wantEntry{"runner.shared", "olivia", "browser", a, "box"})
	e.must(owner.Client, req{method: "PUT", path: "/api/runners/" + box.ID + "/shared", body: `{"shared":false}`, origin: "self", from: a}, 204)
	want = append(want, wantEntry{"runner.unshared", "olivia", "browser", a, "box"})
	e.must(owner.Client, req{method: "DELETE", path: "/api/runners/" + box.ID, origin: "self", from: a}, 204)
	want = append(want, wantEntry{"runner.revoked", "olivia", "browser", a, "box"})

	e.gh.InstallApp("acme/app")
	e.gh.SetCollaborator("acme/app", "olivia", true)
	var repo api.Repo
	json.Unmarshal([]byte(e.must(owner.Client, req{method: "POST", path: "/api/repos", body: `{"url":"` + e.gh.RepoURL("acme/app") + `"}`, origin: "self"}, 200)), &repo)
	const repoValue, sharedValue, setupToken = "repo-secret-value-7f3a", "shared-secret-value-9c1d", "sk-ant-oat01-audit-canary-setup-token-0123456789"
	a = at()
	e.must(owner.Client, req{method: "PUT", path: "/api/repos/" + repo.ID + "/variables/DEPLOY_KEY", body: `{"value":"` + repoValue + `","sensitive":true}`, origin: "self", from: a}, 200)
	e.must(owner.Client, req{method: "DELETE", path: "/api/repos/" + repo.ID + "/variables/DEPLOY_KEY", origin: "self", from: a}, 204)
	e.must(owner.Client, req{method: "PUT", path: "/api/variables/NPM_TOKEN", body: `{"value":"` + sharedValue + `","sensitive":true}`, origin: "self", from: a}, 200)
	e.must(owner.Client, req{method: "PUT", path: "/api/repos/" + repo.ID + "/links/NPM_TOKEN", origin: "self", from: a}, 204)
	e.must(owner.Client, req{method: "DELETE", path: "/api/repos/" + repo.ID + "/links/NPM_TOKEN", origin: "self", from: a}, 204)
	e.must(owner.Client, req{method: "DELETE", path: "/api/variables/NPM_TOKEN", origin: "self", from: a}, 204)
	want = append(want,
		wantEntry{"variable.set", "olivia", "browser", a, "DEPLOY_KEY in " + repo.URL},
		wantEntry{"variable.removed", "olivia", "browser", a, "DEPLOY_KEY in " + repo.URL},
		wantEntry{"variable.set", "olivia", "browser", a, "Shared NPM_TOKEN"},
		wantEntry{"variable.linked", "olivia", "browser", a, "Shared NPM_TOKEN"},
		wantEntry{"variable.unlinked", "olivia", "browser", a, "Shared NPM_TOKEN"},
		wantEntry{"variable.removed", "olivia", "browser", a, "Shared NPM_TOKEN"})

	a = at()
	e.must(bob.Client, req{method: "PUT", path: "/api/account/claude-token", body: `{"token":"` + setupToken + `"}`, origin: "self", from: a}, 204)
	e.must(bob.Client, req{method: "DELETE", path: "/api/account/claude-token", origin: "self", from: a}, 204)
	want = append(want, wantEntry{"setup_token.stored", "bob", "browser", a, "bob"}, wantEntry{"setup_token.removed", "bob", "browser", a, "bob"})
	var bobsBox api.CreatedRunner
	json.Unmarshal([]byte(e.must(bob.Client, req{method: "POST", path: "/api/runners", body: `{"name":"bobs-box"}`, origin: "self", from: a}, 201)), &bobsBox)
	want = append(want, wantEntry{"runner.paired", "bob", "browser", a, "bobs-box"})

	cliToken := e.cliLogin(owner)
	want = append(want, wantEntry{"cli_login.approved", "olivia", "browser", "127.0.0.1", "laptop"})
	a = at()
	var dave api.InviteCreated
	json.Unmarshal([]byte(e.must(nil, req{method: "POST", path: "/api/invites", body: `{"github_login":"dave"}`, bearer: cliToken, from: a}, 201)), &dave)
	want = append(want, wantEntry{"invite.made", "olivia", "cli", a, "@dave"})
	e.must(nil, req{method: "DELETE", path: "/api/members/" + e.userOf("bob").ID, bearer: cliToken, from: a}, 204)
	want = append(want, wantEntry{"member.removed", "olivia", "cli", a, "@bob"})

	secrets := []string{link, fragment(e.t, link), carol.URL, fragment(e.t, carol.URL), dave.URL, fragment(e.t, dave.URL),
		box.Token, bobsBox.Token, repoValue, sharedValue, setupToken, cliToken, e.cookieOf(owner), e.cookieOf(bob)}
	return owner, want, secrets
}

// TestEveryActThatChangesWhoCanDoWhatIsAudited: Members invited, joined and
// removed, Invites made and revoked, Runners paired, shared, unshared and
// revoked, Variables set, removed, linked and unlinked, setup tokens stored
// and removed, CLI logins approved and sign-ins refused are each recorded,
// in order, with who did it, how they came, from which address and to
// what.
func TestEveryActThatChangesWhoCanDoWhatIsAudited(t *testing.T) {
	e := newEnv(t)
	owner, want, _ := e.acts()
	got := e.auditLog(owner)
	i := 0
	for _, g := range got {
		if i < len(want) && g.Action == want[i].action {
			w := want[i]
			if g.Actor != w.actor || g.Via != w.via || (w.addr != "" && g.Addr != w.addr) || !strings.Contains(g.Target, w.target) || g.At.IsZero() || g.Addr == "" {
				t.Errorf("entry %d: %+v, want %+v", g.Seq, g, w)
			}
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("the audit log lacks %+v (and what follows) in order:\n%s", want[i], dumpAudit(got))
	}
	for n, g := range got {
		if g.Seq != int64(n+1) || len(g.Hash) != 64 {
			t.Errorf("entry %d of the log is numbered %d with hash %q, want %d and a SHA-256", n, g.Seq, g.Hash, n+1)
		}
	}
	for _, g := range got {
		switch {
		case g.Action == "signin.refused" && (g.ActorID != "" || strings.Contains(g.Detail+g.Target+g.Actor, "nora")):
			t.Errorf("the refusal names who was refused: %+v", g)
		case g.Action == "member.removed" && !strings.Contains(g.Detail, "bobs-box"):
			t.Errorf("bob's removal %+v does not name the Runner revoked with him", g)
		}
	}
}

func dumpAudit(es []api.AuditEntry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "  %d %s %s(%s) %s %q %q\n", e.Seq, e.Action, e.Actor, e.Via, e.Addr, e.Target, e.Detail)
	}
	return b.String()
}

// anyKndlToken is the shape of every token of kndl's own.
var anyKndlToken = regexp.MustCompile(`kndl[a-z]?_[A-Za-z0-9_-]{20,}`)

// TestNoAuditEntryHoldsASecret: no entry, as the API, the page, kndl audit
// or the store's own rows hold it, carries a token, a value, a link or a
// cookie of the acts it records.
func TestNoAuditEntryHoldsASecret(t *testing.T) {
	e := newEnv(t)
	owner, _, secrets := e.acts()
	e.cliLogin(owner)
	apiJSON := e.must(owner.Client, req{method: "GET", path: "/api/audit?limit=1000"}, 200)
	page := e.must(owner.Client, req{method: "GET", path: "/audit"}, 200)
	out, errOut, code := e.kndl("audit", "--json", "--limit", "1000")
	if code != 0 || !strings.Contains(out, "runner.paired") {
		t.Fatalf("kndl audit: %d %s %s", code, out, errOut)
	}
	rows, err := e.raw().Query(`SELECT actor_id || ' ' || actor || ' ' || via || ' ' || addr || ' ' || action || ' ' || target || ' ' || detail FROM audit_log`)
	if err != nil {
		t.Fatal(err)
	}
	var stored strings.Builder
	for rows.Next() {
		var s string
		rows.Scan(&s)
		stored.WriteString(s + "\n")
	}
	rows.Close()
	for what, text := range map[string]string{"the API": apiJSON, "the page": page, "kndl audit": out, "the store's rows": stored.String()} {
		if !strings.Contains(text, "invite.made") {
			t.Fatalf("%s shows no audit entries: %.300s", what, text)
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(text, s) {
				t.Errorf("%s holds the secret %q", what, s)
			}
		}
		if m := anyKndlToken.FindString(text); m != "" {
			t.Errorf("%s holds a kndl token %q", what, m)
		}
	}
}

// TestOnlyTheOwnerReadsTheAuditLog: the audit log, its check and its page
// answer the Owner, and refuse a Member with 403 whether from a browser or
// the CLI; the navigation links it for the Owner alone.
func TestOnlyTheOwnerReadsTheAuditLog(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	bob := e.member(owner, "bob")
	bobsCLI, _ := e.store.Signins.CreateCLIToken(context.Background(), e.userOf("bob").ID, "laptop")
	for _, path := range []string{"/api/audit", "/api/audit/verify", "/audit"} {
		if code, body := e.do(bob.Client, req{method: "GET", path: path}); code != http.StatusForbidden {
			t.Errorf("a Member's browser GET %s: %d %.200s, want 403", path, code, body)
		}
		if code, body := e.do(owner.Client, req{method: "GET", path: path}); code != http.StatusOK {
			t.Errorf("the Owner GET %s: %d %.200s, want 200", path, code, body)
		}
	}
	for _, path := range []string{"/api/audit", "/api/audit/verify"} {
		if code, body := e.do(nil, req{method: "GET", path: path, bearer: bobsCLI}); code != http.StatusForbidden {
			t.Errorf("a Member's CLI GET %s: %d %.200s, want 403", path, code, body)
		}
	}
	if page := e.must(owner.Client, req{method: "GET", path: "/members"}, 200); !strings.Contains(page, `href="/audit"`) {
		t.Error("the Owner's navigation has no link to the audit log")
	}
	if page := e.must(bob.Client, req{method: "GET", path: "/members"}, 200); strings.Contains(page, `href="/audit"`) {
		t.Error("a Member's navigation links the audit log")
	}
}

// TestTheAuditChainFindsARowRemovedOrChanged: each entry is chained to the
// one before by SHA-256, so an entry changed or removed in the store's file
// from outside the Hub is found: GET /api/audit/verify, kndl audit verify
// and the page each name the first broken link by its number.
func TestTheAuditChainFindsARowRemovedOrChanged(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	e.member(owner, "bob")
	e.member(owner, "carol")
	e.cliLogin(owner)
	verify := func() api.AuditChain {
		t.Helper()
		var c api.AuditChain
		if err := json.Unmarshal([]byte(e.must(owner.Client, req{method: "GET", path: "/api/audit/verify"}, 200)), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := verify()
	if c.BrokenAt != 0 || c.Entries < 6 || c.HeadSeq != c.Entries || len(c.HeadHash) != 64 {
		t.Fatalf("an untouched log: %+v, want the chain whole", c)
	}
	if out, errOut, code := e.kndl("audit", "verify"); code != 0 || !strings.Contains(out, "chain holds") || !strings.Contains(out, c.HeadHash) {
		t.Fatalf("kndl audit verify on an untouched log: %d %s %s", code, out, errOut)
	}
	steps := []struct {
		what, query string
		broken      int64
	}{
		{"entry 4's target changed", `UPDATE audit_log SET target = '@mallory' WHERE seq = 4`, 4},
		{"entry 2 removed as well", `DELETE FROM audit_log WHERE seq = 2`, 2},
	}
	for _, s := range steps {
		e.exec(s.query)
		if got := verify(); got.BrokenAt != s.broken || got.Reason == "" {
			t.Fatalf("%s: verify says %+v, want broken at %d", s.what, got, s.broken)
		}
		_, errOut, code := e.kndl("audit", "verify")
		if code != 1 || !strings.Contains(errOut, fmt.Sprintf("breaks at entry %d", s.broken)) {
			t.Fatalf("%s: kndl audit verify: %d %s, want exit 1 naming entry %d", s.what, code, errOut, s.broken)
		}
		if page := e.must(owner.Client, req{method: "GET", path: "/audit"}, 200); !strings.Contains(page, fmt.Sprintf("breaks at entry %d", s.broken)) {
			t.Fatalf("%s: the page does not say where the chain breaks", s.what)
		}
	}
}

// rechainWithoutKey changes nothing but the audit chain's hashes from entry
// from on, making each again as the SHA-256 of the entry before's hash and
// the entry's content in the Hub's canonical encoding: how a Hub chained
// them before the chain had a key, and all that anyone who can write the
// store's file but lacks HUB_SECRETS_KEY can do.
func (e *env) rechainWithoutKey(from int64) {
	e.t.Helper()
	db := e.raw()
	rows, err := db.Query(`SELECT seq, at, actor_id, actor, via, addr, action, target, detail, hash FROM audit_log ORDER BY seq`)
	if err != nil {
		e.t.Fatal(err)
	}
	type row struct {
		seq, at int64
		fields  [7]string
		hash    []byte
	}
	var rs []row
	for rows.Next() {
		var r row
		f := &r.fields
		if err := rows.Scan(&r.seq, &r.at, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &r.hash); err != nil {
			e.t.Fatal(err)
		}
		rs = append(rs, r)
	}
	rows.Close()
	prev := make([]byte, sha256.Size)
	for _, r := range rs {
		if r.seq >= from {
			h := sha256.New()
			h.Write(prev)
			h.Write([]byte("kndl-audit-1"))
			for _, f := range append([]string{strconv.FormatInt(r.seq, 10), strconv.FormatInt(r.at, 10)}, r.fields[:]...) {
				h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(f))))
				h.Write([]byte(f))
			}
			r.hash = h.Sum(nil)
			if _, err := db.Exec(`UPDATE audit_log SET hash = ? WHERE seq = ?`, r.hash, r.seq); err != nil {
				e.t.Fatal(err)
			}
		}
		prev = r.hash
	}
}

// verifyAudit is GET /api/audit/verify, as the Owner asks it.
func (e *env) verifyAudit(owner *browser) api.AuditChain {
	e.t.Helper()
	var c api.AuditChain
	if err := json.Unmarshal([]byte(e.must(owner.Client, req{method: "GET", path: "/api/audit/verify"}, 200)), &c); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// TestTheAuditChainCantBeMadeAgainWithoutTheKey: the chain is an HMAC under
// a key derived from HUB_SECRETS_KEY, so someone who can write the store but
// lacks the key, and changes an entry and makes the chain after it again
// as plain SHA-256, is still found at that entry by verify.
func TestTheAuditChainCantBeMadeAgainWithoutTheKey(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	e.member(owner, "bob")
	e.member(owner, "carol")
	if c := e.verifyAudit(owner); c.BrokenAt != 0 || c.Entries < 4 {
		t.Fatalf("an untouched log: %+v, want the chain whole", c)
	}
	e.exec(`UPDATE audit_log SET target = '@mallory' WHERE seq = 3`)
	e.rechainWithoutKey(3)
	if c := e.verifyAudit(owner); c.BrokenAt != 3 {
		t.Fatalf("entry 3 changed and the chain after it made again without the key: verify says %+v, want broken at 3", c)
	}
}

// TestAHubChainsALogFromBeforeTheKeyAgainWithItAtStart: a log chained
// without a key, as a Hub did before the chain had one, is chained again
// with the key when a Hub starts on it, once, and an entry after it says so
// and gives the hash its newest entry had, which the operator's log has too.
func TestAHubChainsALogFromBeforeTheKeyAgainWithItAtStart(t *testing.T) {
	e := newEnv(t)
	owner := e.owner()
	e.member(owner, "bob")
	e.rechainWithoutKey(1)
	before := e.auditLog(owner)
	if c := e.verifyAudit(owner); c.BrokenAt != 1 {
		t.Fatalf("a log chained without the key: verify says %+v, want broken at 1", c)
	}
	for range 2 { // a restart, and another
		h, err := hub.New(e.cfg, e.store)
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
	after := e.auditLog(owner)
	last, head := after[len(after)-1], before[len(before)-1]
	if len(after) != len(before)+1 || last.Action != "audit_log.keyed" || last.Via != "hub" ||
		!strings.Contains(last.Detail, fmt.Sprintf("entries 1 to %d chained again", head.Seq)) || !strings.Contains(last.Detail, head.Hash) {
		t.Fatalf("after two starts the log ends %+v (%d entries, %d before); want one entry saying entries 1 to %d were chained again, naming hash %s",
			last, len(after), len(before), head.Seq, head.Hash)
	}
	if c := e.verifyAudit(owner); c.BrokenAt != 0 || c.Entries != int64(len(after)) {
		t.Fatalf("after the start: verify says %+v, want the chain whole", c)
	}
}
