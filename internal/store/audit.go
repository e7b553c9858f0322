package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash"
	"strconv"
	"time"

	"kndl.dev/kndl/internal/auth"
)

// AuditEntry is one row of the audit log: who did what, when and from
// where. It names what it was done to and never holds a secret.
type AuditEntry struct {
	Seq     int64
	At      time.Time
	ActorID string // "" for the Hub's machine, or someone not let in
	Actor   string // their login or name at the time
	Via     string // browser, cli, github, hub
	Addr    string // the client address as the Hub saw it
	Action  string
	Target  string
	Detail  string
	Hash    []byte // HMAC-SHA256 of the row before's hash and this row (auditHash)
}

const auditCols = `seq, at, actor_id, actor, via, addr, action, target, detail, hash`

func scanAudit(row scanner) (AuditEntry, error) {
	var e AuditEntry
	var at int64
	err := row.Scan(&e.Seq, &at, &e.ActorID, &e.Actor, &e.Via, &e.Addr, &e.Action, &e.Target, &e.Detail, &e.Hash)
	e.At = time.UnixMilli(at)
	return e, err
}

// auditHash chains e to the row before it, whose hash is prev (32 zero
// bytes before the first row): the HMAC-SHA256, under key (derived from
// HUB_SECRETS_KEY), of prev and e's content (writeAuditRow). Without the
// key, a changed row's hash can't be made again, nor the chain after it.
func auditHash(key, prev []byte, e AuditEntry) []byte {
	h := hmac.New(sha256.New, key)
	writeAuditRow(h, prev, "kndl-audit-2", e)
	return h.Sum(nil)
}

// unkeyedAuditHash is how rows were chained before the chain had a key:
// the SHA-256 of the same. It is kept only to chain such a log again with
// the key, once (KeyAuditChain).
func unkeyedAuditHash(prev []byte, e AuditEntry) []byte {
	h := sha256.New()
	writeAuditRow(h, prev, "kndl-audit-1", e)
	return h.Sum(nil)
}

// writeAuditRow writes prev and e's content in a canonical encoding: a
// version tag and then every field but the hash in a fixed order, each as
// its length (8 bytes, big-endian) and its bytes, numbers in decimal. No two
// different rows encode alike, whatever their fields hold, so no change to a
// field goes unseen.
func writeAuditRow(h hash.Hash, prev []byte, tag string, e AuditEntry) {
	h.Write(prev)
	h.Write([]byte(tag))
	for _, f := range []string{strconv.FormatInt(e.Seq, 10), strconv.FormatInt(e.At.UnixMilli(), 10),
		e.ActorID, e.Actor, e.Via, e.Addr, e.Action, e.Target, e.Detail} {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(f))))
		h.Write([]byte(f))
	}
}

// AppendAudit appends e to the audit log, numbered after the last row and
// chained to it under key, at the store's time, and returns it as stored.
func (s *Audit) AppendAudit(ctx context.Context, key []byte, e AuditEntry) (AuditEntry, error) {
	err := s.inTx(ctx, auditTurn, func(tx *sql.Tx) error {
		var err error
		e, err = s.appendAudit(ctx, tx, key, e)
		return err
	})
	if err != nil {
		return AuditEntry{}, fmt.Errorf("append to the audit log: %w", err)
	}
	return e, nil
}

func (s *Audit) appendAudit(ctx context.Context, tx *sql.Tx, key []byte, e AuditEntry) (AuditEntry, error) {
	prev := make([]byte, sha256.Size)
	err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&e.Seq, &prev)
	if err != nil && err != sql.ErrNoRows {
		return e, err
	}
	e.Seq++
	e.At = time.UnixMilli(ms(s.now()))
	e.Hash = auditHash(key, prev, e)
	_, err = tx.ExecContext(ctx, `INSERT INTO audit_log (`+auditCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.Seq, ms(e.At), e.ActorID, e.Actor, e.Via, e.Addr, e.Action, e.Target, e.Detail, e.Hash)
	return e, err
}

// AuditRekey is what chaining a log made before the chain had a key again
// with the key did (KeyAuditChain).
type AuditRekey struct {
	Rows    int64  // rows 1 to Rows were chained again
	OldHead []byte // row Rows's hash before, as the operator's log has it
	// BrokenAt is the first row whose chain without a key did not hold,
	// left as it was with the rows after it, so the chain still breaks
	// there; 0 if it held to the end. Reason says why.
	BrokenAt int64
	Reason   string
}

// KeyAuditChain chains again under key an audit log whose rows were chained
// without one (by a Hub before the chain had a key), then appends the entry
// record makes of what it did, in one transaction, so Hubs starting together
// do it once. Rows are chained again only as far as their chain without a
// key holds: a row changed before stays where the chain breaks. A log whose
// first row is chained with the key (or an empty one) is left alone, and
// the entry returned is the zero one.
func (s *Audit) KeyAuditChain(ctx context.Context, key []byte, record func(AuditRekey) AuditEntry) (AuditEntry, error) {
	var done AuditEntry
	err := s.inTx(ctx, auditTurn, func(tx *sql.Tx) error {
		es, err := queryAll(ctx, tx, scanAudit, `SELECT `+auditCols+` FROM audit_log ORDER BY seq`)
		zero := make([]byte, sha256.Size)
		if err != nil || len(es) == 0 || es[0].Seq != 1 || !auth.Equal(es[0].Hash, unkeyedAuditHash(zero, es[0])) {
			return err
		}
		var rk AuditRekey
		prevOld, prevNew := zero, zero
		for _, e := range es {
			if rk.BrokenAt, rk.Reason = auditLink(rk.Rows+1, prevOld, e, unkeyedAuditHash); rk.BrokenAt != 0 {
				break
			}
			rk.Rows, rk.OldHead, prevOld = e.Seq, e.Hash, e.Hash
			prevNew = auditHash(key, prevNew, e)
			if _, err := tx.ExecContext(ctx, `UPDATE audit_log SET hash = ? WHERE seq = ?`, prevNew, e.Seq); err != nil {
				return err
			}
		}
		done, err = s.appendAudit(ctx, tx, key, record(rk))
		return err
	})
	if err != nil {
		return AuditEntry{}, fmt.Errorf("chain the audit log with its key: %w", err)
	}
	return done, nil
}

// AuditEntries lists the audit log newest first: at most limit rows, those
// numbered below before (0: from the newest).
func (s *Audit) AuditEntries(ctx context.Context, before int64, limit int) ([]AuditEntry, error) {
	if before <= 0 {
		before = 1 << 62
	}
	return queryAll(ctx, s.db, scanAudit, `SELECT `+auditCols+` FROM audit_log WHERE seq < ? ORDER BY seq DESC LIMIT ?`, before, limit)
}

// AuditChain is what walking the audit log found: how many rows it holds
// and its last, and the first row where the chain breaks, if it does.
type AuditChain struct {
	Entries  int64
	HeadSeq  int64
	HeadHash []byte
	// BrokenAt is the number of the first row that is missing, or whose
	// hash doesn't follow from the row before and its own content; 0 if
	// the chain holds. Reason says which.
	BrokenAt int64
	Reason   string
}

// VerifyAudit walks the whole audit log from its first row and checks
// every link: each row numbered one past the row before, and its hash the
// HMAC, under key, of the row before's hash and its own content. A row
// changed or removed from outside breaks the chain at it: without the key,
// its hash can't be made again. Truncating the newest rows leaves no break:
// compare HeadSeq and HeadHash with a head kept elsewhere, such as the
// operator's log, where the Hub writes every row's.
func (s *Audit) VerifyAudit(ctx context.Context, key []byte) (AuditChain, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+auditCols+` FROM audit_log ORDER BY seq`)
	if err != nil {
		return AuditChain{}, err
	}
	defer rows.Close()
	var c AuditChain
	prev := make([]byte, sha256.Size)
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return AuditChain{}, err
		}
		c.Entries++
		if c.BrokenAt == 0 {
			c.BrokenAt, c.Reason = auditLink(c.HeadSeq+1, prev, e, func(prev []byte, e AuditEntry) []byte { return auditHash(key, prev, e) })
		}
		c.HeadSeq, c.HeadHash, prev = e.Seq, e.Hash, e.Hash
	}
	return c, rows.Err()
}

// auditLink checks that e is row want, chained by hash to the row before,
// whose hash is prev. It returns the number of the row where the chain
// breaks and why, or 0.
func auditLink(want int64, prev []byte, e AuditEntry, hash func(prev []byte, e AuditEntry) []byte) (int64, string) {
	switch {
	case e.Seq != want:
		return want, fmt.Sprintf("row %d is missing (the next row there is %d)", want, e.Seq)
	case !auth.Equal(e.Hash, hash(prev, e)):
		return e.Seq, fmt.Sprintf("row %d does not follow from its content and the row before it: it, or the row before, was changed", e.Seq)
	}
	return 0, ""
}
