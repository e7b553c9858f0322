package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
)

// claudeTokenSecret names a person's Claude setup token among their secrets.
const claudeTokenSecret = "claude-token"

func (h membersAPI) showAccount(w http.ResponseWriter, r *http.Request, p Principal) {
	a := api.Account{ID: p.User.ID, Name: p.User.Name}
	_, a.ClaudeTokenSetAt, _ = h.store.Members.UserSecret(r.Context(), p.User.ID, claudeTokenSecret)
	writeJSON(w, http.StatusOK, a)
}

// setClaudeToken stores a person's setup token, sealed; it is never sent
// back.
func (h membersAPI) setClaudeToken(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.ClaudeToken
	err := readJSON(r, &req)
	if err == nil {
		err = h.storeClaudeToken(r.Context(), p.User.ID, req.Token)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.log.Info("claude token stored", "user", p.User.Name)
	h.audit(r, p, auditTokenStored, p.User.Name, "")
	w.WriteHeader(http.StatusNoContent)
}

// StoreClaudeToken seals and stores a person's setup token, replacing the
// one they had.
func (h *Hub) StoreClaudeToken(ctx context.Context, userID, token string) error {
	tok := strings.TrimSpace(token)
	if len(tok) < 20 || len(tok) > 4096 || strings.ContainsAny(tok, " \t\r\n") {
		return fmt.Errorf("that does not look like a setup token: run claude setup-token and paste the token it prints: %w", errdefs.ErrInvalid)
	}
	old, hadOne := newSessionSecrets(h).claudeToken(ctx, userID)
	if hadOne == nil && old == tok {
		return nil
	}
	if err := h.store.Members.SetUserSecret(ctx, userID, claudeTokenSecret, h.secrets.Seal([]byte(tok), claudeTokenSecret+":"+userID)); err != nil {
		return err
	}
	if hadOne == nil {
		// A replaced token reaches a Session at its next wake.
		h.sessions.SleepAllOf(ctx, userID, "its Creator replaced their setup token")
	}
	// The Creator's running Sessions mask the new token too; the old one
	// stays masked while they run on it.
	h.masks.MaskNew(tok, func(_, creatorID string) bool { return creatorID == userID })
	return nil
}

func (h membersAPI) deleteClaudeToken(w http.ResponseWriter, r *http.Request, p Principal) {
	if err := h.store.Members.DeleteUserSecret(r.Context(), p.User.ID, claudeTokenSecret); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.sessions.SleepAllOf(r.Context(), p.User.ID, "its Creator removed their setup token")
	h.audit(r, p, auditTokenRemoved, p.User.Name, "")
	w.WriteHeader(http.StatusNoContent)
}

// claudeToken opens a person's stored setup token.
func (h sessionSecrets) claudeToken(ctx context.Context, userID string) (string, error) {
	sealed, _, err := h.store.Members.UserSecret(ctx, userID, claudeTokenSecret)
	if err != nil {
		return "", err
	}
	b, err := h.secrets.Open(sealed, claudeTokenSecret+":"+userID)
	return string(b), err
}
