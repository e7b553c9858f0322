package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

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
	if _, _, err := stores[1].CreateRunner(ctx, "box", ""); err != nil {
		t.Fatal(err)
	}
	if rs, err := stores[2].Runners(ctx); err != nil || len(rs) != 1 {
		t.Fatalf("another Hub sees %d Runners, %v; want the one made", len(rs), err)
	}
}

// TestWritersTogetherNumberEventsAndTheAuditLogWithoutGaps: Events
// appended to one Session, and audit rows, by writers at once are numbered
// 1, 2, 3, … with none twice and none missing, and the audit chain holds.
// SQLite's writers take turns by its lock; PostgreSQL's by the store's.
func TestWritersTogetherNumberEventsAndTheAuditLogWithoutGaps(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, _ := devSession(t, s)
		const writers, each = 8, 10
		var wg sync.WaitGroup
		errs := make(chan error, 2*writers*each)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					_, err := s.AppendEvents(ctx, x.ID, []Event{{Kind: "text", Data: json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}})
					errs <- err
					_, err = s.AppendAudit(ctx, testAuditKey, AuditEntry{Actor: fmt.Sprint(w), Via: "hub", Action: "test", Target: fmt.Sprint(i)})
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
		evs, err := s.Events(ctx, x.ID, 0, 1000)
		if err != nil || len(evs) != writers*each {
			t.Fatalf("%d Events, %v; want %d", len(evs), err, writers*each)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("Event %d is numbered %d, want %d", i, e.Seq, i+1)
			}
		}
		c, err := s.VerifyAudit(ctx, testAuditKey)
		if err != nil || c.BrokenAt != 0 || c.Entries != writers*each || c.HeadSeq != writers*each {
			t.Fatalf("audit chain %+v, %v; want %d rows, unbroken", c, err, writers*each)
		}
	})
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
		} {
			evs = append(evs, Event{Kind: e.kind, Data: json.RawMessage(e.data)})
		}
		if _, err := s.AppendEvents(ctx, x.ID, evs); err != nil {
			t.Fatal(err)
		}
		e, err := s.EventByToolID(ctx, x.ID, "tool_use", "t2")
		if err != nil || e.Seq != 3 || string(e.Data) != `{"tool_id":"t2","name":"Agent"}` {
			t.Fatalf("EventByToolID t2 = %d %s, %v; want Event 3 as stored", e.Seq, e.Data, err)
		}
		if _, err := s.EventByToolID(ctx, x.ID, "tool_use", "t3"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("EventByToolID t3: %v, want not found", err)
		}
		if open, err := s.TurnOpen(ctx, x.ID); err != nil || !open {
			t.Fatalf("TurnOpen = %v, %v; want true (the turn_end is a subagent's)", open, err)
		}
		running, err := s.RunningSubagents(ctx, x.ID)
		if got := fmt.Sprint(running); err != nil || got != "map[a1:t2 a2:t9]" {
			t.Fatalf("RunningSubagents = %s, %v; want map[a1:t2 a2:t9]", got, err)
		}
		if n, err := s.EventBytes(ctx, x.ID); err != nil || n == 0 {
			t.Fatalf("EventBytes = %d, %v", n, err)
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
				_, errs[i] = s.ClaimSetupLink(context.Background(), secret, GitHubIdentity{ID: int64(i + 1), Login: fmt.Sprintf("u%d", i)})
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
		if owners, _ := s.Members(context.Background()); won != 1 || len(owners) != 1 {
			t.Fatalf("%d claims won and %d Members made, want 1 each", won, len(owners))
		}
	})
}
