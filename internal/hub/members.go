package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/store"
)

// membersAPI serves Members, Invites and a person's account (members.go,
// account.go).
type membersAPI struct {
	core
	runners  *runners.Conns
	sessions *session.Owner
	// storeClaudeToken is the Hub's StoreClaudeToken.
	storeClaudeToken func(ctx context.Context, userID, token string) error
}

// Invite lifetimes: the default, and the most the Owner may ask for.
const (
	defaultInviteTTL = 7 * 24 * time.Hour
	maxInviteTTL     = 30 * 24 * time.Hour
)

// isOwner reports whether p is the Owner, or the dev user, who stands in
// for one on kndl dev's loopback-only Hub.
func isOwner(p Principal) bool { return p.User.IsOwner || p.User.IsDev }

// ownerOnly refuses anyone but the Owner (isOwner), saying what only the
// Owner does.
func ownerOnly(p Principal, does string) error {
	if isOwner(p) {
		return nil
	}
	return fmt.Errorf("only the Hub's Owner %s: %w", does, errdefs.ErrForbidden)
}

// inviteAndRemove is what ownerOnly says of Members and Invites.
const inviteAndRemove = "invites and removes Members"

func (h membersAPI) listMembers(w http.ResponseWriter, r *http.Request, _ Principal) {
	ms, err := h.store.Members.List(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAll(ms, apiUser))
}

func (h membersAPI) removeMember(w http.ResponseWriter, r *http.Request, p Principal) {
	err := ownerOnly(p, inviteAndRemove)
	id := r.PathValue("id")
	if err == nil && id == p.User.ID {
		err = fmt.Errorf("the Owner can't remove themselves: %w", errdefs.ErrConflict)
	}
	target, detail := h.memberTarget(r.Context(), id)
	if err == nil {
		err = h.RemoveMember(r.Context(), id)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.audit(r, p, auditMemberRemoved, target, detail)
	h.log.Info("member removed", "member", id, "by", p.User.Name)
	w.WriteHeader(http.StatusNoContent)
}

// RemoveMember removes a Member: every sign-in and CLI token of theirs ends
// at once, their open connections close, the Runners they paired are
// revoked (disconnected, and every Session there Failed, whoever's), and
// their other awake Sessions go to sleep. The Owner can't be removed.
func (h membersAPI) RemoveMember(ctx context.Context, id string) error {
	u, err := h.store.Members.UserByID(ctx, id)
	if err == nil && u.IsOwner {
		err = fmt.Errorf("the Owner can't be removed: %w", errdefs.ErrConflict)
	}
	var runners []store.Runner
	if err == nil {
		_, runners, err = h.store.Members.RemoveMember(ctx, id)
	}
	if err != nil {
		return err
	}
	h.guard.conns.end(errMemberGone, func(c *conn) bool { return c.user.ID == id })
	h.guard.access.forget(id)
	for _, rn := range runners {
		h.runners.Disconnect(rn.ID, "its owner was removed from the Hub")
		h.sessions.RunnerRemoved(ctx, rn.ID, session.RunnerOwnerRemoved)
		h.log.Info("runner revoked with its owner", "runner", rn.Name)
	}
	h.sessions.SleepAllOf(ctx, id, "its Creator was removed from the Hub")
	return nil
}

func (h membersAPI) createInvite(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.InviteRequest
	err := ownerOnly(p, inviteAndRemove)
	if err == nil {
		err = readJSON(r, &req)
	}
	ttl := time.Duration(req.ExpiresInHours) * time.Hour
	if err == nil && (ttl < 0 || ttl > maxInviteTTL) {
		err = fmt.Errorf("expires_in_hours %d: an Invite lasts 1 to %d hours: %w", req.ExpiresInHours, int(maxInviteTTL/time.Hour), errdefs.ErrInvalid)
	}
	if ttl == 0 {
		ttl = defaultInviteTTL
	}
	var inv store.Invite
	var secret string
	if err == nil {
		inv, secret, err = h.store.Members.CreateInvite(r.Context(), strings.TrimPrefix(strings.TrimSpace(req.GitHubLogin), "@"), p.User.ID, ttl)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.log.Info("invite made", "github", inv.GitHubLogin, "by", p.User.Name)
	h.audit(r, p, auditInviteMade, "@"+inv.GitHubLogin, "Invite "+inv.ID+", until "+when(inv.ExpiresAt))
	writeJSON(w, http.StatusCreated, api.InviteCreated{Invite: apiInvite(inv), URL: strings.TrimSuffix(h.cfg.PublicURL, "/") + "/invite#" + secret})
}

func (h membersAPI) listInvites(w http.ResponseWriter, r *http.Request, p Principal) {
	err := ownerOnly(p, inviteAndRemove)
	var invs []store.Invite
	if err == nil {
		invs, err = h.store.Members.Invites(r.Context())
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAll(invs, apiInvite))
}

func (h membersAPI) revokeInvite(w http.ResponseWriter, r *http.Request, p Principal) {
	err := ownerOnly(p, inviteAndRemove)
	if err == nil {
		err = h.store.Members.RevokeInvite(r.Context(), r.PathValue("id"))
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.audit(r, p, auditInviteRevoked, h.inviteTarget(r.Context(), r.PathValue("id")), "")
	w.WriteHeader(http.StatusNoContent)
}
