// Package triggers is the GitHub App's webhook at the Hub: it checks each
// delivery's signature, takes each delivery once, and, after answering
// GitHub, starts a Session from an issue or pull request whose thread
// mentions the App (or whose Repo's trigger label was added), or queues a
// later mention by the Session's Creator, on that thread or on the pull
// request the Session opened, as a prompt to it; others' comments there are
// never prompts, and show in the Session's history as context if its
// Creator turned that on. A check run, check suite or review on a pull
// request from one of the Hub's Repos has the Hub read its checks and
// review again (Options.PullChanged). Only internal/hub imports it.
package triggers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

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
	// StartAttempts starts an attempt set of n such Sessions, each as
	// Start does, and returns their ids in order; when one after the
	// first could not start, those that did, with the error.
	StartAttempts(ctx context.Context, creator store.User, repoURL, title, prompt string, n int) ([]string, error)
	// Prompt queues text as creator's prompt to the Session id, waking it;
	// src, when set, is whose words it is (auto-fix's reviewer or check),
	// queued on creator's behalf.
	Prompt(ctx context.Context, creator store.User, id, text string, src store.PromptSource) error
	// HasClaudeToken reports whether u stored a Claude setup token.
	HasClaudeToken(ctx context.Context, u store.User) bool
	// Progress says how the Session id goes, for its reply in the thread.
	Progress(ctx context.Context, id string) (Progress, error)
	// Note records text in the Session id's history, redacted as any
	// Event is; it is no prompt.
	Note(ctx context.Context, id, text string) error
}

// GitHub is what a trigger asks of GitHub as the App (a *github.Client).
type GitHub interface {
	ParseRepo(repoURL string) (owner, name string, ok bool)
	// AppSlug is the name people mention the App by.
	AppSlug(ctx context.Context) (string, error)
	CanPush(ctx context.Context, owner, repo, login string) (bool, error)
	// PullHead is pull request n's head branch and the id of the
	// repository it is in; ErrNotFound for none the App can see.
	PullHead(ctx context.Context, owner, repo string, n int) (branch string, repoID int64, err error)
	Comment(ctx context.Context, owner, repo string, n int, body string) (int64, error)
	EditComment(ctx context.Context, owner, repo string, id int64, body string) error
}

// Store is the parts of the Hub's store a Receiver uses: the threads it
// replies in and the deliveries it takes, and what it reads of the
// Sessions, Members, Repos and branches they name.
type Store struct {
	Threads  *store.Threads
	Sessions interface {
		SessionByID(ctx context.Context, id string) (store.Session, error)
	}
	Members interface {
		UserByID(ctx context.Context, id string) (store.User, error)
		MemberByGitHubID(ctx context.Context, id int64) (store.User, error)
	}
	Repos interface {
		List(ctx context.Context) ([]store.Repo, error)
		RepoAutoFix(ctx context.Context, repoID string) (store.AutoFix, error)
		RepoLimits(ctx context.Context, repoID string) (store.RepoLimits, error)
		TriggerLabel(ctx context.Context, repoID string) (string, error)
	}
	Branches interface {
		CountFix(ctx context.Context, repo string, pull int) (int, error)
		BranchSessions(ctx context.Context, branch string) ([]store.SessionBranch, error)
	}
}

// Options configure a Receiver.
type Options struct {
	// Secret is the App's webhook secret (GITHUB_WEBHOOK_SECRET); without
	// one every delivery is refused.
	Secret   []byte
	Store    Store
	GitHub   GitHub
	Sessions Sessions
	// PublicURL is the Hub's address, for the Session's link in a reply.
	PublicURL string
	// Ignored, if set, counts a delivery of an event the Hub does not act on.
	Ignored func(event string)
	// RefusalDropped, if set, counts a refusal not posted: the person was
	// refused in that thread within the day.
	RefusalDropped func()
	// PullChanged, if set, is told of a pull request on one of the Hub's
	// Repos, not a fork's, whose checks or review GitHub says changed
	// (check_run, check_suite, pull_request_review), by the Repo's URL
	// and the pull request's head branch, so it is read again.
	PullChanged func(ctx context.Context, repoURL, branch string)
	// Pushed, if set, is told of a push to the default branch of one of
	// the Hub's Repos, reaching commit, with the files it changed (nil:
	// too many commits to say, any file).
	Pushed func(ctx context.Context, repo store.Repo, commit string, changed []string) error
	// EditGap is the least time between two edits of a Session's reply as
	// it goes; default DefaultEditGap.
	EditGap time.Duration
	Logger  *slog.Logger
}

// Receiver takes the App's webhook deliveries.
type Receiver struct {
	opts Options
	log  *slog.Logger
	// poke wakes the worker, which acts on the deliveries recorded and not
	// done, one at a time in the order they came, so a Creator's mention
	// right after the one that started their Session finds it.
	poke chan struct{}
	life *lifetime.Group // the worker's and the replies' edits; Close ends them

	editing sync.Mutex // held across an edit of a reply
	mu      sync.Mutex
	due     map[string]bool   // Sessions whose reply is to be edited after the gap
	said    map[string]string // each Session's reply as last posted or edited
}

// workTimeout bounds one delivery's work, which a stop waits for rather
// than cut in half.
const workTimeout = time.Minute

// New starts a Receiver, whose worker first acts on the deliveries a
// Hub before it took and did not act on; Close stops it.
func New(opts Options) *Receiver {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Ignored == nil {
		opts.Ignored = func(string) {}
	}
	if opts.RefusalDropped == nil {
		opts.RefusalDropped = func() {}
	}
	if opts.PullChanged == nil {
		opts.PullChanged = func(context.Context, string, string) {}
	}
	if opts.EditGap <= 0 {
		opts.EditGap = DefaultEditGap
	}
	r := &Receiver{opts: opts, log: opts.Logger.With("component", "triggers"), poke: make(chan struct{}, 1),
		life: lifetime.New(), due: map[string]bool{}, said: map[string]string{}}
	r.life.Go(r.run)
	return r
}

// Close stops the worker and waits for the work under way; deliveries
// taken and not yet acted on stay recorded for the next start.
func (r *Receiver) Close() { r.life.Close() }

// run acts on each delivery recorded and not done, oldest first, until
// Close.
func (r *Receiver) run(ctx context.Context) {
	for ctx.Err() == nil {
		d, ok, err := r.opts.Store.Threads.NextDelivery(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Error("read the next GitHub delivery to act on; the next delivery tries again", "err", err)
		}
		if err == nil && ok {
			r.do(ctx, d)
			continue
		}
		select {
		case <-r.poke:
		case <-ctx.Done():
		}
	}
}

// do acts on one delivery to its end, a stop notwithstanding, and records
// it done.
func (r *Receiver) do(ctx context.Context, d store.Delivery) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), workTimeout)
	defer cancel()
	if act := actions[d.Event]; act != nil {
		if err := act(r, ctx, d.Work); err != nil {
			r.log.Warn("a GitHub delivery's work failed", "delivery", d.ID, "event", d.Event, "err", err)
		}
	}
	if err := r.opts.Store.Threads.DoneDelivery(ctx, d.ID); err != nil {
		r.log.Error("record a GitHub delivery's work done", "delivery", d.ID, "err", err)
	}
}

// Verify reports whether header (X-Hub-Signature-256: sha256=HEX) is
// body's HMAC-SHA256 under secret, compared in constant time. An empty
// secret verifies nothing.
func Verify(secret, body []byte, header string) bool {
	got, ok := signatureOf(header)
	if !ok || len(secret) == 0 {
		return false
	}
	return auth.Equal(got, auth.MAC(secret, body))
}

// signatureOf reads X-Hub-Signature-256's HMAC; ok is false for a header
// that could not be one (no sha256= prefix, not 32 bytes of hex).
func signatureOf(header string) (mac []byte, ok bool) {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	mac, err := hex.DecodeString(hexSig)
	return mac, ok && err == nil && len(mac) == sha256.Size
}

// Take reads and checks a delivery, records its id and its body's digest
// with its work in one transaction, and has the worker act on it after
// the caller has answered. It returns ErrUnauthorized for a bad
// signature, ErrTooLarge for a body over MaxBody, ErrInvalid for a
// delivery without its id or event; a delivery taken before, by its id or
// by its body within a day (the id header is not signed: a captured
// delivery replayed under a fresh one is the same body), is no error, and
// changes nothing.
//
// Until the signature is checked it reads only what checking needs: no
// body at all when no signature could pass (no secret set, no header, a
// malformed one, a Content-Length over MaxBody), else the body up to
// MaxBody. Nothing is parsed or stored before the signature passes.
func (r *Receiver) Take(req *http.Request) error {
	if len(r.opts.Secret) == 0 || r.opts.GitHub == nil {
		return fmt.Errorf("this Hub takes no GitHub webhooks: set GITHUB_WEBHOOK_SECRET, and the GitHub App (GITHUB_APP_ID): %w", errdefs.ErrUnauthorized)
	}
	sig := req.Header.Get("X-Hub-Signature-256")
	if _, ok := signatureOf(sig); !ok {
		return fmt.Errorf("the delivery has no X-Hub-Signature-256 of GitHub's form (sha256= and 64 hex digits): set a webhook secret on the GitHub App: %w", errdefs.ErrUnauthorized)
	}
	if req.ContentLength > MaxBody {
		return fmt.Errorf("the delivery is over %d bytes: %w", MaxBody, errdefs.ErrTooLarge)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, req.Body, MaxBody))
	if err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			return fmt.Errorf("the delivery is over %d bytes: %w", MaxBody, errdefs.ErrTooLarge)
		}
		return fmt.Errorf("read the delivery: %v: %w", err, errdefs.ErrInvalid)
	}
	if !Verify(r.opts.Secret, body, sig) {
		return fmt.Errorf("the delivery's X-Hub-Signature-256 is not this Hub's GITHUB_WEBHOOK_SECRET's: set the same secret on the GitHub App: %w", errdefs.ErrUnauthorized)
	}
	id, event := req.Header.Get("X-GitHub-Delivery"), req.Header.Get("X-GitHub-Event")
	if id == "" || event == "" || len(id) > 100 || len(event) > 100 {
		return fmt.Errorf("the delivery has no X-GitHub-Delivery or X-GitHub-Event header: %w", errdefs.ErrInvalid)
	}
	var work []byte
	if _, known := actions[event]; known {
		work = body
	}
	digest := sha256.Sum256(body)
	fresh, err := r.opts.Store.Threads.TakeDelivery(req.Context(), id, event, hex.EncodeToString(digest[:]), work)
	if err != nil || !fresh {
		return err
	}
	if work == nil {
		r.opts.Ignored(event)
		return nil
	}
	select {
	case r.poke <- struct{}{}:
	default: // the worker is poked already
	}
	return nil
}

// actions are the events the Hub acts on; "ping" is GitHub's hello when
// the webhook is set up, taken with nothing to do.
var actions = map[string]func(*Receiver, context.Context, []byte) error{
	"ping":                func(*Receiver, context.Context, []byte) error { return nil },
	"issue_comment":       (*Receiver).issueComment,
	"issues":              (*Receiver).issueLabeled,
	"check_run":           (*Receiver).checkRun,
	"check_suite":         (*Receiver).checkSuite,
	"pull_request_review": (*Receiver).review,
	"push":                (*Receiver).push,
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
		// PullRequest is set when the issue is a pull request: GitHub
		// numbers them alike and delivers their comments as an issue's.
		PullRequest *struct{} `json:"pull_request"`
	}
	ghComment struct {
		ID      int64  `json:"id"`
		Body    string `json:"body"`
		HTMLURL string `json:"html_url"`
		User    ghUser `json:"user"`
	}
	ghRepo struct {
		ID       int64  `json:"id"`
		FullName string `json:"full_name"`
		CloneURL string `json:"clone_url"`
		HTMLURL  string `json:"html_url"`
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
	repoURL     string     // the Hub's Repo's URL, or GitHub's clone URL for a new one
	webURL      string     // the repository's page on GitHub
	hub         store.Repo // the Hub's Repo; no ID for none
	issue       ghIssue
}

func (t thread) repo() string { return t.owner + "/" + t.name }

// issueComment: a new comment mentioning the App is a prompt to the
// Session its writer has on this thread (on a pull request, the one that
// opened it first), or starts one. Any comment, a mention or not, is
// context in the history of each of the thread's Sessions whose Creator
// is someone else and turned that on.
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
	th, err := r.threadOf(ctx, p)
	if err != nil {
		return err
	}
	sessions, err := r.threadSessions(ctx, th, p.Repository)
	if err != nil {
		return err
	}
	if err := r.showAsContext(ctx, th, sessions, p.Comment); err != nil {
		return err
	}
	if !Mentions(p.Comment.Body, slug) {
		return nil
	}
	creator, ok := r.creator(ctx, p.Comment.User, th)
	if !ok {
		return r.refuse(ctx, th, p.Comment.User)
	}
	if n, asked := attemptsAsked(p.Comment.Body); asked {
		return r.startAttempts(ctx, th, creator, n, firstPrompt(th, p.Comment.User, p.Comment.Body, p.Comment.HTMLURL))
	}
	if i := slices.IndexFunc(sessions, func(s store.Session) bool { return s.CreatorID == creator.ID }); i >= 0 {
		id := sessions[i].ID
		if err := r.opts.Sessions.Prompt(ctx, creator, id, laterPrompt(th, p.Comment), store.PromptSource{}); err != nil {
			return err
		}
		return r.note(ctx, id, "The latest it took: "+p.Comment.HTMLURL)
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
	th, err := r.repoOf(ctx, p.Repository)
	th.issue = p.Issue
	return th, err
}

// repoOf is a delivery's repository as a thread with no issue yet: its
// owner and name on GitHub, and the Hub's Repo for it (hub.ID "" for none,
// then repoURL is GitHub's clone URL).
func (r *Receiver) repoOf(ctx context.Context, repo ghRepo) (thread, error) {
	th := thread{repoURL: repo.CloneURL, webURL: repo.HTMLURL}
	var ok bool
	th.owner, th.name, ok = r.opts.GitHub.ParseRepo(repo.CloneURL)
	if !ok {
		return th, fmt.Errorf("the delivery's repository %q is not on this Hub's GitHub", repo.CloneURL)
	}
	repos, err := r.opts.Store.Repos.List(ctx)
	for _, hub := range repos {
		if o, n, ok := r.opts.GitHub.ParseRepo(hub.URL); ok && o == th.owner && n == th.name {
			th.repoURL, th.hub = hub.URL, hub
			break
		}
	}
	return th, err
}

// triggerLabel is the thread's Repo's trigger label; "" for a Repo the Hub
// does not know, or one with none.
func (r *Receiver) triggerLabel(ctx context.Context, th thread) (string, error) {
	if th.hub.ID == "" {
		return "", nil
	}
	return r.opts.Store.Repos.TriggerLabel(ctx, th.hub.ID)
}

// creator is the Creator rule: the GitHub user who triggered is a Member,
// with a Claude setup token stored, and GitHub gives them push permission
// on the Repo now. ok is false otherwise, or when any of it could not be
// asked: nothing starts on a doubt.
func (r *Receiver) creator(ctx context.Context, who ghUser, th thread) (store.User, bool) {
	u, err := r.opts.Store.Members.MemberByGitHubID(ctx, who.ID)
	if err != nil || u.GitHubLogin == "" || !r.opts.Sessions.HasClaudeToken(ctx, u) {
		return store.User{}, false
	}
	push, err := r.opts.GitHub.CanPush(ctx, th.owner, th.name, u.GitHubLogin)
	if err != nil {
		r.log.Warn("could not ask GitHub for a trigger's Creator's permission", "repo", th.repo(), "err", err)
	}
	return u, err == nil && push
}

// threadSessions are the Sessions a comment in the thread is for, none
// archived: on a pull request, the one that opened it (pullSession); then
// those started from the thread, with the Hub's reply there, newest first.
func (r *Receiver) threadSessions(ctx context.Context, th thread, repo ghRepo) ([]store.Session, error) {
	var out []store.Session
	pull, ok, err := r.commentedPull(ctx, th)
	if err == nil && ok {
		var s store.Session
		s, _, ok, err = r.pullSession(ctx, th, repo, pull)
		if ok {
			out = append(out, s)
		}
	}
	if err != nil {
		return nil, err
	}
	threads, err := r.opts.Store.Threads.ThreadSessions(ctx, th.repo(), th.issue.Number)
	if err != nil {
		return nil, err
	}
	for _, t := range threads {
		s, err := r.opts.Store.Sessions.SessionByID(ctx, t.SessionID)
		if err == nil && s.State != store.Archived && t.ReplyID != 0 &&
			!slices.ContainsFunc(out, func(o store.Session) bool { return o.ID == s.ID }) {
			out = append(out, s)
		}
	}
	return out, nil
}

// commentedPull is the pull request whose thread th is, with its head as
// GitHub says it now; ok is false for an issue, or a pull request of a
// Repo the Hub does not have or the App cannot see.
func (r *Receiver) commentedPull(ctx context.Context, th thread) (pull ghPull, ok bool, err error) {
	if th.issue.PullRequest == nil || th.hub.ID == "" {
		return pull, false, nil
	}
	pull.Number = th.issue.Number
	pull.Head.Ref, pull.Head.Repo.ID, err = r.opts.GitHub.PullHead(ctx, th.owner, th.name, th.issue.Number)
	if errors.Is(err, errdefs.ErrNotFound) {
		return pull, false, nil
	}
	return pull, err == nil, err
}

// start starts the Session and replies once in the thread with its link.
func (r *Receiver) start(ctx context.Context, th thread, creator store.User, prompt string) error {
	id, err := r.opts.Sessions.Start(ctx, creator, th.repoURL, title(th.issue), prompt)
	if err != nil {
		return r.startFailed(ctx, th, creator, err)
	}
	return r.started(ctx, th, creator, id)
}

// startFailed replies startFailedText in the thread. The reason stays in
// the Hub, in its log (do logs what this returns): the thread may be
// public, and the Hub's words name its Runners, its Repos' settings and
// its Members' state.
func (r *Receiver) startFailed(ctx context.Context, th thread, creator store.User, err error) error {
	_, cerr := r.opts.GitHub.Comment(ctx, th.owner, th.name, th.issue.Number,
		fmt.Sprintf(startFailedText, creator.GitHubLogin, r.startFailedLink(th)))
	return errors.Join(fmt.Errorf("start a Session from %s#%d: %w", th.repo(), th.issue.Number, err), cerr)
}

// started records the Session id started from the thread, and replies
// there once with its link.
func (r *Receiver) started(ctx context.Context, th thread, creator store.User, id string) error {
	if err := r.opts.Store.Threads.AddThread(ctx, store.Thread{SessionID: id, Repo: th.repo(), Issue: th.issue.Number}); err != nil {
		return err
	}
	body := r.reply(creator.GitHubLogin, id, Progress{State: store.Starting}, "")
	reply, err := r.opts.GitHub.Comment(ctx, th.owner, th.name, th.issue.Number, body)
	if err != nil {
		return err
	}
	if err := r.opts.Store.Threads.SetThreadReply(ctx, id, reply); err != nil {
		return err
	}
	r.remember(id, body)
	// It may have moved on before its reply was recorded.
	r.Changed(id)
	return nil
}

// startFailedText is the one reply when a Session could not start from a
// thread, whatever the reason: a fixed sentence and the Hub's link, never
// the error's text.
const startFailedText = "@%s, kndl could not start a Session for this. The reason is on the Hub, which says it when you start the Session there, and in its log: %s"

// startFailedLink is where a failed start sends its Creator: the Repo's
// page on the Hub, or the Hub's front page for a Repo it does not have.
func (r *Receiver) startFailedLink(th thread) string {
	link := strings.TrimSuffix(r.opts.PublicURL, "/") + "/"
	if th.hub.ID != "" {
		link += "repos/" + th.hub.ID
	}
	return link
}

// note records what the Session's reply says of its thread's own latest,
// and edits the reply at once to say it.
func (r *Receiver) note(ctx context.Context, sessionID, text string) error {
	if err := r.opts.Store.Threads.SetThreadNote(ctx, sessionID, text); err != nil {
		return err
	}
	return r.editReply(ctx, sessionID)
}

// refuseText is the one reply to anyone the Creator rule turns down, alike
// whichever part failed, so it does not tell who is a Member.
const refuseText = "@%s, kndl starts a Session from GitHub only for a Member of its Hub who has stored a Claude setup token and may push to this repository, so nothing was started. If that should be you, ask the Hub's Owner."

// refuse replies refuseText to who, at most once a day in a thread
// (Store.TakeRefusal): anyone who may comment could otherwise have the App
// post a reply for each comment. The rest are dropped, and counted.
func (r *Receiver) refuse(ctx context.Context, th thread, who ghUser) error {
	fresh, err := r.opts.Store.Threads.TakeRefusal(ctx, th.repo(), th.issue.Number, who.ID)
	if err != nil || !fresh {
		if err == nil {
			r.opts.RefusalDropped()
		}
		return err
	}
	_, err = r.opts.GitHub.Comment(ctx, th.owner, th.name, th.issue.Number, fmt.Sprintf(refuseText, who.Login))
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
