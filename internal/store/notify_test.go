package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// TestANotificationKeptInTheOutboxIsReadBackOnceAndDeletedWhenDelivered:
// notifications wait in the store with their webhook, the oldest due
// first; one that fails waits until it is due again while its webhook
// keeps the error and when its failures began, one delivered is deleted
// and clears them, and a webhook stopped drops what waits for it until
// its Member edits it.
func TestANotificationKeptInTheOutboxIsReadBackOnceAndDeletedWhenDelivered(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		now := time.UnixMilli(1700000000000)
		s.now = func() time.Time { return now }
		u, _ := s.Members.DevUser(ctx)
		secret := []byte{0, 0xff, 's', 0}
		w, err := s.Notify.AddNotifyWebhook(ctx, NotifyWebhook{ID: "wh1", UserID: u.ID, URL: "https://hooks.example/a", Format: "json", Secret: secret})
		must(t, err)
		ws, err := s.Notify.NotifyWebhooks(ctx, u.ID)
		if err != nil || len(ws) != 1 || ws[0].ID != w.ID || !bytes.Equal(ws[0].Secret, secret) || !ws[0].CreatedAt.Equal(now) || !ws[0].FailingSince.IsZero() {
			t.Fatalf("the Member's webhooks: %+v, %v; want the one, its secret byte for byte", ws, err)
		}
		if _, ok, err := s.Notify.NextNotificationDue(ctx); ok || err != nil {
			t.Fatalf("with none waiting, one is due: %v, %v", ok, err)
		}

		must(t, s.Notify.QueueNotifications(ctx, []Notification{{WebhookID: w.ID, Kind: "question", Body: []byte(`{"n":1}`)}}))
		now = now.Add(time.Millisecond)
		must(t, s.Notify.QueueNotifications(ctx, []Notification{{WebhookID: w.ID, Kind: "turn_end", Body: []byte(`{"n":2}`)}}))
		if due, ok, err := s.Notify.NextNotificationDue(ctx); !ok || err != nil || !due.Equal(now.Add(-time.Millisecond)) {
			t.Fatalf("the next due: %v, %v, %v; want the first's time", due, ok, err)
		}
		ns, err := s.Notify.DueNotifications(ctx, u.ID, now, 10)
		if err != nil || len(ns) != 2 || ns[0].Kind != "question" || ns[1].Kind != "turn_end" || string(ns[0].Body) != `{"n":1}` ||
			ns[0].Webhook.URL != w.URL || !bytes.Equal(ns[0].Webhook.Secret, secret) {
			t.Fatalf("due: %+v, %v; want both, the oldest first, with their webhook", ns, err)
		}
		if one, err := s.Notify.DueNotifications(ctx, u.ID, now, 1); err != nil || len(one) != 1 || one[0].ID != ns[0].ID {
			t.Fatalf("due, one at most: %+v, %v; want the oldest", one, err)
		}

		retry := now.Add(time.Minute)
		must(t, s.Notify.NotificationFailed(ctx, ns[0], "502 Bad Gateway", retry, false))
		if due, err := s.Notify.DueNotifications(ctx, u.ID, now, 10); err != nil || len(due) != 1 || due[0].ID != ns[1].ID {
			t.Fatalf("due after a failure: %+v, %v; want only the one not tried", due, err)
		}
		if ws, err := s.Notify.NotifyWebhooks(ctx, u.ID); err != nil || ws[0].LastError != "502 Bad Gateway" || !ws[0].FailingSince.Equal(now) {
			t.Fatalf("the webhook after a failure: %+v, %v; want its error and since when", ws, err)
		}
		must(t, s.Notify.NotificationSent(ctx, ns[1]))
		if ws, err := s.Notify.NotifyWebhooks(ctx, u.ID); err != nil || ws[0].LastError != "" || !ws[0].FailingSince.IsZero() {
			t.Fatalf("the webhook after a delivery: %+v, %v; want its failures cleared", ws, err)
		}
		if due, ok, err := s.Notify.NextNotificationDue(ctx); !ok || err != nil || !due.Equal(retry) {
			t.Fatalf("the next due: %v, %v, %v; want the retry's %v", due, ok, err, retry)
		}
		again, err := s.Notify.DueNotifications(ctx, u.ID, retry, 10)
		if err != nil || len(again) != 1 || again[0].ID != ns[0].ID || again[0].Tries != 1 || !again[0].DueAt.Equal(retry) {
			t.Fatalf("due at the retry: %+v, %v; want the failed one, tried once", again, err)
		}

		now = retry
		must(t, s.Notify.NotificationFailed(ctx, again[0], "timeout", retry.Add(time.Hour), true))
		if _, ok, err := s.Notify.NextNotificationDue(ctx); ok || err != nil {
			t.Fatalf("a stopped webhook's notifications still wait: %v, %v", ok, err)
		}
		if ws, err := s.Notify.NotifyWebhooks(ctx, u.ID); err != nil || !ws[0].StoppedAt.Equal(retry) || ws[0].LastError != "timeout" {
			t.Fatalf("the stopped webhook: %+v, %v; want stopped now, with its error", ws, err)
		}
		other := invited(t, s, u.ID, "octo", 7)
		if _, err := s.Notify.EditNotifyWebhook(ctx, other.ID, w.ID, "https://hooks.example/b", "slack"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("another Member's edit: %v, want ErrNotFound", err)
		}
		e, err := s.Notify.EditNotifyWebhook(ctx, u.ID, w.ID, "https://hooks.example/b", "slack")
		if err != nil || e.URL != "https://hooks.example/b" || e.Format != "slack" || !e.StoppedAt.IsZero() || e.LastError != "" {
			t.Fatalf("the edited webhook: %+v, %v; want the new URL and format, posting again", e, err)
		}

		must(t, s.Notify.QueueNotifications(ctx, []Notification{{WebhookID: w.ID, Kind: "failed", Body: []byte(`{}`)}}))
		if err := s.Notify.DeleteNotifyWebhook(ctx, other.ID, w.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("another Member's delete: %v, want ErrNotFound", err)
		}
		must(t, s.Notify.DeleteNotifyWebhook(ctx, u.ID, w.ID))
		if ws, _ := s.Notify.NotifyWebhooks(ctx, u.ID); len(ws) != 0 {
			t.Fatalf("after the delete: %+v; want none", ws)
		}
		if _, ok, err := s.Notify.NextNotificationDue(ctx); ok || err != nil {
			t.Fatalf("a deleted webhook's notifications still wait: %v, %v", ok, err)
		}

		_, err = s.Notify.AddNotifyWebhook(ctx, NotifyWebhook{ID: "wh2", UserID: other.ID, URL: "https://hooks.example/c", Format: "json", Secret: secret})
		must(t, err)
		_, _, err = s.Members.RemoveMember(ctx, other.ID)
		must(t, err)
		if ws, err := s.Notify.NotifyWebhooks(ctx, other.ID); err != nil || len(ws) != 0 {
			t.Fatalf("a removed Member's webhooks: %+v, %v; want none", ws, err)
		}
	})
}

// TestDueNotificationsAreReadPerMember: the Members with a notification
// due come the longest waiting first, and each Member's read holds only
// theirs, so one Member's long queue hides no other's.
func TestDueNotificationsAreReadPerMember(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		now := time.UnixMilli(1700000000000)
		s.now = func() time.Time { return now }
		u, _ := s.Members.DevUser(ctx)
		other := invited(t, s, u.ID, "octo", 7)
		for _, w := range []NotifyWebhook{{ID: "mine", UserID: u.ID}, {ID: "theirs", UserID: other.ID}} {
			w.URL, w.Format, w.Secret = "https://hooks.example/"+w.ID, "json", []byte{1}
			_, err := s.Notify.AddNotifyWebhook(ctx, w)
			must(t, err)
		}
		for range 30 {
			must(t, s.Notify.QueueNotifications(ctx, []Notification{{WebhookID: "mine", Kind: "turn_ended", Body: []byte(`{}`)}}))
		}
		now = now.Add(time.Millisecond)
		must(t, s.Notify.QueueNotifications(ctx, []Notification{{WebhookID: "theirs", Kind: "question_waiting", Body: []byte(`{}`)}}))
		if got, err := s.Notify.DueMembers(ctx, now); err != nil || len(got) != 2 || got[0] != u.ID || got[1] != other.ID {
			t.Fatalf("DueMembers = %v, %v; want %s (longest waiting) then %s", got, err, u.ID, other.ID)
		}
		if got, err := s.Notify.DueNotifications(ctx, other.ID, now, 10); err != nil || len(got) != 1 || got[0].WebhookID != "theirs" {
			t.Fatalf("the other Member's due: %+v, %v; want their one", got, err)
		}
		if got, err := s.Notify.DueNotifications(ctx, u.ID, now, 10); err != nil || len(got) != 10 || got[9].WebhookID != "mine" {
			t.Fatalf("the first Member's due: %d, %v; want 10 of theirs", len(got), err)
		}
	})
}
