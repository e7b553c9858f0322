package hub

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/web"
)

// auditAPI serves the audit log: its list, its check and its page..
type auditAPI struct{ core }

// Entries of the audit log one answer or page shows: by default, and at
// most.
const (
	auditPage    = 200
	auditPageMax = 1000
)

// readsAudit is what ownerOnly says of the audit log.
const readsAudit = "reads the audit log"

func apiAuditEntry(e store.AuditEntry) api.AuditEntry {
	return api.AuditEntry{Seq: e.Seq, At: e.At, ActorID: e.ActorID, Actor: e.Actor, Via: e.Via, Addr: e.Addr,
		Action: e.Action, Target: e.Target, Detail: e.Detail, Hash: hex.EncodeToString(e.Hash)}
}

func apiAuditChain(c store.AuditChain) api.AuditChain {
	return api.AuditChain{Entries: c.Entries, HeadSeq: c.HeadSeq, HeadHash: hex.EncodeToString(c.HeadHash), BrokenAt: c.BrokenAt, Reason: c.Reason}
}

// auditEntries reads ?before=SEQ&limit=N: the entries numbered below
// before (default: from the newest), newest first.
func (h auditAPI) auditEntries(r *http.Request) ([]store.AuditEntry, error) {
	q := r.URL.Query()
	var before int64
	limit := auditPage
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("before %q: want an entry's number: %w", v, errdefs.ErrInvalid)
		}
		before = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > auditPageMax {
			return nil, fmt.Errorf("limit %q: want 1 to %d: %w", v, auditPageMax, errdefs.ErrInvalid)
		}
		limit = n
	}
	return h.store.Audit.AuditEntries(r.Context(), before, limit)
}

// listAudit is GET /api/audit, for the Owner alone.
func (h auditAPI) listAudit(w http.ResponseWriter, r *http.Request, p Principal) {
	err := ownerOnly(p, readsAudit)
	var es []store.AuditEntry
	if err == nil {
		es, err = h.auditEntries(r)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAll(es, apiAuditEntry))
}

// verifyAudit is GET /api/audit/verify, for the Owner alone: it walks the
// whole chain and says where it first breaks.
func (h auditAPI) verifyAudit(w http.ResponseWriter, r *http.Request, p Principal) {
	err := ownerOnly(p, readsAudit)
	var c store.AuditChain
	if err == nil {
		c, err = h.store.Audit.VerifyAudit(r.Context(), h.auditKey)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAuditChain(c))
}

// auditLogPage shows the Owner the audit log, newest first, and whether its
// chain holds.
func (h auditAPI) auditLogPage(w http.ResponseWriter, r *http.Request, p Principal) {
	if err := ownerOnly(p, readsAudit); err != nil {
		if err := web.Render(w, http.StatusForbidden, web.Message.WithTitle("Owner only"), navOf(p),
			struct{ Text, Link string }{"Only the Hub's Owner reads the audit log.", ""}); err != nil {
			h.log.Error("render page", "err", err)
		}
		return
	}
	es, err := h.auditEntries(r)
	var c store.AuditChain
	if err == nil {
		c, err = h.store.Audit.VerifyAudit(r.Context(), h.auditKey)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type row struct{ Seq, At, Actor, Via, Addr, Action, Target, Detail string }
	data := struct {
		Chain   api.AuditChain
		Entries []row
		Older   int64 // the entry to list older ones before, or 0
	}{Chain: apiAuditChain(c)}
	for _, e := range es {
		data.Entries = append(data.Entries, row{strconv.FormatInt(e.Seq, 10), e.At.UTC().Format("2006-01-02 15:04:05 UTC"), e.Actor, e.Via, e.Addr, e.Action, e.Target, e.Detail})
	}
	if n := len(es); n > 0 && es[n-1].Seq > 1 {
		data.Older = es[n-1].Seq
	}
	h.appPage(w, p, web.Audit, data)
}
