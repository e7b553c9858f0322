// Package notify posts a Member's Sessions' events to the webhooks they
// added: a question waiting, a Turn ended, a pull request opened, a Session
// failed, a limit reached. Each body goes to the store first (the outbox),
// and a worker posts it, signed with the webhook's secret, retrying with
// backoff, so a Hub restart loses none; a webhook failing for a day is
// stopped until its Member edits it. Every text passes through the
// Session's redactor, and every request through the outbound guard. The
// Hub imports it.
package notify

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/lifetime"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// The kinds of event a webhook is told of.
const (
	QuestionWaiting = "question_waiting" // Claude asks the Creator something
	TurnEnded       = "turn_ended"       // a Turn finished, was interrupted, or failed
	PullOpened      = "pull_request_opened"
	SessionFailed   = "session_failed" // the Session moved to Failed for a cause a retry won't mend
	LimitReached    = "limit_reached"  // a limit on the Session or its Creator held it back: the Hub's limit Event
)

// Formats a webhook takes.
const (
	FormatJSON  = "json"  // Event, as JSON
	FormatSlack = "slack" // Slack's incoming webhook: {"text": ...}
)

// Header names what a post carries besides its body.
const (
	SignatureHeader = "X-Kndl-Signature-256" // "sha256=" and the body's HMAC-SHA256 under the webhook's secret, in hex
	KindHeader      = "X-Kndl-Event"
	DeliveryHeader  = "X-Kndl-Delivery" // the notification's id, the same on each retry
)

// giveUp is how long a webhook may fail before the Hub stops posting to
// it.
const giveUp = 24 * time.Hour

// Event is the body a json webhook receives.
type Event struct {
	Kind    string       `json:"kind"`
	Session EventSession `json:"session"`
	Text    string       `json:"text"`
	At      time.Time    `json:"at"`
}

// EventSession is the Session an Event is about.
type EventSession struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Repo  string `json:"repo"`
	URL   string `json:"url"`
}

// Redactor masks a Session's values in text: the one the Hub masks its
// Events with.
type Redactor interface {
	RedactText(ctx context.Context, sessionID, text string) string
}

// Sealer seals each webhook's secret under HUB_SECRETS_KEY.
type Sealer interface {
	Seal(plain []byte, ad string) []byte
	Open(sealed []byte, ad string) ([]byte, error)
}

// Options configure a Notifier.
type Options struct {
	Store    *store.Store
	Sealer   Sealer
	Redactor Redactor
	// Dialer is the outbound guard every post, and every URL a Member
	// adds, goes through.
	Dialer *outbound.Dialer
	// PublicURL is the Hub's, for the Session's link.
	PublicURL string
	// Retry is the wait before the first retry, doubled each time up to
	// an hour. HUB_NOTIFY_RETRY, default 30 s.
	Retry  time.Duration
	Logger *slog.Logger
}

// Notifier queues and posts notifications. Close stops its worker.
type Notifier struct {
	opts   Options
	log    *slog.Logger
	client *http.Client
	wake   chan struct{}
	life   *lifetime.Group // the worker's; Close ends it
}

// New makes a Notifier and starts its worker, which posts what the store
// holds, a previous run's too.
func New(opts Options) *Notifier {
	if opts.Retry <= 0 {
		opts.Retry = 30 * time.Second
	}
	n := &Notifier{opts: opts, log: opts.Logger.With("component", "notify"), wake: make(chan struct{}, 1),
		client: &http.Client{Transport: opts.Dialer.Transport(), Timeout: 10 * time.Second,
			// A redirect is a failure: the URL a Member added is the one
			// posted to.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	n.life = lifetime.New()
	n.life.Go(n.run)
	return n
}

// Close stops the worker and waits for it; what is left waits in the
// store for the next start.
func (n *Notifier) Close() { n.life.Close() }

// Added is a webhook just added, with its secret, which is shown this
// once.
type Added struct {
	Webhook store.NotifyWebhook
	Secret  string
}

// Add checks a Member's webhook's URL and format and stores it with a new
// secret.
func (n *Notifier) Add(ctx context.Context, userID, rawURL, format string) (Added, error) {
	if err := n.check(ctx, rawURL, format); err != nil {
		return Added{}, err
	}
	b := make([]byte, 32)
	rand.Read(b)
	secret := hex.EncodeToString(b)
	id := uuid.NewString()
	w, err := n.opts.Store.AddNotifyWebhook(ctx, store.NotifyWebhook{ID: id, UserID: userID, URL: rawURL, Format: format,
		Secret: n.opts.Sealer.Seal([]byte(secret), secretAD(id))})
	return Added{Webhook: w, Secret: secret}, err
}

// Edit changes a Member's webhook's URL and format, clearing its failures:
// a stopped webhook posts again.
func (n *Notifier) Edit(ctx context.Context, userID, id, rawURL, format string) (store.NotifyWebhook, error) {
	if err := n.check(ctx, rawURL, format); err != nil {
		return store.NotifyWebhook{}, err
	}
	return n.opts.Store.EditNotifyWebhook(ctx, userID, id, rawURL, format)
}

func secretAD(webhookID string) string { return "notify-webhook:" + webhookID }

// check refuses a format it doesn't know, a URL that is not http(s), and
// one whose host the outbound guard refuses (a private address, say), as
// the post itself would be refused.
func (n *Notifier) check(ctx context.Context, rawURL, format string) error {
	if format != FormatJSON && format != FormatSlack {
		return fmt.Errorf("the format %q is not one kndl posts: json or slack: %w", format, errdefs.ErrInvalid)
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" || len(rawURL) > 2048 {
		return fmt.Errorf("%q is not a webhook URL: give an http or https URL with a host, at most 2048 characters: %w", rawURL, errdefs.ErrInvalid)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("%q has no valid port: %w", rawURL, errdefs.ErrInvalid)
	}
	_, err = n.opts.Dialer.Resolve(ctx, "tcp", u.Hostname(), uint16(p))
	var refused *outbound.RefusedError
	var dns *net.DNSError
	switch {
	case errors.As(err, &refused):
		return err
	case errors.As(err, &dns):
		return fmt.Errorf("%s does not resolve (%v): check the URL: %w", u.Hostname(), dns.Err, errdefs.ErrInvalid)
	}
	return err
}

// Session tells the Session's Creator's webhooks of an event of kind on
// it. text is masked with the Session's values first.
func (n *Notifier) Session(ctx context.Context, s store.Session, kind, text string) {
	if err := n.queue(ctx, s, kind, text); err != nil {
		n.log.Error("queue a notification", "session", s.ID, "kind", kind, "err", err)
	}
}

func (n *Notifier) queue(ctx context.Context, s store.Session, kind, text string) error {
	ws, err := n.opts.Store.NotifyWebhooks(ctx, s.CreatorID)
	if err != nil || len(ws) == 0 {
		return err
	}
	ev := Event{Kind: kind, Text: n.opts.Redactor.RedactText(ctx, s.ID, text), At: time.Now().UTC(),
		Session: EventSession{ID: s.ID, Title: n.opts.Redactor.RedactText(ctx, s.ID, s.Title), Repo: s.RepoURL,
			URL: strings.TrimSuffix(n.opts.PublicURL, "/") + "/sessions/" + s.ID}}
	var ns []store.Notification
	for _, w := range ws {
		if !w.StoppedAt.IsZero() {
			continue
		}
		ns = append(ns, store.Notification{WebhookID: w.ID, Kind: kind, Body: body(ev, w.Format)})
	}
	if len(ns) == 0 {
		return nil
	}
	if err := n.opts.Store.QueueNotifications(ctx, ns); err != nil {
		return err
	}
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return nil
}

// headlines say each kind in a Slack message.
var headlines = map[string]string{
	QuestionWaiting: "Claude asks",
	TurnEnded:       "Turn ended",
	PullOpened:      "Pull request opened",
	SessionFailed:   "Session failed",
	LimitReached:    "Limit reached",
}

// body is ev as a webhook of format takes it.
func body(ev Event, format string) []byte {
	var v any = ev
	if format == FormatSlack {
		v = struct {
			Text string `json:"text"`
		}{fmt.Sprintf("*%s* in <%s|%s>: %s", headlines[ev.Kind], ev.Session.URL, slackEscape(ev.Session.Title), slackEscape(ev.Text))}
	}
	b, _ := json.Marshal(v)
	return b
}

// slackEscape escapes what Slack's mrkdwn reads as markup.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Sign is the signature header's value for body under secret, as a
// receiver computes it to check a post.
func Sign(secret string, body []byte) string {
	return "sha256=" + hex.EncodeToString(auth.MAC([]byte(secret), body))
}

// FromEvents reads a Session's Events, redacted and stored, for what a
// webhook is told: a question of Claude's own (not a subagent's), a Turn's
// end, a limit the Hub held the Session at (a Runner's limit Event is
// recorded as a note, so this one is the Hub's).
func FromEvents(evs []protocol.Event) (kinds, texts []string) {
	for _, ev := range evs {
		if ev.Agent != "" {
			continue
		}
		switch ev.Kind {
		case protocol.EventQuestion:
			kinds, texts = append(kinds, QuestionWaiting), append(texts, questionText(ev))
		case protocol.EventTurnEnd:
			kinds, texts = append(kinds, TurnEnded), append(texts, "The Turn ended ("+cmp.Or(ev.Reason, "done")+").")
		case protocol.EventLimit:
			kinds, texts = append(kinds, LimitReached), append(texts, ev.Text)
		}
	}
	return kinds, texts
}

// questionText is what Claude asks: AskUserQuestion's questions, or the
// tool it asks to use.
func questionText(ev protocol.Event) string {
	var in struct {
		Questions []struct {
			Question string `json:"question"`
		} `json:"questions"`
	}
	var qs []string
	if json.Unmarshal(ev.Input, &in) == nil {
		for _, q := range in.Questions {
			qs = append(qs, q.Question)
		}
	}
	if len(qs) > 0 {
		return strings.Join(qs, "\n")
	}
	if ev.Text != "" {
		return ev.Text
	}
	return "Claude asks to use " + cmp.Or(ev.Tool, "a tool") + "."
}

// run posts what is due until ctx ends, sleeping until the next is due or
// a new one is queued.
func (n *Notifier) run(ctx context.Context) {
	for {
		n.postDue(ctx)
		wait := time.Hour
		if due, ok, err := n.opts.Store.NextNotificationDue(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			n.log.Error("read when the next notification is due", "err", err)
			wait = n.opts.Retry
		} else if ok {
			wait = max(time.Until(due), 0)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-n.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// postDue posts every notification due now, a batch at a time.
func (n *Notifier) postDue(ctx context.Context) {
	for ctx.Err() == nil {
		due, err := n.opts.Store.DueNotifications(ctx, time.Now(), 20)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Error("read the notifications due", "err", err)
			}
			return
		}
		if len(due) == 0 {
			return
		}
		for _, x := range due {
			n.deliver(ctx, x)
		}
	}
}

// deliver posts one notification and records how it went.
func (n *Notifier) deliver(ctx context.Context, x store.Notification) {
	err := n.post(ctx, x)
	if ctx.Err() != nil {
		return // closing: it stays due for the next start
	}
	if err == nil {
		err = n.opts.Store.NotificationSent(ctx, x)
	} else {
		w := x.Webhook
		stop := !w.FailingSince.IsZero() && time.Since(w.FailingSince) >= giveUp
		next := time.Now().Add(backoff(n.opts.Retry, x.Tries))
		if stop {
			n.log.Warn("stopped a notification webhook failing for a day", "webhook", w.ID, "user", w.UserID, "err", err)
		}
		err = n.opts.Store.NotificationFailed(ctx, x, err.Error(), next, stop)
	}
	if err != nil {
		n.log.Error("record a notification's post", "notification", x.ID, "err", err)
	}
}

// backoff is the wait before retry tries+1: first doubled each time, at
// most an hour.
func backoff(first time.Duration, tries int) time.Duration {
	d := first << min(tries, 16)
	return min(d, time.Hour)
}

// post sends x's body to its webhook, signed.
func (n *Notifier) post(ctx context.Context, x store.Notification) error {
	secret, err := n.opts.Sealer.Open(x.Webhook.Secret, secretAD(x.WebhookID))
	if err != nil {
		return fmt.Errorf("the webhook's secret does not open (HUB_SECRETS_KEY changed?): remove it and add it again")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.Webhook.URL, strings.NewReader(string(x.Body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "kndl-notify")
	req.Header.Set(SignatureHeader, Sign(string(secret), x.Body))
	req.Header.Set(KindHeader, x.Kind)
	req.Header.Set(DeliveryHeader, x.ID)
	resp, err := n.client.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err // without the URL: a Slack webhook's path is its credential
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the endpoint answered %s", resp.Status)
	}
	return nil
}
