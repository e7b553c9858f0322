package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/testenv"
)

// filled is a SQLite store with rows in its tables, made through the
// store's own methods, and the Session they hang off.
func filled(t *testing.T) (*Store, Session) {
	t.Helper()
	s, _ := open(t)
	ctx := context.Background()
	x, u := devSession(t, s)
	_, err := s.Sessions.AppendEvents(ctx, x.ID, []Event{
		{Kind: "turn_start", Data: json.RawMessage(`{}`)},
		{Kind: "text", Data: json.RawMessage(`{"text":"héllo \u0001","n":1}`)},
		{Kind: "turn_end", Data: json.RawMessage(`{}`)},
	})
	must(t, err)
	_, err = s.Prompts.EnqueuePrompt(ctx, Prompt{SessionID: x.ID, AuthorID: u.ID, Sealed: []byte{0, 1, 2, 0xff, 'p'}})
	must(t, err)
	_, err = s.Prompts.EnqueuePrompt(ctx, Prompt{SessionID: x.ID, AuthorID: u.ID, Text: "second"})
	must(t, err)
	_, err = s.Prompts.PutAttachment(ctx, Attachment{SessionID: x.ID, Name: "a.bin", File: "a.bin", MediaType: "application/octet-stream", CreatedBy: u.ID},
		bytes.NewReader(bytes.Repeat([]byte{0, 0xfe}, chunkBytes)), 1<<30)
	must(t, err)
	_, _, err = s.Variables.SetVariable(ctx, Variable{RepoID: x.RepoID, Name: "DB_URL", Sealed: []byte{9, 0, 8, 0xaa}, Sensitive: true, SetBy: u.ID})
	must(t, err)
	_, _, err = s.Variables.SetVariable(ctx, Variable{RepoID: x.RepoID, Name: "REGION", Value: "eu", AtBuild: true, SetBy: u.ID})
	must(t, err)
	_, _, err = s.Variables.SetVariable(ctx, Variable{Name: "NPM_TOKEN", Sealed: []byte("sealed"), Sensitive: true, SetBy: u.ID})
	must(t, err)
	must(t, s.Variables.LinkVariable(ctx, x.RepoID, "NPM_TOKEN", u.ID))
	must(t, s.Members.SetUserSecret(ctx, u.ID, "claude-token", []byte{0xde, 0xad, 0, 0xbe, 0xef}))
	must(t, s.Variables.AddSessionMask(ctx, x.ID, []byte{1, 0, 1}))
	for _, act := range []string{"invite.made", "member.joined", "runner.paired"} {
		_, err := s.Audit.AppendAudit(ctx, testAuditKey, AuditEntry{ActorID: u.ID, Actor: "dev", Via: "browser", Addr: "10.0.0.1", Action: act, Target: "t"})
		must(t, err)
	}
	_, err = s.MCP.CreateMCPServer(ctx, MCPServer{ID: "hub:docs", Name: "Docs", URL: "https://mcp.example/", Auth: "headers",
		Headers: []HeaderSecret{{Key: "token", Header: "Authorization", Format: "Bearer {value}"}}, CreatedBy: u.ID})
	must(t, err)
	_, err = s.MCP.CreateInstallation(ctx, Installation{ID: "docs", ServerID: "hub:docs", Name: "Docs", Global: true, CreatedBy: u.ID}, u.ID, "installed it")
	must(t, err)
	must(t, s.MCP.SetInstallationValue(ctx, "docs", "token", []byte{7, 0, 7}, u.ID))
	_, err = s.Environments.ApplyDraft(ctx, EnvironmentVersion{RepoID: x.RepoID, Config: `{"cpus":2}`, CreatedBy: u.ID}, 0)
	must(t, err)
	_, err = s.Signins.CreateSignin(ctx, u.ID)
	must(t, err)
	_, _, err = s.Branches.AddSessionBranches(ctx, x.ID, []string{"kndl/fix"}, time.UnixMilli(1700000000000), 1)
	must(t, err)
	must(t, s.Sessions.MoveSession(ctx, x.ID, x.State, Asleep, "idle", false))
	must(t, s.Limits.SetWaiting(ctx, x.ID))
	_, err = s.Sessions.AppendEvents(ctx, x.ID, []Event{{Kind: "text", Data: json.RawMessage(`{}`),
		Reply: &Reply{Message: "msg_1", Usage: Usage{Model: "sonnet", Input: 3, Output: 5, CacheRead: 7, CacheWrite: 11}}}})
	must(t, err)
	must(t, s.Threads.AddThread(ctx, Thread{SessionID: x.ID, Repo: "o/r", Issue: 4, ReplyID: 9}))
	must(t, s.Threads.SetThreadNote(ctx, x.ID, "a check sent back"))
	for _, d := range []struct {
		id   string
		work []byte
	}{{"d-1", []byte{0, '{', 0xff}}, {"d-2", nil}, {"d-3", []byte(`{}`)}} {
		_, err := s.Threads.TakeDelivery(ctx, d.id, "issues", d.id, d.work)
		must(t, err)
	}
	_, err = s.Branches.CountFix(ctx, "o/r", 7)
	must(t, err)
	w, err := s.Notify.AddNotifyWebhook(ctx, NotifyWebhook{ID: "wh", UserID: u.ID, URL: "https://hooks.example/", Format: "json", Secret: []byte{5, 0, 5}})
	must(t, err)
	must(t, s.Notify.QueueNotifications(ctx, []Notification{{WebhookID: w.ID, Kind: "question", Body: []byte(`{"q":1}`)}}))
	return s, x
}

// rowsOf reads every row of table, sorted, with its values as the driver
// gives them: int64, string, []byte or nil.
func rowsOf(t *testing.T, s *Store, table string, cols []string) []string {
	t.Helper()
	rows, err := s.db.Query(`SELECT ` + strings.Join(cols, ", ") + ` FROM ` + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%#v", vals))
	}
	sort.Strings(out)
	return out
}

// TestAStoreCopiedToPostgresHoldsTheSameRows: every table's rows reach
// PostgreSQL as they were, sealed values byte for byte, the counts are
// checked, the Hub's reads give back the same, numbering goes on past the
// copied rows, and a target holding rows is refused.
func TestAStoreCopiedToPostgresHoldsTheSameRows(t *testing.T) {
	from, x := filled(t)
	ctx := context.Background()
	to := openAt(t, testenv.Postgres(t))
	counts, err := from.CopyTo(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := from.db.Begin()
	tables, err := sqliteTables(ctx, tx)
	tx.Rollback()
	if err != nil || len(counts) != len(tables) {
		t.Fatalf("copied %d tables, %v; want the %d there are", len(counts), err, len(tables))
	}
	for _, c := range counts {
		rows, err := from.db.Query(`SELECT * FROM ` + c.Table + ` LIMIT 0`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		rows.Close()
		want, got := rowsOf(t, from, c.Table, cols), rowsOf(t, to, c.Table, cols)
		if !reflect.DeepEqual(got, want) || int64(len(want)) != c.Rows {
			t.Errorf("table %s: PostgreSQL holds %v, want %v (%d counted)", c.Table, got, want, c.Rows)
		}
	}
	for _, table := range []string{"users", "sessions", "events", "prompts", "attachment_chunks", "variables", "user_secrets", "audit_log", "installation_values", "installation_log",
		"session_usage", "webhook_deliveries", "session_threads", "pull_fixes", "notify_webhooks", "notify_outbox"} {
		if slicesIndex(counts, table) < 0 {
			t.Errorf("the filled store left %s empty: fill it, so its copy is checked", table)
		}
	}

	// What the Hub reads back.
	fromEvs, _ := from.Sessions.Events(ctx, x.ID, 0, 100)
	toEvs, err := to.Sessions.Events(ctx, x.ID, 0, 100)
	if err != nil || !reflect.DeepEqual(toEvs, fromEvs) {
		t.Fatalf("the Session's Events in PostgreSQL: %v, %v; want %v", toEvs, err, fromEvs)
	}
	got, err := to.Sessions.SessionByID(ctx, x.ID)
	if want, _ := from.Sessions.SessionByID(ctx, x.ID); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("the Session in PostgreSQL: %+v, %v; want %+v", got, err, want)
	}
	if got.Place != 1 {
		t.Fatalf("the Session's place in line in PostgreSQL: %d, want 1", got.Place)
	}
	fromNext, _, _ := from.Threads.NextDelivery(ctx)
	if d, ok, err := to.Threads.NextDelivery(ctx); err != nil || !ok || !reflect.DeepEqual(d, fromNext) {
		t.Fatalf("the next delivery's work in PostgreSQL: %+v, %v, %v; want %+v", d, ok, err, fromNext)
	}
	if u, err := to.Usage.SessionUsage(ctx, x.ID); err != nil || len(u) != 1 || u[0].CacheWrite != 11 {
		t.Fatalf("the Session's usage in PostgreSQL: %+v, %v; want the one reply's", u, err)
	}
	if n, err := to.Branches.CountFix(ctx, "o/r", 7); err != nil || n != 2 {
		t.Fatalf("the pull request's next failure in PostgreSQL: counted %d, %v; want 2", n, err)
	}
	if sealed, _, err := to.Members.UserSecret(ctx, x.CreatorID, "claude-token"); err != nil || !bytes.Equal(sealed, []byte{0xde, 0xad, 0, 0xbe, 0xef}) {
		t.Fatalf("the sealed secret in PostgreSQL: %x, %v; want it byte for byte", sealed, err)
	}
	vs, err := to.Variables.SessionVariables(ctx, x.RepoID)
	if want, _ := from.Variables.SessionVariables(ctx, x.RepoID); err != nil || !reflect.DeepEqual(vs, want) {
		t.Fatalf("the Session's Variables in PostgreSQL: %+v, %v; want %+v", vs, err, want)
	}
	ps, err := to.Prompts.List(ctx, x.ID)
	if err != nil || len(ps) != 2 || !bytes.Equal(ps[0].Sealed, []byte{0, 1, 2, 0xff, 'p'}) || ps[1].Text != "second" {
		t.Fatalf("the queue in PostgreSQL: %+v, %v; want the sealed prompt, then the plain one", ps, err)
	}
	fromChain, _ := from.Audit.VerifyAudit(ctx, testAuditKey)
	toChain, err := to.Audit.VerifyAudit(ctx, testAuditKey)
	if err != nil || toChain.BrokenAt != 0 || toChain.HeadSeq != 3 || !bytes.Equal(toChain.HeadHash, fromChain.HeadHash) {
		t.Fatalf("the audit chain in PostgreSQL: %+v, %v; want it whole, its head as in SQLite", toChain, err)
	}
	if e, err := to.Audit.AppendAudit(ctx, testAuditKey, AuditEntry{Actor: "hub", Via: "hub", Action: "store.migrated"}); err != nil || e.Seq != 4 {
		t.Fatalf("the next audit row: %d, %v; want 4", e.Seq, err)
	}
	must(t, to.MCP.LogInstallationChange(ctx, "docs", x.CreatorID, "changed it"))
	log, err := to.MCP.InstallationLog(ctx, x.RepoID)
	if n := len(log); err != nil || n < 2 || log[n-1].What != "changed it" || log[n-1].Seq != log[n-2].Seq+1 {
		t.Fatalf("the Installation log after a change in PostgreSQL: %+v, %v; want a new row numbered after the copied one", log, err)
	}

	if _, err := from.CopyTo(ctx, to); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a copy into a store with rows: %v, want refused as not empty", err)
	}
}

func slicesIndex(counts []TableCount, table string) int {
	for i, c := range counts {
		if c.Table == table && c.Rows > 0 {
			return i
		}
	}
	return -1
}

// TestACopyKeepsTextInABlobColumnAsItsBytes: SQLite lets a BLOB column
// hold text; PostgreSQL's BYTEA gets its bytes, not an error or an
// escaped form.
func TestACopyKeepsTextInABlobColumnAsItsBytes(t *testing.T) {
	from, _ := open(t)
	ctx := context.Background()
	x, _ := devSession(t, from)
	if _, err := from.db.Exec(`INSERT INTO session_masks (session_id, sealed) VALUES (?, 'as text \x')`, x.ID); err != nil {
		t.Fatal(err)
	}
	to := openAt(t, testenv.Postgres(t))
	if _, err := from.CopyTo(ctx, to); err != nil {
		t.Fatal(err)
	}
	masks, err := to.Variables.SessionMasks(ctx, x.ID)
	if err != nil || len(masks) != 1 || string(masks[0]) != `as text \x` {
		t.Fatalf("the mask in PostgreSQL: %q, %v; want the text's bytes", masks, err)
	}
}
