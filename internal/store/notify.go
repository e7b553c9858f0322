package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/errdefs"
)

// NotifyWebhook is one of a Member's notification webhooks.
type NotifyWebhook struct {
	ID     string
	UserID string
	URL    string
	Format string // json or slack
	Secret []byte // sealed
	// FailingSince is the first of the failures since the last delivery;
	// zero while it delivers. LastError is the latest failure's.
	FailingSince time.Time
	LastError    string
	// StoppedAt is when the Hub stopped posting to it, after a day of
	// failures; zero while it posts.
	StoppedAt time.Time
	CreatedAt time.Time
}

const notifyWebhookCols = `id, user_id, url, format, secret, failing_since, last_error, stopped_at, created_at`

func scanNotifyWebhook(row scanner) (NotifyWebhook, error) {
	var w NotifyWebhook
	var failing, stopped, created int64
	err := row.Scan(&w.ID, &w.UserID, &w.URL, &w.Format, &w.Secret, &failing, &w.LastError, &stopped, &created)
	w.FailingSince, w.StoppedAt, w.CreatedAt = fromMSOrZero(failing), fromMSOrZero(stopped), time.UnixMilli(created)
	return w, err
}

// fromMSOrZero reads a time stored as milliseconds with 0 for none.
func fromMSOrZero(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// AddNotifyWebhook stores a Member's new webhook, its id given, its secret
// sealed.
func (s *Notify) AddNotifyWebhook(ctx context.Context, w NotifyWebhook) (NotifyWebhook, error) {
	w.CreatedAt = s.now()
	_, err := s.exec(ctx, `INSERT INTO notify_webhooks (id, user_id, url, format, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		w.ID, w.UserID, w.URL, w.Format, w.Secret, ms(w.CreatedAt))
	return w, err
}

// NotifyWebhooks lists a Member's webhooks, oldest first.
func (s *Notify) NotifyWebhooks(ctx context.Context, userID string) ([]NotifyWebhook, error) {
	return queryAll(ctx, s.db, scanNotifyWebhook, `SELECT `+notifyWebhookCols+` FROM notify_webhooks WHERE user_id = ? ORDER BY created_at, id`, userID)
}

// EditNotifyWebhook changes a Member's webhook's URL and format, and clears
// its failures: an edit is how a stopped webhook posts again. ErrNotFound
// for none of theirs.
func (s *Notify) EditNotifyWebhook(ctx context.Context, userID, id, url, format string) (NotifyWebhook, error) {
	var w NotifyWebhook
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE notify_webhooks SET url = ?, format = ?, failing_since = 0, last_error = '', stopped_at = 0 WHERE id = ? AND user_id = ?`,
			url, format, id, userID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("webhook %s: %w", id, errdefs.ErrNotFound)
		}
		w, err = scanNotifyWebhook(tx.QueryRowContext(ctx, `SELECT `+notifyWebhookCols+` FROM notify_webhooks WHERE id = ?`, id))
		return err
	})
	return w, err
}

// DeleteNotifyWebhook removes a Member's webhook and what waits for it.
// ErrNotFound for none of theirs.
func (s *Notify) DeleteNotifyWebhook(ctx context.Context, userID, id string) error {
	res, err := s.exec(ctx, `DELETE FROM notify_webhooks WHERE id = ? AND user_id = ?`, id, userID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("webhook %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// Notification is a body waiting to be posted to one webhook.
type Notification struct {
	ID        string
	WebhookID string
	Kind      string
	Body      []byte
	Tries     int
	DueAt     time.Time
	// Webhook is where it goes, as DueNotifications reads it.
	Webhook NotifyWebhook
}

// QueueNotifications stores notifications to post now.
func (s *Notify) QueueNotifications(ctx context.Context, ns []Notification) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		now := ms(s.now())
		for _, n := range ns {
			if _, err := tx.ExecContext(ctx, `INSERT INTO notify_outbox (id, webhook_id, kind, body, due_at, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
				uuid.NewString(), n.WebhookID, n.Kind, n.Body, now, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// DueMembers returns the Members with a notification due by now, the one
// whose oldest is due longest ago first.
func (s *Notify) DueMembers(ctx context.Context, now time.Time) ([]string, error) {
	return queryAll(ctx, s.db, func(row scanner) (string, error) {
		var id string
		return id, row.Scan(&id)
	}, `SELECT w.user_id FROM notify_outbox o JOIN notify_webhooks w ON w.id = o.webhook_id
		WHERE o.due_at <= ? GROUP BY w.user_id ORDER BY min(o.due_at), w.user_id`, ms(now))
}

// DueNotifications returns at most limit of a Member's notifications due
// by now, the oldest due first, with their webhooks.
func (s *Notify) DueNotifications(ctx context.Context, userID string, now time.Time, limit int) ([]Notification, error) {
	return queryAll(ctx, s.db, func(row scanner) (Notification, error) {
		var n Notification
		var due, failing, stopped, created int64
		w := &n.Webhook
		err := row.Scan(&n.ID, &n.WebhookID, &n.Kind, &n.Body, &n.Tries, &due,
			&w.ID, &w.UserID, &w.URL, &w.Format, &w.Secret, &failing, &w.LastError, &stopped, &created)
		n.DueAt, w.FailingSince, w.StoppedAt, w.CreatedAt = time.UnixMilli(due), fromMSOrZero(failing), fromMSOrZero(stopped), time.UnixMilli(created)
		return n, err
	}, `SELECT o.id, o.webhook_id, o.kind, o.body, o.tries, o.due_at,
		w.id, w.user_id, w.url, w.format, w.secret, w.failing_since, w.last_error, w.stopped_at, w.created_at
		FROM notify_outbox o JOIN notify_webhooks w ON w.id = o.webhook_id
		WHERE w.user_id = ? AND o.due_at <= ? ORDER BY o.due_at, o.created_at LIMIT ?`, userID, ms(now), limit)
}

// NextNotificationDue is when the soonest notification is due; false for
// none waiting.
func (s *Notify) NextNotificationDue(ctx context.Context) (time.Time, bool, error) {
	var due sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT MIN(due_at) FROM notify_outbox`).Scan(&due)
	return fromMS(due), due.Valid, err
}

// NotificationSent deletes a delivered notification and clears its
// webhook's failures.
func (s *Notify) NotificationSent(ctx context.Context, n Notification) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM notify_outbox WHERE id = ?`, n.ID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE notify_webhooks SET failing_since = 0, last_error = '' WHERE id = ?`, n.WebhookID)
		return err
	})
}

// NotificationFailed records a failed post: the notification is tried
// again at next, and its webhook keeps the error and when it began
// failing. With stop, the webhook is stopped instead, and what waits for
// it dropped.
func (s *Notify) NotificationFailed(ctx context.Context, n Notification, why string, next time.Time, stop bool) error {
	return s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		now := ms(s.now())
		if _, err := tx.ExecContext(ctx, `UPDATE notify_webhooks SET last_error = ?,
			failing_since = CASE WHEN failing_since = 0 THEN ? ELSE failing_since END WHERE id = ?`, why, now, n.WebhookID); err != nil {
			return err
		}
		if stop {
			if _, err := tx.ExecContext(ctx, `UPDATE notify_webhooks SET stopped_at = ? WHERE id = ?`, now, n.WebhookID); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `DELETE FROM notify_outbox WHERE webhook_id = ?`, n.WebhookID)
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE notify_outbox SET tries = tries + 1, due_at = ? WHERE id = ?`, ms(next), n.ID)
		return err
	})
}
