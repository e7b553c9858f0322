// Package triggers is the GitHub App's webhook at the Hub: it checks each
// delivery's signature, takes each delivery once, and, after answering
// GitHub, starts a Session from an issue or pull request whose thread
// mentions the App (or whose Repo's trigger label was added), or queues a
// later mention by the Session's Creator as a prompt to it. Only
// internal/hub imports it.
package triggers

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/lifetime"
	"kndl.dev/kndl/internal/store"
)

// MaxBody bounds a delivery's body: GitHub caps a payload at 25 MiB.
const MaxBody = 25 << 20

// Sessions is what a trigger asks of the Hub's Sessions.
type Sessions interface {
	// Start starts a Session on repoURL as creator's, titled title, with
	// prompt its first, and returns its id.
	Start(ctx context.Context, creator store.User, repoURL, title, prompt string) (string, error)
	// Prompt queues text as creator's prompt to the Session id, waking it.
	Prompt(ctx context.Context, creator store.User, id, text string) error
	// HasClaudeToken reports whether u stored a Claude setup token.
	HasClaudeToken(ctx context.Context, u store.User) bool
}

// GitHub is what a trigger asks of GitHub as the App (a *github.Client).
type GitHub interface {
	ParseRepo(repoURL string) (owner, name string, ok bool)
	// AppSlug is the name people mention the App by.
	AppSlug(ctx context.Context) (string, error)
	CanPush(ctx context.Context, owner, repo, login string) (bool, error)
	Comment(ctx context.Context, owner, repo string, n int, body string) (int64, error)
	EditComment(ctx context.Context, owner, repo string, id int64, body string) error
}

// Options configure a Receiver.
type Options struct {
	// Secret is the App's webhook secret (GITHUB_WEBHOOK_SECRET); without
	// one every delivery is refused.
	Secret   []byte
	Store    *store.Store
	GitHub   GitHub
	Sessions Sessions
	// PublicURL is the Hub's address, for the Session's link in a reply.
	PublicURL string
	// Ignored, if set, counts a delivery of an event the Hub does not act on.
	Ignored func(event string)
	Logger  *slog.Logger
}

// Receiver takes the App's webhook deliveries.
type Receiver struct {
	opts Options
	log  *slog.Logger
	// work is the deliveries taken, acted on by one worker in the order
	// they came, so a Creator's mention right after the one that started
	// their Session finds it.
	work chan func(context.Context)
	life *lifetime.Group // the worker's; Close ends it
}

// queued bounds the deliveries waiting for the worker; past it an answer
// waits, within GitHub's 10 s, for room.
const queued = 256

// New starts a Receiver; Close stops it.
func New(opts Options) *Receiver {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Ignored == nil {
		opts.Ignored = func(string) {}
	}
	r := &Receiver{opts: opts, log: opts.Logger.With("component", "triggers"), work: make(chan func(context.Context), queued),
		life: lifetime.New()}
	r.life.Go(func(ctx context.Context) {
		for {
			select {
			case do := <-r.work:
				do(ctx)
			case <-ctx.Done():
				return
			}
		}
	})
	return r
}

// Close stops the worker and waits for it; deliveries taken and not yet
// acted on are dropped (GitHub's redelivery of one is a new delivery id
// only when a person asks for it).
func (r *Receiver) Close() { r.life.Close() }

// Verify reports whether header (X-Hub-Signature-256: sha256=HEX) is
// body's HMAC-SHA256 under secret, compared in constant time. An empty
// secret verifies nothing.
func Verify(secret, body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(secret) == 0 {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return auth.Equal(got, mac.Sum(nil))
}

// Take reads and checks a delivery, records its id, and acts on it after
// the caller has answered. It returns ErrUnauthorized for a bad
// signature, ErrTooLarge for a body over MaxBody, ErrInvalid for a
// delivery without its id or event; a delivery taken before is no error,
// and changes nothing.
func (r *Receiver) Take(req *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, req.Body, MaxBody))
	if err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			return fmt.Errorf("the delivery is over %d bytes: %w", MaxBody, errdefs.ErrTooLarge)
		}
		return fmt.Errorf("read the delivery: %v: %w", err, errdefs.ErrInvalid)
	}
	if len(r.opts.Secret) == 0 || r.opts.GitHub == nil {
		return fmt.Errorf("this Hub takes no GitHub webhooks: set GITHUB_WEBHOOK_SECRET, and the GitHub App (GITHUB_APP_ID): %w", errdefs.ErrUnauthorized)
	}
	if !Verify(r.opts.Secret, body, req.Header.Get("X-Hub-Signature-256")) {
		return fmt.Errorf("the delivery's X-Hub-Signature-256 is not this Hub's GITHUB_WEBHOOK_SECRET's: set the same secret on the GitHub App: %w", errdefs.ErrUnauthorized)
	}
	id, event := req.Header.Get("X-GitHub-Delivery"), req.Header.Get("X-GitHub-Event")
	if id == "" || event == "" || len(id) > 100 || len(event) > 100 {
		return fmt.Errorf("the delivery has no X-GitHub-Delivery or X-GitHub-Event header: %w", errdefs.ErrInvalid)
	}
	fresh, err := r.opts.Store.TakeDelivery(req.Context(), id, event)
	if err != nil || !fresh {
		return err
	}
	act, known := actions[event]
	if !known {
		r.opts.Ignored(event)
		return nil
	}
	do := func(ctx context.Context) {
		if err := act(r, ctx, body); err != nil {
			r.log.Warn("a GitHub delivery's work failed", "delivery", id, "event", event, "err", err)
		}
	}
	select {
	case r.work <- do:
		return nil
	case <-req.Context().Done():
	case <-r.life.Context().Done():
	}
	r.log.Warn("a GitHub delivery was taken but dropped: the Hub is shutting down or behind", "delivery", id, "event", event)
	return fmt.Errorf("the Hub could not queue the delivery: %w", errdefs.ErrUnavailable)
}

// actions are the events the Hub acts on; "ping" is GitHub's hello when
// the webhook is set up, taken with nothing to do.
var actions = map[string]func(*Receiver, context.Context, []byte) error{
	"ping":          func(*Receiver, context.Context, []byte) error { return nil },
	"issue_comment": (*Receiver).issueComment,
	"issues":        (*Receiver).issueLabeled,
}

// The parts of GitHub's issue_comment and issues payloads a trigger reads.
type (
	ghUser struct {
		ID    int64  `json:"id"`
		Login string `json:"login"`
		Type  string `json:"type"` // User or Bot
	}
	ghIssue struct {
		Number  int    `json:"number"`
		Title   string `json:"title"`
		Body    string `json:"body"`
		HTMLURL string `json:"html_url"`
	}
	ghComment struct {
		ID      int64  `json:"id"`
		Body    string `json:"body"`
		HTMLURL string `json:"html_url"`
		User    ghUser `json:"user"`
	}
	ghRepo struct {
		FullName string `json:"full_name"`
		CloneURL string `json:"clone_url"`
	}
	payload struct {
		Action     string                `json:"action"`
		Issue      ghIssue               `json:"issue"`
		Comment    ghComment             `json:"comment"`
		Label      struct{ Name string } `json:"label"`
		Repository ghRepo                `json:"repository"`
		Sender     ghUser                `json:"sender"`
	}
)

// thread is where a trigger happened: the Repo and the issue.
type thread struct {
	owner, name string
	repoURL     string // the Hub's Repo's URL, or GitHub's clone URL for a new one
	issue       ghIssue
}

func (t thread) repo() string { return t.owner + "/" + t.name }

// issueComment: a new comment mentioning the App starts a Session, or is a
// prompt to the Session its writer started from this thread.
func (r *Receiver) issueComment(ctx context.Context, body []byte) error {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("read the issue_comment payload: %w", err)
	}
	// A Bot's comments are the App's own replies, among others: never a
	// trigger, so no reply can trigger another.
	if p.Action != "created" || p.Comment.User.Type == "Bot" {
		return nil
	}
	slug, err := r.opts.GitHub.AppSlug(ctx)
	if err != nil {
		return err
	}
	if !Mentions(p.Comment.Body, slug) {
		return nil
	}
	th, err := r.threadOf(ctx, p)
	if err != nil {
		return err
	}
	creator, ok := r.creator(ctx, p.Comment.User, th)
	if !ok {
		return r.refuse(ctx, th, p.Comment.User)
	}
	if t, err := r.creatorsSession(ctx, th, creator); err != nil || t.SessionID != "" {
		if err != nil {
			return err
		}
		if err := r.opts.Sessions.Prompt(ctx, creator, t.SessionID, laterPrompt(th, p.Comment)); err != nil {
			return err
		}
		return r.opts.GitHub.EditComment(ctx, th.owner, th.name, t.ReplyID, r.reply(creator, t.SessionID, p.Comment.HTMLURL))
	}
	return r.start(ctx, th, creator, firstPrompt(th, p.Comment.User, p.Comment.Body, p.Comment.HTMLURL))
}

// issueLabeled: the Repo's trigger label added to an issue starts a
// Session, its Creator whoever added it.
func (r *Receiver) issueLabeled(ctx context.Context, body []byte) error {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("read the issues payload: %w", err)
	}
	if p.Action != "labeled" || p.Sender.Type == "Bot" || p.Label.Name == "" {
		return nil
	}
	th, err := r.threadOf(ctx, p)
	if err != nil {
		return err
	}
	label, err := r.triggerLabel(ctx, th)
	if err != nil || !strings.EqualFold(label, p.Label.Name) {
		return err
	}
	creator, ok := r.creator(ctx, p.Sender, th)
	if !ok {
		return r.refuse(ctx, th, p.Sender)
	}
	return r.start(ctx, th, creator, firstPrompt(th, p.Sender, "(added the label "+p.Label.Name+")", th.issue.HTMLURL))
}

// threadOf finds the thread's Repo among the Hub's, by its owner and name
// on GitHub, or else takes GitHub's clone URL for it.
func (r *Receiver) threadOf(ctx context.Context, p payload) (thread, error) {
	th := thread{repoURL: p.Repository.CloneURL, issue: p.Issue}
	var ok bool
	th.owner, th.name, ok = r.opts.GitHub.ParseRepo(p.Repository.CloneURL)
	if !ok {
		return th, fmt.Errorf("the delivery's repository %q is not on this Hub's GitHub", p.Repository.CloneURL)
	}
	repos, err := r.opts.Store.Repos(ctx)
	for _, repo := range repos {
		if o, n, ok := r.opts.GitHub.ParseRepo(repo.URL); ok && o == th.owner && n == th.name {
			th.repoURL = repo.URL
			break
		}
	}
	return th, err
}

// triggerLabel is the thread's Repo's trigger label; "" for a Repo the Hub
// does not know, or one with none.
func (r *Receiver) triggerLabel(ctx context.Context, th thread) (string, error) {
	repos, err := r.opts.Store.Repos(ctx)
	for _, repo := range repos {
		if repo.URL == th.repoURL {
			return r.opts.Store.TriggerLabel(ctx, repo.ID)
		}
	}
	return "", err
}

// creator is the Creator rule: the GitHub user who triggered is a Member,
// with a Claude setup token stored, and GitHub gives them push permission
// on the Repo now. ok is false otherwise, or when any of it could not be
// asked: nothing starts on a doubt.
func (r *Receiver) creator(ctx context.Context, who ghUser, th thread) (store.User, bool) {
	u, err := r.opts.Store.MemberByGitHubID(ctx, who.ID)
	if err != nil || u.GitHubLogin == "" || !r.opts.Sessions.HasClaudeToken(ctx, u) {
		return store.User{}, false
	}
	push, err := r.opts.GitHub.CanPush(ctx, th.owner, th.name, u.GitHubLogin)
	if err != nil {
		r.log.Warn("could not ask GitHub for a trigger's Creator's permission", "repo", th.repo(), "err", err)
	}
	return u, err == nil && push
}

// creatorsSession is the newest Session creator started from this thread
// and has not archived, with the Hub's reply there; none has no SessionID.
func (r *Receiver) creatorsSession(ctx context.Context, th thread, creator store.User) (store.Thread, error) {
	threads, err := r.opts.Store.ThreadSessions(ctx, th.repo(), th.issue.Number)
	if err != nil {
		return store.Thread{}, err
	}
	for _, t := range threads {
		s, err := r.opts.Store.SessionByID(ctx, t.SessionID)
		if err == nil && s.CreatorID == creator.ID && s.State != store.Archived && t.ReplyID != 0 {
			return t, nil
		}
	}
	return store.Thread{}, nil
}

// start starts the Session and replies once in the thread with its link.
func (r *Receiver) start(ctx context.Context, th thread, creator store.User, prompt string) error {
	id, err := r.opts.Sessions.Start(ctx, creator, th.repoURL, title(th.issue), prompt)
	if err != nil {
		_, cerr := r.opts.GitHub.Comment(ctx, th.owner, th.name, th.issue.Number,
			fmt.Sprintf("@%s, kndl could not start a Session for this: %v", creator.GitHubLogin, err))
		return errors.Join(fmt.Errorf("start a Session from %s#%d: %w", th.repo(), th.issue.Number, err), cerr)
	}
	if err := r.opts.Store.AddThread(ctx, store.Thread{SessionID: id, Repo: th.repo(), Issue: th.issue.Number}); err != nil {
		return err
	}
	reply, err := r.opts.GitHub.Comment(ctx, th.owner, th.name, th.issue.Number, r.reply(creator, id, ""))
	if err != nil {
		return err
	}
	return r.opts.Store.SetThreadReply(ctx, id, reply)
}

// reply is the Hub's one comment in a Session's thread: the Session's
// link, and the latest comment of the Creator's it took as a prompt.
func (r *Receiver) reply(creator store.User, sessionID, latest string) string {
	link := strings.TrimSuffix(r.opts.PublicURL, "/") + "/sessions/" + sessionID
	s := fmt.Sprintf("@%s started a kndl Session from this, on their Claude account: %s\n\nA later comment of theirs that mentions the App here is a prompt to it.",
		creator.GitHubLogin, link)
	if latest != "" {
		s += " The latest it took: " + latest
	}
	return s
}

// refuseText is the one reply to anyone the Creator rule turns down, alike
// whichever part failed, so it does not tell who is a Member.
const refuseText = "@%s, kndl starts a Session from GitHub only for a Member of its Hub who has stored a Claude setup token and may push to this repository, so nothing was started. If that should be you, ask the Hub's Owner."

func (r *Receiver) refuse(ctx context.Context, th thread, who ghUser) error {
	_, err := r.opts.GitHub.Comment(ctx, th.owner, th.name, th.issue.Number, fmt.Sprintf(refuseText, who.Login))
	return err
}

// Mentions reports whether text mentions @slug as GitHub does: not inside
// a longer name or an email address, in any case.
func Mentions(text, slug string) bool {
	re := regexp.MustCompile(`(?i)(^|[^\w@/.-])@` + regexp.QuoteMeta(slug) + `($|[^\w-])`)
	return re.MatchString(text)
}

// title is the Session's title: the issue's.
func title(is ghIssue) string {
	if r := []rune(is.Title); len(r) > 80 {
		return string(r[:79]) + "…"
	}
	return is.Title
}

// Tell adds text (a limit the Session reached, as its history says it) to
// the Hub's one reply in the thread the Session was started from, if it
// was. It runs on the worker, after the deliveries taken before it, and
// never waits: past a full queue it is dropped, and logged.
func (r *Receiver) Tell(sessionID, text string) {
	do := func(ctx context.Context) {
		if err := r.tell(ctx, sessionID, text); err != nil {
			r.log.Warn("could not tell a Session's thread", "session", sessionID, "err", err)
		}
	}
	select {
	case r.work <- do:
	default:
		r.log.Warn("a Session's thread was not told: the webhook's work is behind", "session", sessionID)
	}
}

func (r *Receiver) tell(ctx context.Context, sessionID, text string) error {
	t, err := r.opts.Store.SessionThread(ctx, sessionID)
	if errors.Is(err, errdefs.ErrNotFound) || (err == nil && t.ReplyID == 0) || r.opts.GitHub == nil {
		return nil // not from a thread, or no reply there to edit
	}
	if err != nil {
		return err
	}
	s, err := r.opts.Store.SessionByID(ctx, sessionID)
	if err != nil {
		return err
	}
	creator, err := r.opts.Store.UserByID(ctx, s.CreatorID)
	if err != nil {
		return err
	}
	owner, name, _ := strings.Cut(t.Repo, "/")
	return r.opts.GitHub.EditComment(ctx, owner, name, t.ReplyID, r.reply(creator, sessionID, "")+"\n\n"+text)
}
