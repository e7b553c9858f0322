// Package notify posts a Member's Sessions' events to the webhooks they
// added: a question waiting, a Turn ended, a pull request opened, a Session
// failed, a limit reached. Each Session's are paced (pace.go), the rest
// held and queued as one saying how many. Each body goes to the store
// first (the outbox), and a bounded pool of workers posts them, one worker
// to a Member at a time, signed with the webhook's secret, retrying with
// backoff, so a Hub restart loses none and one Member's slow endpoint
// holds up no other's; a webhook failing for a day is stopped until its
// Member edits it. Every text passes through the Session's redactor, and
// every request through the outbound guard. The Hub imports it.
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
	"sync"
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
	// EgressRequested: the Creator, without push, asks the Repo's Members
	// with push to allow a host the Session's allowlist refused; the text
	// names the host and who asks. Posted to those Members' webhooks.
	EgressRequested = "egress_requested"
	// AttemptsReady: every attempt of an attempt set ended its first Turn
	// and that Turn's check; told once per set, about its first attempt,
	// the text linking the set's page.
	AttemptsReady = "attempts_ready"

	// EnvironmentDraft: a push changed a Repo's followed devcontainer.json,
	// and a new draft waits for a Member with push to apply it once its
	// Test build passes. Posted to those Members' webhooks.
	EnvironmentDraft = "environment_draft"
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

// workers bounds the posts under way at once, each to another Member, so
// one Member's endpoint that answers slowly (up to the 10 s timeout) holds
// up that Member's notifications alone. A worker posts at most
// workerBatch of its Member's before the Members waiting get a turn.
const (
	workers     = 4
	workerBatch = 10
)

// Event is the body a json webhook receives.
type Event struct {
	Kind    string       `json:"kind"`
	Session EventSession `json:"session"`
	Text    string       `json:"text"`
	At      time.Time    `json:"at"`
	// Coalesced is how many of the Session's notifications, held past its
	// pace, this one stands for besides its own; the text names them.
	Coalesced int `json:"coalesced,omitempty"`
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

// Outbox is what a Notifier keeps in the store (store.Notify): Members'
// webhooks and the notifications waiting to be posted.
type Outbox interface {
	AddNotifyWebhook(ctx context.Context, w store.NotifyWebhook) (store.NotifyWebhook, error)
	NotifyWebhooks(ctx context.Context, userID string) ([]store.NotifyWebhook, error)
	EditNotifyWebhook(ctx context.Context, userID, id, url, format string) (store.NotifyWebhook, error)
	QueueNotifications(ctx context.Context, ns []store.Notification) error
	DueMembers(ctx context.Context, now time.Time) ([]string, error)
	DueNotifications(ctx context.Context, userID string, now time.Time, limit int) ([]store.Notification, error)
	NextNotificationDue(ctx context.Context) (time.Time, bool, error)
	NotificationSent(ctx context.Context, n store.Notification) error
	NotificationFailed(ctx context.Context, n store.Notification, why string, next time.Time, stop bool) error
}

// Options configure a Notifier.
type Options struct {
	Store    Outbox
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
	// Now is the clock of each Session's pace; nil for time.Now. A test
	// turns it.
	Now func() time.Time
}

// Notifier queues and posts notifications. Close stops its workers.
type Notifier struct {
	opts   Options
	log    *slog.Logger
	client *http.Client
	wake   chan struct{}
	life   *lifetime.Group // the workers'; Close ends them

	mu    sync.Mutex
	paces map[string]*pace // by Session
	busy  map[string]bool  // the Members a worker posts for now
}

// New makes a Notifier and starts its workers, which post what the store
// holds, a previous run's too.
func New(opts Options) *Notifier {
	if opts.Retry <= 0 {
		opts.Retry = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	n := &Notifier{opts: opts, log: opts.Logger.With("component", "notify"), wake: make(chan struct{}, 1),
		paces: map[string]*pace{}, busy: map[string]bool{},
		client: &http.Client{Transport: opts.Dialer.Transport(), Timeout: 10 * time.Second,
			// A redirect is a failure: the URL a Member added is the one
			// posted to.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	n.life = lifetime.New()
	n.life.Go(n.run)
	return n
}

// Close stops the workers and waits for them; what is left waits in the
// store for the next start, and what a Session's pace held is lost.
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
// it, within the Session's pace (pace.go). text is masked with the
// Session's values first.
func (n *Notifier) Session(ctx context.Context, s store.Session, kind, text string) {
	n.mu.Lock()
	held, ok := n.admit(n.opts.Now(), notice{s: s, kind: kind, text: text})
	n.mu.Unlock()
	if held != nil {
		n.queue(ctx, *held)
	}
	if ok {
		n.queue(ctx, notice{s: s, kind: kind, text: text})
	} else {
		n.poke() // the loop times the end of the window that holds it
	}
}

// queue stores x for each of its Session's Creator's webhooks, logging a
// failure.
func (n *Notifier) queue(ctx context.Context, x notice) {
	if err := n.store(ctx, x); err != nil {
		n.log.Error("queue a notification", "session", x.s.ID, "kind", x.kind, "err", err)
	}
}

// Members tells the webhooks of the Members to (user ids) of an event of
// kind on s: a Request to allow a host (EgressRequested). It is outside
// the Session's pace, which is its Creator's: the caller bounds how often.
func (n *Notifier) Members(ctx context.Context, s store.Session, to []string, kind, text string) error {
	if len(to) == 0 {
		return nil // a nil to is the Creator's
	}
	return n.store(ctx, notice{s: s, kind: kind, text: text, to: to})
}

// Repo tells the webhooks of the Members to of an event of kind on a
// Repo, not a Session: its Environment (EnvironmentDraft), titled title,
// linking page. text is the caller's to mask.
func (n *Notifier) Repo(ctx context.Context, repoURL, title, page string, to []string, kind, text string) error {
	if len(to) == 0 {
		return nil
	}
	return n.store(ctx, notice{s: store.Session{RepoURL: repoURL, Title: title}, kind: kind, text: text, to: to, url: page})
}

func (n *Notifier) store(ctx context.Context, x notice) error {
	s, kind := x.s, x.kind
	to := x.to
	if to == nil {
		to = []string{s.CreatorID}
	}
	ev := Event{Kind: kind, Text: n.opts.Redactor.RedactText(ctx, s.ID, x.text), At: time.Now().UTC(), Coalesced: x.coalesced,
		Session: EventSession{ID: s.ID, Title: n.opts.Redactor.RedactText(ctx, s.ID, s.Title), Repo: s.RepoURL,
			URL: strings.TrimSuffix(n.opts.PublicURL, "/") + "/sessions/" + s.ID}}
	if x.url != "" {
		ev.Session.URL = x.url
	}
	var ns []store.Notification
	for _, user := range to {
		ws, err := n.opts.Store.NotifyWebhooks(ctx, user)
		if err != nil {
			return err
		}
		for _, w := range ws {
			if w.StoppedAt.IsZero() {
				ns = append(ns, store.Notification{WebhookID: w.ID, Kind: kind, Body: body(ev, w.Format)})
			}
		}
	}
	if len(ns) == 0 {
		return nil
	}
	if err := n.opts.Store.QueueNotifications(ctx, ns); err != nil {
		return err
	}
	n.poke()
	return nil
}

// poke wakes the loop that hands out the work.
func (n *Notifier) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// headlines say each kind in a Slack message.
var headlines = map[string]string{
	QuestionWaiting:  "Claude asks",
	TurnEnded:        "Turn ended",
	PullOpened:       "Pull request opened",
	SessionFailed:    "Session failed",
	LimitReached:     "Limit reached",
	EgressRequested:  "Asked to allow a host",
	AttemptsReady:    "Attempts ready",
	EnvironmentDraft: "Environment draft to apply",
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

// run hands out what is due until ctx ends: the notices whose Session's
// window ended, and each Member with a notification due to a worker, as
// long as one is free; then it sleeps until the next is due, a window
// ends, something is queued or a worker is done.
func (n *Notifier) run(ctx context.Context) {
	for {
		n.mu.Lock()
		held, windowEnd, holding := n.ended(n.opts.Now())
		n.mu.Unlock()
		for _, x := range held {
			n.queue(ctx, x)
		}
		wait := time.Hour
		if err := n.dispatch(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			n.log.Error("hand out the notifications due", "err", err)
			wait = n.opts.Retry
		} else if due, ok, err := n.opts.Store.NextNotificationDue(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			n.log.Error("read when the next notification is due", "err", err)
			wait = n.opts.Retry
		} else if ok && due.After(time.Now()) {
			wait = time.Until(due)
		} // else due now for Members a worker has, or with every worker busy: a worker done wakes the loop
		if holding {
			wait = min(wait, max(windowEnd.Sub(n.opts.Now()), 0))
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

// dispatch starts a worker for each Member with a notification due that
// none serves, while fewer than workers run.
func (n *Notifier) dispatch(ctx context.Context) error {
	members, err := n.opts.Store.DueMembers(ctx, time.Now())
	if err != nil {
		return err
	}
	for _, m := range members {
		n.mu.Lock()
		start := !n.busy[m] && len(n.busy) < workers
		if start {
			n.busy[m] = true
		}
		n.mu.Unlock()
		if start && !n.life.Go(func(ctx context.Context) { n.serve(ctx, m) }) {
			return nil // closing
		}
	}
	return nil
}

// serve posts a batch of a Member's notifications due, one at a time in
// order, then lets the loop hand out the next turn.
func (n *Notifier) serve(ctx context.Context, member string) {
	defer func() {
		n.mu.Lock()
		delete(n.busy, member)
		n.mu.Unlock()
		n.poke()
	}()
	due, err := n.opts.Store.DueNotifications(ctx, member, time.Now(), workerBatch)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Error("read a member's notifications due", "user", member, "err", err)
		}
		return
	}
	for _, x := range due {
		if ctx.Err() != nil {
			return
		}
		n.deliver(ctx, x)
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
