package store

import (
	"context"
	"testing"
)

// TestAuditChainFindsTheFirstRowChangedOrRemoved: each row is chained to
// the one before by hash, so a row changed, changed with its hash made
// again, or removed from outside breaks the chain at it (or, rehashed, at
// the row after), and VerifyAudit names it by its number.
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
			{"a row changed and its hash made again", "rehash", 3},
			{"two rows swapped", `UPDATE audit_log SET action = CASE seq WHEN 2 THEN 'runner.paired' ELSE 'invite.made' END WHERE seq IN (2, 4)`, 2},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s, _ := open(t)
				ctx := context.Background()
				for i, act := range []string{"invite.made", "invite.made", "member.joined", "runner.paired", "variable.set"} {
					e, err := s.AppendAudit(ctx, AuditEntry{ActorID: "u1", Actor: "olivia", Via: "browser", Addr: "10.0.0.1", Action: act, Target: "t"})
					if err != nil || e.Seq != int64(i+1) || len(e.Hash) != 32 {
						t.Fatalf("append %d: %+v %v", i, e, err)
					}
				}
				switch tt.tamper {
				case "":
				case "rehash":
					// Whoever can write the file can hash a changed row again:
					// the row after it no longer follows.
					es, _ := s.AuditEntries(ctx, 3, 2) // 2, then 1
					es[0].Target = "changed"
					if _, err := s.db.Exec(`UPDATE audit_log SET target = ?, hash = ? WHERE seq = 2`, es[0].Target, auditHash(es[1].Hash, es[0])); err != nil {
						t.Fatal(err)
					}
				default:
					if _, err := s.db.Exec(tt.tamper); err != nil {
						t.Fatal(err)
					}
				}
				c, err := s.VerifyAudit(ctx)
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
// next, or changing any field, changes the hash.
func TestAuditHashEncodesEveryFieldApart(t *testing.T) {
	prev := make([]byte, 32)
	base := AuditEntry{Seq: 1, ActorID: "ab", Actor: "c", Via: "cli", Addr: "1.2.3.4", Action: "invite.made", Target: "x", Detail: "y"}
	seen := map[string]string{string(auditHash(prev, base)): "base"}
	for name, e := range map[string]AuditEntry{
		"moved across fields": {Seq: 1, ActorID: "a", Actor: "bc", Via: "cli", Addr: "1.2.3.4", Action: "invite.made", Target: "x", Detail: "y"},
		"another seq":         {Seq: 2, ActorID: "ab", Actor: "c", Via: "cli", Addr: "1.2.3.4", Action: "invite.made", Target: "x", Detail: "y"},
		"another address":     {Seq: 1, ActorID: "ab", Actor: "c", Via: "cli", Addr: "1.2.3.5", Action: "invite.made", Target: "x", Detail: "y"},
		"detail into target":  {Seq: 1, ActorID: "ab", Actor: "c", Via: "cli", Addr: "1.2.3.4", Action: "invite.made", Target: "xy", Detail: ""},
	} {
		h := string(auditHash(prev, e))
		if other, ok := seen[h]; ok {
			t.Errorf("%s hashes as %s does", name, other)
		}
		seen[h] = name
	}
	if string(auditHash(make([]byte, 32), base)) == string(auditHash(append(make([]byte, 31), 1), base)) {
		t.Error("the hash does not depend on the row before")
	}
}
