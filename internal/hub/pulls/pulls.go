// Package pulls keeps what each Session pushed to GitHub: the branches its
// Runner's git relay says GitHub took from it (session.pushed), and the
// pull requests opened from them, with an open one's checks and review
// decision, which it reads from GitHub as the App after a push, when GitHub's
// webhook says a pull request's checks or review changed (Reread), and on
// a slow timer, never per page view; the newest one's title is offered as
// the Session's. Only internal/hub imports it.
package pulls

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/lifetime"
	"kndl.dev/kndl/internal/store"
)

// Branches is what a Tracker keeps in the store (store.Branches): each
// Session's branches and the pull requests found for them.
type Branches interface {
	AddSessionBranches(ctx context.Context, sessionID string, branches []string, at time.Time, max int) (added, dropped int, err error)
	SessionBranches(ctx context.Context, sessionID string) ([]store.SessionBranch, error)
	SessionsBranches(ctx context.Context, ids []string) (map[string][]store.SessionBranch, error)
	BranchSessions(ctx context.Context, branch string) ([]store.SessionBranch, error)
	BranchesToCheck(ctx context.Context, limit int) ([]store.SessionBranch, error)
	SetBranchPulls(ctx context.Context, sessionID, branch string, pulls []byte, at time.Time) error
}

// Options configure a Tracker.
type Options struct {
	Store Branches
	// Forge is nil when the Hub has no forge: branches are kept, with no
	// pull requests.
	Forge forge.Forge
	// WebURL is GitHub's web address (GITHUB_URL), for links.
	WebURL string
	// Changed is told when a Session's branches or pull requests changed,
	// so its watchers get it again.
	Changed func(sessionID string)
	// Titled, if set, is told the title of the newest pull request of a
	// Session's branch whose pull requests changed: the Session's title
	// may take it.
	Titled func(ctx context.Context, sessionID, title string)
	// Opened, if set, is told of each pull request a check finds on a
	// Session's branch that the one before did not.
	Opened func(ctx context.Context, sessionID string, p forge.Pull)
	// Every is how often every branch not archived is checked again;
	// default 5 minutes.
	Every time.Duration
	// Gap is the least time between two questions to GitHub about one
	// branch after a push; default DefaultGap.
	Gap    time.Duration
	Logger *slog.Logger
}

// DefaultEvery is how often the Tracker asks GitHub about every branch.
const DefaultEvery = 5 * time.Minute

// checkBatch bounds the questions one round asks GitHub, a branch's pull
// requests and an open one's checks and reviews each one, to stay well
// inside its rate limit (200 every 5 minutes is 2,400 an hour of an
// installation's 5,000); the branches asked about longest ago go first.
const checkBatch = 200

// MaxBranches bounds the branches a Session records. Every one is a branch
// under the Session's prefix that GitHub took, but code in the Sandbox can
// push as many as it likes, so without a cap a Session could make the Hub
// keep, and ask GitHub about, any number of them; further ones are
// dropped, with one line in the Hub's log.
const MaxBranches = 20

// DefaultGap is the least time between two questions to GitHub about one
// branch after a push, asked or failed: a push seen sooner asks once the
// gap is over. With MaxBranches it bounds what one Session's output can
// make the Hub ask GitHub to 20 questions a minute.
const DefaultGap = time.Minute

// Tracker records pushes and keeps their pull requests.
type Tracker struct {
	opts Options
	log  *slog.Logger
	// soon takes Sessions whose push was just seen, for the worker; a full
	// one drops them, and the timer catches up.
	soon chan string
	// poke wakes the worker for the branches in stale.
	poke   chan struct{}
	life   *lifetime.Group // the worker's; Close ends it
	checks sync.Mutex      // one round of GitHub calls at a time

	mu     sync.Mutex
	capped map[string]bool // Sessions whose dropped branches were logged
	later  map[string]bool // Sessions with a check waiting for the gap
	stale  map[pushed]bool // branches a webhook said changed, to read at once
}

// pushed is a Session's branch.
type pushed struct{ sessionID, branch string }

// New starts a Tracker; Close stops it.
func New(opts Options) *Tracker {
	t := newTracker(opts)
	t.life = lifetime.New()
	t.life.Go(t.run)
	return t
}

// newTracker makes a Tracker whose worker is not started.
func newTracker(opts Options) *Tracker {
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	if opts.Gap <= 0 {
		opts.Gap = DefaultGap
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Tracker{opts: opts, log: opts.Logger.With("component", "pulls"), soon: make(chan string, 64),
		poke: make(chan struct{}, 1), capped: map[string]bool{}, later: map[string]bool{}, stale: map[pushed]bool{}}
}

// Close stops the Tracker and waits for it.
func (t *Tracker) Close() {
	t.life.Close()
}

// Pushed records the branches a Session's git relay says GitHub took from
// it, up to MaxBranches, and asks GitHub about them soon, without waiting
// for it. Names that are not a branch name the Hub keeps are dropped.
func (t *Tracker) Pushed(ctx context.Context, sessionID string, pushed []string) {
	var branches []string
	for _, b := range pushed {
		if branchName().MatchString(b) && !strings.Contains(b, "..") {
			branches = append(branches, b)
		}
	}
	if len(branches) == 0 {
		return
	}
	added, dropped, err := t.opts.Store.AddSessionBranches(ctx, sessionID, branches, time.Now(), MaxBranches)
	if err != nil {
		t.log.Error("record pushed branches", "session", sessionID, "err", err)
		return
	}
	if dropped > 0 && t.firstCapped(sessionID) {
		t.log.Warn("a Session pushed more branches than the Hub keeps; further ones are not recorded", "session", sessionID, "max", MaxBranches, "dropped", dropped)
	}
	if added > 0 {
		t.opts.Changed(sessionID)
	}
	t.askSoon(sessionID)
}

// firstCapped reports whether this is the first time the Session's
// branches were dropped, so the log says it once.
func (t *Tracker) firstCapped(sessionID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.capped[sessionID] {
		return false
	}
	t.capped[sessionID] = true
	return true
}

// askSoon hands the Session to the worker; a full queue drops it, and the
// timer catches up.
func (t *Tracker) askSoon(sessionID string) {
	select {
	case t.soon <- sessionID:
	default:
	}
}

// askLater has the worker ask about the Session's branches again after d,
// once however many pushes wait for it.
func (t *Tracker) askLater(ctx context.Context, sessionID string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.later[sessionID] {
		return
	}
	t.later[sessionID] = true
	time.AfterFunc(d, func() {
		t.mu.Lock()
		delete(t.later, sessionID)
		t.mu.Unlock()
		if ctx.Err() == nil {
			t.askSoon(sessionID)
		}
	})
}

func (t *Tracker) run(ctx context.Context) {
	tick := time.NewTicker(t.opts.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-t.soon:
			t.askDue(ctx, id)
		case <-t.poke:
			t.askStale(ctx)
		case <-tick.C:
			bs, err := t.opts.Store.BranchesToCheck(ctx, checkBatch)
			if err == nil {
				t.check(ctx, bs, checkBatch)
			}
		}
	}
}

// askDue asks GitHub about the Session's branches not asked about within
// the gap, and about the others once it is over.
func (t *Tracker) askDue(ctx context.Context, sessionID string) {
	bs, err := t.opts.Store.SessionBranches(ctx, sessionID)
	if err != nil {
		t.log.Error("read a Session's pushed branches", "session", sessionID, "err", err)
		return
	}
	due, wait := dueBranches(bs, time.Now(), t.opts.Gap)
	t.check(ctx, due, 0)
	if wait > 0 {
		t.askLater(ctx, sessionID, wait)
	}
}

// Reread has the worker ask GitHub again, at once and whatever the gap,
// about branch of the Repo at repoURL, for each Session not archived that
// pushed it: GitHub's webhook said the checks or review of a pull request
// from it changed. A branch no Session pushed costs no question to GitHub,
// and one already waiting is asked about once, however many webhooks came
// (a CI's runs each send several).
func (t *Tracker) Reread(ctx context.Context, repoURL, branch string) {
	bs, err := t.opts.Store.BranchSessions(ctx, branch)
	if err != nil {
		t.log.Error("read the Sessions that pushed a branch", "branch", branch, "err", err)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range bs {
		if k := (pushed{b.SessionID, b.Branch}); b.RepoURL == repoURL && !t.stale[k] {
			t.stale[k] = true
			select {
			case t.poke <- struct{}{}:
			default: // the worker is poked already
			}
		}
	}
}

// askStale asks GitHub about the branches Reread was told of, as they are
// kept now.
func (t *Tracker) askStale(ctx context.Context) {
	t.mu.Lock()
	stale := t.stale
	t.stale = map[pushed]bool{}
	t.mu.Unlock()
	var due []store.SessionBranch
	for k := range stale {
		bs, err := t.opts.Store.SessionBranches(ctx, k.sessionID)
		if err != nil {
			t.log.Error("read a Session's pushed branches", "session", k.sessionID, "err", err)
			continue
		}
		if i := slices.IndexFunc(bs, func(b store.SessionBranch) bool { return b.Branch == k.branch }); i >= 0 {
			due = append(due, bs[i])
		}
	}
	t.check(ctx, due, 0)
}

// dueBranches keeps the branches GitHub was last asked about gap ago or
// more, and says how long until the next of the others is due (0: none).
func dueBranches(bs []store.SessionBranch, now time.Time, gap time.Duration) (due []store.SessionBranch, wait time.Duration) {
	for _, b := range bs {
		left := gap - now.Sub(b.CheckedAt)
		if b.CheckedAt.IsZero() || left <= 0 {
			due = append(due, b)
		} else if wait == 0 || left < wait {
			wait = left
		}
	}
	return due, wait
}

// check asks GitHub for each branch's pull requests, with an open one's
// checks and reviews, and keeps what changed; with a budget (not 0) it
// stops once it asked GitHub that many questions, leaving the other
// branches to the next round.
func (t *Tracker) check(ctx context.Context, bs []store.SessionBranch, budget int) {
	if t.opts.Forge == nil {
		return
	}
	t.checks.Lock()
	defer t.checks.Unlock()
	asked := 0
	for _, b := range bs {
		if budget > 0 && asked >= budget {
			return
		}
		owner, name, ok := t.opts.Forge.ParseRepo(b.RepoURL)
		if !ok {
			continue
		}
		ps, err := t.opts.Forge.Pulls(ctx, owner, name, b.Branch)
		asked++
		if err != nil {
			if ctx.Err() != nil {
				return // closing
			}
			t.log.Warn("ask GitHub for a branch's pull requests", "session", b.SessionID, "err", err)
			// A failed question counts for the gap as an answered one: a
			// Sandbox pushing while GitHub fails asks it no more often.
			if err := t.opts.Store.SetBranchPulls(ctx, b.SessionID, b.Branch, b.Pulls, time.Now()); err != nil {
				t.log.Error("keep when GitHub was asked about a branch", "session", b.SessionID, "err", err)
			}
			return // GitHub is failing: the next round asks again
		}
		if ps == nil {
			ps = []forge.Pull{}
		}
		asked += t.readStatus(ctx, owner, name, b, ps)
		j, _ := json.Marshal(ps)
		if err := t.opts.Store.SetBranchPulls(ctx, b.SessionID, b.Branch, j, time.Now()); err != nil {
			t.log.Error("keep a branch's pull requests", "session", b.SessionID, "err", err)
			return
		}
		if string(j) != string(b.Pulls) {
			t.opened(ctx, b, ps)
			if len(ps) > 0 && t.opts.Titled != nil {
				t.opts.Titled(ctx, b.SessionID, ps[0].Title) // newest first
			}
			t.opts.Changed(b.SessionID)
		}
	}
}

// readStatus gives each open pull request of ps its checks and review
// decision, two questions to GitHub each, and says how many it asked; a
// closed one keeps what was read of it while it was open, and so does one
// GitHub did not answer about.
func (t *Tracker) readStatus(ctx context.Context, owner, name string, b store.SessionBranch, ps []forge.Pull) (asked int) {
	var before []forge.Pull
	json.Unmarshal(b.Pulls, &before) // none yet: nothing to keep
	for i := range ps {
		p := &ps[i]
		if j := slices.IndexFunc(before, func(q forge.Pull) bool { return q.Number == p.Number }); j >= 0 {
			p.Checks, p.Review = before[j].Checks, before[j].Review
		}
		if p.State != "open" {
			continue
		}
		asked += 2
		if checks, err := t.opts.Forge.ChecksOf(ctx, owner, name, p.Head.SHA); err == nil {
			p.Checks = checks
		} else {
			t.log.Warn("ask GitHub for a pull request's checks", "session", b.SessionID, "pull", p.Number, "err", err)
		}
		if review, err := t.opts.Forge.ReviewOf(ctx, owner, name, p.Number); err == nil {
			p.Review = review
		} else {
			t.log.Warn("ask GitHub for a pull request's reviews", "session", b.SessionID, "pull", p.Number, "err", err)
		}
	}
	return asked
}

// Opened keeps a pull request the Hub just opened from a Session's branch,
// newest first among the branch's, and tells the Session's watchers, so
// the view shows it without waiting for the next question to GitHub, and
// opts.Opened, since that check will find it kept already.
func (t *Tracker) Opened(ctx context.Context, sessionID, branch string, p forge.Pull) error {
	bs, err := t.opts.Store.SessionBranches(ctx, sessionID)
	if err != nil {
		return err
	}
	for _, b := range bs {
		if b.Branch != branch {
			continue
		}
		var ps []forge.Pull
		json.Unmarshal(b.Pulls, &ps)
		j, _ := json.Marshal(append([]forge.Pull{p}, ps...))
		if err := t.opts.Store.SetBranchPulls(ctx, sessionID, branch, j, time.Now()); err != nil {
			return err
		}
		if t.opts.Titled != nil {
			t.opts.Titled(ctx, sessionID, p.Title)
		}
		if t.opts.Opened != nil {
			t.opts.Opened(ctx, sessionID, p)
		}
		t.opts.Changed(sessionID)
	}
	return nil
}

// opened tells opts.Opened of the pull requests in ps that b's last check did
// not find.
func (t *Tracker) opened(ctx context.Context, b store.SessionBranch, ps []forge.Pull) {
	if t.opts.Opened == nil {
		return
	}
	var before []forge.Pull
	json.Unmarshal(b.Pulls, &before) // none yet: every one is new
	for _, p := range ps {
		if !slices.ContainsFunc(before, func(q forge.Pull) bool { return q.Number == p.Number }) {
			t.opts.Opened(ctx, b.SessionID, p)
		}
	}
}

// Branches is what a Session pushed, as the API shows it.
func (t *Tracker) Branches(ctx context.Context, sessionID string) ([]api.Branch, error) {
	bs, err := t.opts.Store.SessionBranches(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return t.apiBranches(bs), nil
}

// BranchesOf is Branches of each of the Sessions, keyed by id, read in
// one query for a list's rows.
func (t *Tracker) BranchesOf(ctx context.Context, ids []string) (map[string][]api.Branch, error) {
	bs, err := t.opts.Store.SessionsBranches(ctx, ids)
	out := make(map[string][]api.Branch, len(bs))
	for id, b := range bs {
		out[id] = t.apiBranches(b)
	}
	return out, err
}

// apiBranches are branches as the API shows them; nil for none.
func (t *Tracker) apiBranches(bs []store.SessionBranch) []api.Branch {
	if len(bs) == 0 {
		return nil
	}
	out := make([]api.Branch, 0, len(bs))
	for _, b := range bs {
		ab := api.Branch{Name: b.Branch, PushedAt: b.PushedAt}
		if t.opts.Forge != nil {
			if owner, name, ok := t.opts.Forge.ParseRepo(b.RepoURL); ok {
				ab.URL = strings.TrimSuffix(t.opts.WebURL, "/") + "/" + owner + "/" + name + "/tree/" + escapeBranch(b.Branch)
			}
		}
		var ps []forge.Pull
		json.Unmarshal(b.Pulls, &ps)
		for _, p := range ps {
			ab.Pulls = append(ab.Pulls, api.Pull{Number: p.Number, Title: p.Title, URL: p.URL, State: p.State, Merged: p.Merged, Draft: p.Draft,
				Checks: p.Checks, Review: p.Review})
		}
		out = append(out, ab)
	}
	return out
}

func escapeBranch(b string) string {
	parts := strings.Split(b, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// branchName is what the Hub keeps as a branch's name: git's rules, more
// strictly (no leading dash, no "..", a bounded length).
var branchName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}$`) })
