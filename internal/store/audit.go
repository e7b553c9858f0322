package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
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
	Hash    []byte // SHA-256 of the row before's hash and this row (auditHash)
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
// bytes before the first row): the SHA-256 of prev and e's content in a
// canonical encoding, a version tag and then every field but the hash in a
// fixed order, each as its length (8 bytes, big-endian) and its bytes,
// numbers in decimal. No two different rows encode alike, whatever their
// fields hold, so no change to a field goes unseen.
func auditHash(prev []byte, e AuditEntry) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write([]byte("kndl-audit-1"))
	for _, f := range []string{strconv.FormatInt(e.Seq, 10), strconv.FormatInt(e.At.UnixMilli(), 10),
		e.ActorID, e.Actor, e.Via, e.Addr, e.Action, e.Target, e.Detail} {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(f))))
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

// AppendAudit appends e to the audit log, numbered after the last row and
// chained to it, at the store's time, and returns it as stored.
func (s *Store) AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error) {
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		prev := make([]byte, sha256.Size)
		err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&e.Seq, &prev)
		if err != nil && err != sql.ErrNoRows {
			return err
		}
		e.Seq++
		e.At = time.UnixMilli(ms(s.now()))
		e.Hash = auditHash(prev, e)
		_, err = tx.ExecContext(ctx, `INSERT INTO audit_log (`+auditCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.Seq, ms(e.At), e.ActorID, e.Actor, e.Via, e.Addr, e.Action, e.Target, e.Detail, e.Hash)
		return err
	})
	if err != nil {
		return AuditEntry{}, fmt.Errorf("append to the audit log: %w", err)
	}
	return e, nil
}

// AuditEntries lists the audit log newest first: at most limit rows, those
// numbered below before (0: from the newest).
func (s *Store) AuditEntries(ctx context.Context, before int64, limit int) ([]AuditEntry, error) {
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
// SHA-256 of the row before's hash and its own content. A row changed or
// removed from outside breaks the chain at it (or, changed with its hash
// made again, at the row after it). Truncating the newest rows leaves no
// break: compare HeadSeq and HeadHash with a head kept elsewhere, such as
// the operator's log, where the Hub writes every row's.
func (s *Store) VerifyAudit(ctx context.Context) (AuditChain, error) {
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
		want := c.HeadSeq + 1
		c.Entries++
		switch {
		case c.BrokenAt != 0:
		case e.Seq != want:
			c.BrokenAt, c.Reason = want, fmt.Sprintf("row %d is missing (the next row there is %d)", want, e.Seq)
		case !auth.Equal(e.Hash, auditHash(prev, e)):
			c.BrokenAt, c.Reason = e.Seq, fmt.Sprintf("row %d does not follow from its content and the row before it: it, or the row before, was changed", e.Seq)
		}
		c.HeadSeq, c.HeadHash, prev = e.Seq, e.Hash, e.Hash
	}
	return c, rows.Err()
}
