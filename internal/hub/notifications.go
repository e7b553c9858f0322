package hub

import (
	"net/http"
	"net/url"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/hub/notify"
	"kndl.dev/kndl/internal/store"
)

// notifyAPI serves a Member's notification webhooks (internal/hub/notify):
// each Member sees and changes only their own.
type notifyAPI struct {
	core
	notify *notify.Notifier
}

func (h notifyAPI) listWebhooks(w http.ResponseWriter, r *http.Request, p Principal) {
	ws, err := h.store.Notify.NotifyWebhooks(r.Context(), p.User.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiAll(ws, apiNotifyWebhook))
}

// addWebhook adds a webhook and answers with its secret, this once.
func (h notifyAPI) addWebhook(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.NotifyWebhookRequest
	var added notify.Added
	err := readJSON(r, &req)
	if err == nil {
		added, err = h.notify.Add(r.Context(), p.User.ID, req.URL, req.Format)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.audit(r, p, auditWebhookAdded, hostOf(req.URL), "")
	writeJSON(w, http.StatusCreated, api.NotifyWebhookCreated{NotifyWebhook: apiNotifyWebhook(added.Webhook), Secret: added.Secret})
}

// editWebhook changes a webhook's URL and format; it clears its failures,
// so a stopped webhook posts again.
func (h notifyAPI) editWebhook(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.NotifyWebhookRequest
	var edited store.NotifyWebhook
	err := readJSON(r, &req)
	if err == nil {
		edited, err = h.notify.Edit(r.Context(), p.User.ID, r.PathValue("id"), req.URL, req.Format)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.audit(r, p, auditWebhookEdited, hostOf(req.URL), "")
	writeJSON(w, http.StatusOK, apiNotifyWebhook(edited))
}

func (h notifyAPI) removeWebhook(w http.ResponseWriter, r *http.Request, p Principal) {
	if err := h.store.Notify.DeleteNotifyWebhook(r.Context(), p.User.ID, r.PathValue("id")); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// hostOf is a URL's host, as the audit log names a webhook.
func hostOf(raw string) string {
	u, _ := url.Parse(raw)
	return u.Host
}
