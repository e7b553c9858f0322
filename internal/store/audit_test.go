package store

import (
	"bytes"
	"context"
	"testing"
)

// testAuditKey chains the audit log in tests, as a key derived from
// HUB_SECRETS_KEY does in a Hub.
var testAuditKey = bytes.Repeat([]byte{7}, 32)

// appendAudits appends n rows to s's audit log.
func appendAudits(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		e, err := s.Audit.AppendAudit(context.Background(), testAuditKey, AuditEntry{ActorID: "u1", Actor: "olivia", Via: "browser", Addr: "10.0.0.1",
			Action: []string{"invite.made", "member.joined", "runner.paired", "variable.set"}[i%4], Target: "t"})
		if err != nil || e.Seq != int64(i+1) || len(e.Hash) != 32 {
			t.Fatalf("append %d: %+v %v", i, e, err)
		}
	}
}

// rechainWithoutKey makes the hashes of rows from on again as a Hub did
// before the chain had a key, as anyone can who writes the database.
func rechainWithoutKey(t *testing.T, s *Store, from int64) {
	t.Helper()
	ctx := context.Background()
	es, err := queryAll(ctx, s.db, scanAudit, `SELECT `+auditCols+` FROM audit_log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	prev := make([]byte, 32)
	for _, e := range es {
		if e.Seq >= from {
			e.Hash = unkeyedAuditHash(prev, e)
			if _, err := s.db.Exec(`UPDATE audit_log SET hash = ? WHERE seq = ?`, e.Hash, e.Seq); err != nil {
				t.Fatal(err)
			}
		}
		prev = e.Hash
	}
}

// TestAuditChainFindsTheFirstRowChangedOrRemoved: each row is chained to
// the one before by an HMAC under the Hub's key, so a row changed, changed
// with the chain after it made again without the key, or removed from
// outside breaks the chain at it (changed with its hash made again with the
// key, at the row after), and VerifyAudit names it by its number.
func TestAuditChainFindsTheFirstRowChangedOrRemoved(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		tests := []struct {
			name   string
			tamper string
			broken int64
		}{
			{"intact", ``, 0},
			{"a row's detail changed", `UPDATE audit_log SET detail = 'nothing to see' WHERE seq = 3`, 3},
			{"a row's actor changed", `UPDATE audit_log SET actor = 'mallory' WHERE seq = 2`, 2},
			{"a row's time changed", `UPDATE audit_log SET at = at - 1 WHERE seq = 4`, 4},
			{"a row removed", `DELETE FROM audit_log WHERE seq = 3`, 3},
			{"the first row removed", `DELETE FROM audit_log WHERE seq = 1`, 1},
			{"a row's hash replaced by another's", `UPDATE audit_log SET target = 'x', hash = (SELECT hash FROM audit_log WHERE seq = 1) WHERE seq = 2`, 2},
			{"a row changed and its hash made again with the key", "rehash", 3},
			{"a row changed and the chain after it made again without the key", "rechain", 2},
			{"two rows swapped", `UPDATE audit_log SET action = CASE seq WHEN 2 THEN 'runner.paired' ELSE 'invite.made' END WHERE seq IN (2, 4)`, 2},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s, _ := open(t)
				ctx := context.Background()
				appendAudits(t, s, 5)
				switch tt.tamper {
				case "":
				case "rehash":
					// Who holds the key can hash a changed row again: the
					// row after it no longer follows.
					es, _ := s.Audit.AuditEntries(ctx, 3, 2) // 2, then 1
					es[0].Target = "changed"
					if _, err := s.db.Exec(`UPDATE audit_log SET target = ?, hash = ? WHERE seq = 2`, es[0].Target, auditHash(testAuditKey, es[1].Hash, es[0])); err != nil {
						t.Fatal(err)
					}
				case "rechain":
					// Who writes the database but has no key can only chain
					// the rows again as a Hub did before the chain had one.
					if _, err := s.db.Exec(`UPDATE audit_log SET target = 'changed' WHERE seq = 2`); err != nil {
						t.Fatal(err)
					}
					rechainWithoutKey(t, s, 2)
				default:
					if _, err := s.db.Exec(tt.tamper); err != nil {
						t.Fatal(err)
					}
				}
				c, err := s.Audit.VerifyAudit(ctx, testAuditKey)
				if err != nil {
					t.Fatal(err)
				}
				if c.BrokenAt != tt.broken {
					t.Fatalf("broken at %d (%s), want %d", c.BrokenAt, c.Reason, tt.broken)
				}
				if tt.broken == 0 && (c.Entries != 5 || c.HeadSeq != 5) {
					t.Fatalf("chain %+v: want 5 entries, the newest 5", c)
				}
			})
		}
	})
}

// TestAuditHashEncodesEveryFieldApart: moving text from one field to the
// next, changing any field, or another key changes the hash.
func TestAuditHashEncodesEveryFieldApart(t *testing.T) {
	prev := make([]byte, 32)
	base := AuditEntry{Seq: 1, ActorID: "ab", Actor: "c", Via: "cli", Addr: "1.2.3.4", Action: "invite.made", Target: "x", Detail: "y"}
	seen := map[string]string{string(auditHash(testAuditKey, prev, base)): "base", string(auditHash([]byte("another key"), prev, base)): "another key"}
	for name, e := range map[string]AuditEntry{
		"moved across fields": {Seq: 1, ActorID: "a", Actor: "bc", Via: "cli", Addr: "1.2.3.4", Action: "invite.made", Target: "x", Detail: "y"},
		"another seq":         {Seq: 2, ActorID: "ab", Actor: "c", Via: "cli", Addr: "1.2.3.4", Action: "invite.made", Target: "x", Detail: "y"},
		"another address":     {Seq: 1, ActorID: "ab", Actor: "c", Via: "cli", Addr: "1.2.3.5", Action: "invite.made", Target: "x", Detail: "y"},
		"detail into target":  {Seq: 1, ActorID: "ab", Actor: "c", Via: "cli", Addr: "1.2.3.4", Action: "invite.made", Target: "xy", Detail: ""},
	} {
		h := string(auditHash(testAuditKey, prev, e))
		if other, ok := seen[h]; ok {
			t.Errorf("%s hashes as %s does", name, other)
		}
		seen[h] = name
	}
	if string(auditHash(testAuditKey, make([]byte, 32), base)) == string(auditHash(testAuditKey, append(make([]byte, 31), 1), base)) {
		t.Error("the hash does not depend on the row before")
	}
}

// TestALogChainedWithoutAKeyIsChainedAgainWithItOnce: a log a Hub chained
// before the chain had a key is chained again with the key, once, as far as
// its chain held, with an entry after it saying so and giving the head's
// hash before; a row changed before still breaks the chain where it did.
func TestALogChainedWithoutAKeyIsChainedAgainWithItOnce(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		var got AuditRekey
		record := func(rk AuditRekey) AuditEntry {
			got = rk
			return AuditEntry{Actor: "the Hub's machine", Via: "hub", Action: "audit_log.keyed", Target: "the audit log"}
		}
		tests := []struct {
			name    string
			changed string // SQL run before it is chained again
			want    AuditRekey
		}{
			{"whole", "", AuditRekey{Rows: 3}},
			{"row 2 changed before", `UPDATE audit_log SET detail = 'nothing to see' WHERE seq = 2`, AuditRekey{Rows: 1, BrokenAt: 2}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s, _ := open(t)
				if e, err := s.Audit.KeyAuditChain(ctx, testAuditKey, record); err != nil || e.Seq != 0 {
					t.Fatalf("an empty log: %+v, %v; want nothing done", e, err)
				}
				appendAudits(t, s, 3)
				rechainWithoutKey(t, s, 1)
				es, _ := s.Audit.AuditEntries(ctx, 0, 3)
				oldHead := es[3-tt.want.Rows].Hash
				if tt.changed != "" {
					if _, err := s.db.Exec(tt.changed); err != nil {
						t.Fatal(err)
					}
				}
				e, err := s.Audit.KeyAuditChain(ctx, testAuditKey, record)
				if err != nil || e.Seq != 4 || e.Action != "audit_log.keyed" {
					t.Fatalf("chained again: %+v, %v; want entry 4 saying so", e, err)
				}
				if got.Rows != tt.want.Rows || got.BrokenAt != tt.want.BrokenAt || !bytes.Equal(got.OldHead, oldHead) {
					t.Fatalf("chained again %+v, want %d rows, broken at %d, the head's hash before %x", got, tt.want.Rows, tt.want.BrokenAt, oldHead)
				}
				c, err := s.Audit.VerifyAudit(ctx, testAuditKey)
				if err != nil || c.BrokenAt != tt.want.BrokenAt || c.Entries != 4 || !bytes.Equal(c.HeadHash, e.Hash) {
					t.Fatalf("verify after: %+v, %v; want 4 entries, broken at %d", c, err, tt.want.BrokenAt)
				}
				if e, err := s.Audit.KeyAuditChain(ctx, testAuditKey, record); err != nil || e.Seq != 0 {
					t.Fatalf("a second time: %+v, %v; want nothing done", e, err)
				}
			})
		}
	})
}
