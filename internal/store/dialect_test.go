package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/testenv"
)

func TestRebindNumbersPlaceholdersOutsideQuotesAndComments(t *testing.T) {
	tests := []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT a FROM t WHERE b = ? AND c IN (?, ?)`, `SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)`},
		{`SELECT '?', "a?b" FROM t WHERE d = ?`, `SELECT '?', "a?b" FROM t WHERE d = $1`},
		{"-- is it?\nSELECT ?", "-- is it?\nSELECT $1"},
		{`SELECT json_extract(data, '$.tool_id') = ?`, `SELECT json_extract(data, '$.tool_id') = $1`},
		{`SELECT 'it''s' || ?`, `SELECT 'it''s' || $1`},
	}
	for _, tt := range tests {
		if got := rebind(tt.in); got != tt.want {
			t.Errorf("rebind(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestHubsStartingTogetherOnANewPostgresDatabase: two Hubs opening one new
// PostgreSQL database at once both start, and each migration is applied
// once (the advisory lock).
func TestHubsStartingTogetherOnANewPostgresDatabase(t *testing.T) {
	url := testenv.Postgres(t)
	ctx := context.Background()
	stores := make([]*Store, 4)
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(ctx, url)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Hub %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	names, _ := migrations.ReadDir("migrations")
	var n, distinct int
	if err := stores[0].db.QueryRow(`SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != len(names) || distinct != n {
		t.Fatalf("schema_migrations holds %d rows (%d versions), want each of the %d migrations once", n, distinct, len(names))
	}
	if _, _, err := stores[1].Runners.CreateRunner(ctx, "box", ""); err != nil {
		t.Fatal(err)
	}
	if rs, err := stores[2].Runners.List(ctx); err != nil || len(rs) != 1 {
		t.Fatalf("another Hub sees %d Runners, %v; want the one made", len(rs), err)
	}
}

// TestWritersTogetherNumberEventsAndTheAuditLogWithoutGaps: Events and
// prompts written to several Sessions, and audit rows, by writers at once
// are numbered 1, 2, 3, … in each Session and in the log, with none twice
// and none missing, and the audit chain holds. SQLite's writers take turns
// by its lock; PostgreSQL's by each Session's and the audit log's.
func TestWritersTogetherNumberEventsAndTheAuditLogWithoutGaps(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		sessions := moreSessions(t, s, 4)
		const writers, each = 8, 12
		var wg sync.WaitGroup
		errs := make(chan error, 3*writers*each)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					x := sessions[(w+i)%len(sessions)]
					_, err := s.Sessions.AppendEvents(ctx, x.ID, []Event{{Kind: "text", Data: json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}})
					errs <- err
					_, err = s.Prompts.EnqueuePrompt(ctx, Prompt{SessionID: x.ID, AuthorID: x.CreatorID, Text: fmt.Sprint(w, i)})
					errs <- err
					_, err = s.Audit.AppendAudit(ctx, testAuditKey, AuditEntry{Actor: fmt.Sprint(w), Via: "hub", Action: "test", Target: fmt.Sprint(i)})
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range sessions {
			evs, err := s.Sessions.Events(ctx, x.ID, 0, 1000)
			if err != nil || len(evs) != writers*each/len(sessions) {
				t.Fatalf("Session %s: %d Events, %v; want %d", x.ID, len(evs), err, writers*each/len(sessions))
			}
			for i, e := range evs {
				if e.Seq != int64(i+1) {
					t.Fatalf("Session %s: Event %d is numbered %d, want %d", x.ID, i, e.Seq, i+1)
				}
			}
			places, err := queryAll(ctx, s.db, func(row scanner) (int64, error) {
				var n int64
				return n, row.Scan(&n)
			}, `SELECT position FROM prompts WHERE session_id = ? ORDER BY position`, x.ID)
			for i, n := range places {
				if n != int64(i+1) {
					t.Fatalf("Session %s: queue places %v, %v; want 1, 2, 3, …", x.ID, places, err)
				}
			}
		}
		c, err := s.Audit.VerifyAudit(ctx, testAuditKey)
		if err != nil || c.BrokenAt != 0 || c.Entries != writers*each || c.HeadSeq != writers*each {
			t.Fatalf("audit chain %+v, %v; want %d rows, unbroken", c, err, writers*each)
		}
	})
}

// moreSessions makes n Sessions of the dev user on one Runner.
func moreSessions(t testing.TB, s *Store, n int) []Session {
	t.Helper()
	x, _ := devSession(t, s)
	out := []Session{x}
	for len(out) < n {
		y, err := s.Sessions.CreateSession(context.Background(), Session{RepoID: x.RepoID, CreatorID: x.CreatorID, RunnerID: x.RunnerID, Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, y)
	}
	return out
}

// TestOneSessionsWriteDoesNotHoldUpAnothersOnPostgres: while a write
// transaction of one Session is open, another Session's Events and the
// audit log are written; that Session's own Events, and a write of the
// whole store (a migration's turn), wait for it.
func TestOneSessionsWriteDoesNotHoldUpAnothersOnPostgres(t *testing.T) {
	s := openAt(t, testenv.Postgres(t))
	ctx := context.Background()
	sessions := moreSessions(t, s, 2)
	a, b := sessions[0], sessions[1]
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.inTx(ctx, sessionTurn(a.ID), func(*sql.Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	defer func() {
		close(release)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	soon, cancel := context.WithTimeout(ctx, testenv.WaitShort)
	defer cancel()
	if _, err := s.Sessions.AppendEvents(soon, b.ID, []Event{{Kind: "text", Data: json.RawMessage(`{}`)}}); err != nil {
		t.Fatalf("another Session's Events, while one Session writes: %v", err)
	}
	if _, err := s.Audit.AppendAudit(soon, testAuditKey, AuditEntry{Via: "hub", Action: "test"}); err != nil {
		t.Fatalf("the audit log, while one Session writes: %v", err)
	}
	for what, write := range map[string]func(context.Context) error{
		"the same Session's Events": func(ctx context.Context) error {
			_, err := s.Sessions.AppendEvents(ctx, a.ID, []Event{{Kind: "text", Data: json.RawMessage(`{}`)}})
			return err
		},
		"a write of the whole store": func(ctx context.Context) error {
			return s.InTx(ctx, func(*sql.Tx) error { return nil })
		},
	} {
		brief, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if err := write(brief); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s, while the Session writes: %v; want it to wait", what, err)
		}
		cancel()
	}
}

// TestTheTranscriptIsReadByItsEventsFields: the queries that read an
// Event's JSON fields (SQLite's json_extract, PostgreSQL's function of that
// name) find a tool call, an open Turn and the subagents running.
func TestTheTranscriptIsReadByItsEventsFields(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, _ := devSession(t, s)
		var evs []Event
		for _, e := range []struct{ kind, data string }{
			{"turn_start", `{}`},
			{"tool_use", `{"tool_id":"t1","name":"Bash"}`},
			{"tool_use", `{"tool_id":"t2","name":"Agent"}`},
			{"subagent_start", `{"agent":"a1","parent":"t2"}`},
			{"subagent_start", `{"agent":"a2"}`},
			{"text", `{"agent":"a2","parent":"t9"}`},
			{"subagent_start", `{"agent":"a3"}`},
			{"subagent_end", `{"agent":"a3"}`},
			{"turn_end", `{"agent":"a1"}`},
			{"note", `{"text":"dropped","dropped":12}`},
		} {
			evs = append(evs, Event{Kind: e.kind, Data: json.RawMessage(e.data)})
		}
		if _, err := s.Sessions.AppendEvents(ctx, x.ID, evs); err != nil {
			t.Fatal(err)
		}
		e, err := s.Sessions.EventByToolID(ctx, x.ID, "tool_use", "t2")
		if err != nil || e.Seq != 3 || string(e.Data) != `{"tool_id":"t2","name":"Agent"}` {
			t.Fatalf("EventByToolID t2 = %d %s, %v; want Event 3 as stored", e.Seq, e.Data, err)
		}
		if _, err := s.Sessions.EventByToolID(ctx, x.ID, "tool_use", "t3"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("EventByToolID t3: %v, want not found", err)
		}
		if open, err := s.Sessions.TurnOpen(ctx, x.ID); err != nil || !open {
			t.Fatalf("TurnOpen = %v, %v; want true (the turn_end is a subagent's)", open, err)
		}
		running, err := s.Sessions.RunningSubagents(ctx, x.ID)
		if got := fmt.Sprint(running); err != nil || got != "map[a1:t2 a2:t9]" {
			t.Fatalf("RunningSubagents = %s, %v; want map[a1:t2 a2:t9]", got, err)
		}
		if u, err := s.Sessions.EventUse(ctx, x.ID); err != nil || u.Rows != 10 || u.Bytes == 0 || u.NoteSeq != 10 || u.Dropped != 12 {
			t.Fatalf("EventUse = %+v, %v; want 10 rows, their bytes, and the note of 12 dropped at 10", u, err)
		}
		if err := s.Sessions.SetEventData(ctx, x.ID, 10, []byte(`{"text":"dropped","dropped":13}`)); err != nil {
			t.Fatal(err)
		}
		if u, err := s.Sessions.EventUse(ctx, x.ID); err != nil || u.Dropped != 13 {
			t.Fatalf("EventUse after the note was brought up = %+v, %v; want 13 dropped", u, err)
		}
	})
}

func TestAPostgresStoreIsBackedUpWithPgDump(t *testing.T) {
	s := openAt(t, testenv.Postgres(t))
	err := s.Backup(context.Background(), t.TempDir()+"/b.db")
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "pg_dump") {
		t.Fatalf("Backup of a PostgreSQL store: %v, want refused naming pg_dump", err)
	}
}

// TestASetupLinkIsUsedOnceByClaimsAtOnce: of claims made together with
// one Setup link, one makes its holder the Owner and the rest are refused,
// on PostgreSQL as on SQLite.
func TestASetupLinkIsUsedOnceByClaimsAtOnce(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		secret := mustSetupLink(t, s)
		const claims = 8
		errs := make([]error, claims)
		var wg sync.WaitGroup
		for i := range claims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.Members.ClaimSetupLink(context.Background(), secret, GitHubIdentity{ID: int64(i + 1), Login: fmt.Sprintf("u%d", i)})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else if !errors.Is(err, errdefs.ErrUnauthorized) {
				t.Errorf("a claim failed otherwise than refused: %v", err)
			}
		}
		if owners, _ := s.Members.List(context.Background()); won != 1 || len(owners) != 1 {
			t.Fatalf("%d claims won and %d Members made, want 1 each", won, len(owners))
		}
	})
}

// benchEngine is an engine a benchmark runs on, as engines are a test's.
type benchEngine struct {
	name   string
	source func(b *testing.B) string
}

// open opens a new store on the engine, closed when the benchmark ends.
func (e benchEngine) open(b *testing.B) *Store {
	s, err := Open(context.Background(), e.source(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchEngines are the engines a benchmark runs on.
var benchEngines = []benchEngine{
	{"sqlite", func(b *testing.B) string { return filepath.Join(b.TempDir(), "hub.db") }},
	{"postgres", func(b *testing.B) string { return testenv.Postgres(b) }},
}

// BenchmarkEightSessionsAppendingAtOnce: 8 writers at once, each
// appending Events one at a time to a Session of its own, as a Hub's
// Sessions record their transcripts. On PostgreSQL they no longer take
// turns with each other.
func BenchmarkEightSessionsAppendingAtOnce(b *testing.B) {
	for _, e := range benchEngines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			sessions := moreSessions(b, s, 8)
			ev := []Event{{Kind: "text", Data: json.RawMessage(`{"text":"a line of the transcript"}`)}}
			var wg sync.WaitGroup
			b.ResetTimer()
			for w, x := range sessions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += len(sessions) {
						if _, err := s.Sessions.AppendEvents(context.Background(), x.ID, ev); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}
