package triggers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/store"
)

// The parts of GitHub's check_run and pull_request_review payloads a fix
// reads.
type (
	ghPull struct {
		Number int `json:"number"`
		Head   struct {
			Ref  string `json:"ref"`
			Repo ghRepo `json:"repo"`
		} `json:"head"`
	}
	checkRunPayload struct {
		Action   string `json:"action"`
		CheckRun struct {
			Name       string `json:"name"`
			Conclusion string `json:"conclusion"`
			HTMLURL    string `json:"html_url"`
			DetailsURL string `json:"details_url"`
			Output     struct {
				Title   string `json:"title"`
				Summary string `json:"summary"`
			} `json:"output"`
			PullRequests []ghPull `json:"pull_requests"`
		} `json:"check_run"`
		Repository ghRepo `json:"repository"`
	}
	checkSuitePayload struct {
		CheckSuite struct {
			PullRequests []ghPull `json:"pull_requests"`
		} `json:"check_suite"`
		Repository ghRepo `json:"repository"`
	}
	reviewPayload struct {
		Action string `json:"action"`
		Review struct {
			State   string `json:"state"`
			Body    string `json:"body"`
			HTMLURL string `json:"html_url"`
			User    ghUser `json:"user"`
		} `json:"review"`
		PullRequest ghPull `json:"pull_request"`
		Repository  ghRepo `json:"repository"`
	}
)

// failing are the conclusions of a check run that failed.
var failing = map[string]bool{"failure": true, "timed_out": true}

// checkRun: any change of a check run changes its pull requests' checks;
// one that completed with a failure on a pull request a Session opened is
// a prompt to that Session, if its Repo sends CI failures back.
func (r *Receiver) checkRun(ctx context.Context, body []byte) error {
	var p checkRunPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("read the check_run payload: %w", err)
	}
	c := p.CheckRun
	if err := r.pullsChanged(ctx, p.Repository, c.PullRequests); err != nil {
		return err
	}
	if p.Action != "completed" || !failing[c.Conclusion] {
		return nil
	}
	log := c.DetailsURL
	if log == "" {
		log = c.HTMLURL
	}
	summary := strings.TrimSpace(c.Output.Title + "\n\n" + c.Output.Summary)
	for _, pull := range c.PullRequests {
		f := fix{pull: pull, src: store.PromptSource{Kind: store.SourceCheck, Name: c.Name}, what: fmt.Sprintf("The check %q concluded %s", c.Name, c.Conclusion),
			intro: "Its summary:\n", text: summary, tail: "\n\nIts log: " + log}
		if err := r.sendBack(ctx, p.Repository, f); err != nil {
			return err
		}
	}
	return nil
}

// checkSuite: any change of a check suite changes its pull requests'
// checks.
func (r *Receiver) checkSuite(ctx context.Context, body []byte) error {
	var p checkSuitePayload
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("read the check_suite payload: %w", err)
	}
	return r.pullsChanged(ctx, p.Repository, p.CheckSuite.PullRequests)
}

// review: any review changes its pull request's review decision; one that
// requests changes on a pull request a Session opened, by someone who may
// push to the Repo, is a prompt to that Session, if its Repo sends
// reviews back.
func (r *Receiver) review(ctx context.Context, body []byte) error {
	var p reviewPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("read the pull_request_review payload: %w", err)
	}
	if err := r.pullsChanged(ctx, p.Repository, []ghPull{p.PullRequest}); err != nil {
		return err
	}
	if p.Action != "submitted" || !strings.EqualFold(p.Review.State, "changes_requested") || p.Review.User.Type == "Bot" {
		return nil
	}
	f := fix{pull: p.PullRequest, reviews: true, reviewer: p.Review.User.Login, src: store.PromptSource{Kind: store.SourceReview, Name: p.Review.User.Login},
		what:  fmt.Sprintf("@%s requested changes (%s)", p.Review.User.Login, p.Review.HTMLURL),
		intro: "Their review:\n", text: p.Review.Body}
	return r.sendBack(ctx, p.Repository, f)
}

// fix is a failure on a pull request to send back to its Session.
type fix struct {
	pull     ghPull
	reviews  bool   // a review (the Repo's reviews setting), not a check (its CI one)
	reviewer string // the review's author, who must have push
	// src is whose words the prompt is: the reviewer's, the check's,
	// never the Creator's, on whose behalf it is queued.
	src  store.PromptSource
	what string // the failure, in a line
	// What GitHub said of it: text, cut to fit the prompt, between intro
	// and tail.
	intro, text, tail string
}

// sendBack queues the failure as a prompt to the Session that opened the
// pull request, if the Repo sends such failures back and the pull request
// has not had its Repo's most, and says so in the Session's thread.
func (r *Receiver) sendBack(ctx context.Context, repo ghRepo, f fix) error {
	th, err := r.repoOf(ctx, repo)
	if err != nil || th.hub.ID == "" {
		return err // a Repo the Hub does not have: no Session's
	}
	settings, err := r.opts.Store.Repos.RepoAutoFix(ctx, th.hub.ID)
	if err != nil || (f.reviews && !settings.Reviews) || (!f.reviews && !settings.CI) {
		return err
	}
	s, creator, ok, err := r.pullSession(ctx, th, repo, f.pull)
	if err != nil || !ok {
		return err
	}
	if f.reviewer != "" {
		if push, err := r.opts.GitHub.CanPush(ctx, th.owner, th.name, f.reviewer); err != nil || !push {
			return err // a review by someone who may not push is no prompt
		}
	}
	n, err := r.opts.Store.Branches.CountFix(ctx, th.repo(), f.pull.Number)
	if err != nil || n > settings.Max+1 {
		return err
	}
	link := fmt.Sprintf("%s/pull/%d", strings.TrimSuffix(th.webURL, "/"), f.pull.Number)
	if n == settings.Max+1 {
		return r.tell(ctx, th, f.pull.Number, s, creator, fmt.Sprintf("%s on %s; not sent to the Session: this pull request had its %d.", f.what, link, settings.Max))
	}
	prompt := fixPrompt(th, f, link, n, settings.Max)
	if err := r.opts.Sessions.Prompt(ctx, creator, s.ID, prompt, f.src); err != nil {
		return err
	}
	return r.tell(ctx, th, f.pull.Number, s, creator, fmt.Sprintf("%s on %s; sent to the Session (%d of %d).", f.what, link, n, settings.Max))
}

// pullsChanged tells opts.PullChanged of each of pulls not from a fork,
// when repo is one of the Hub's Repos; it asks GitHub nothing.
func (r *Receiver) pullsChanged(ctx context.Context, repo ghRepo, pulls []ghPull) error {
	if len(pulls) == 0 {
		return nil
	}
	th, err := r.repoOf(ctx, repo)
	if err != nil || th.hub.ID == "" {
		return err
	}
	for _, p := range pulls {
		if p.Head.Repo.ID == repo.ID {
			r.opts.PullChanged(ctx, th.repoURL, p.Head.Ref)
		}
	}
	return nil
}

// pullSession is the Session that opened the pull request of repo: the
// newest not archived that pushed its branch to the Repo. A fork's branch
// of the same name, or a Repo the Hub does not have, is no Session's.
func (r *Receiver) pullSession(ctx context.Context, th thread, repo ghRepo, pull ghPull) (store.Session, store.User, bool, error) {
	if th.hub.ID == "" || pull.Head.Repo.ID != repo.ID {
		return store.Session{}, store.User{}, false, nil
	}
	bs, err := r.opts.Store.Branches.BranchSessions(ctx, pull.Head.Ref)
	if err != nil {
		return store.Session{}, store.User{}, false, err
	}
	for _, b := range bs {
		if b.RepoURL != th.repoURL {
			continue
		}
		s, err := r.opts.Store.Sessions.SessionByID(ctx, b.SessionID)
		if err != nil {
			return s, store.User{}, false, err
		}
		u, err := r.opts.Store.Members.UserByID(ctx, s.CreatorID)
		return s, u, err == nil, err
	}
	return store.Session{}, store.User{}, false, nil
}

// tell says what was done with a failure: in the Session's reply if it
// was started from a thread, else once on the pull request (the cap
// bounds how often).
func (r *Receiver) tell(ctx context.Context, th thread, pull int, s store.Session, creator store.User, text string) error {
	if t, err := r.opts.Store.Threads.SessionThread(ctx, s.ID); err == nil && t.ReplyID != 0 {
		return r.note(ctx, s.ID, text)
	}
	_, err := r.opts.GitHub.Comment(ctx, th.owner, th.name, pull, fmt.Sprintf("@%s, kndl: %s", creator.GitHubLogin, text))
	return err
}

// fixHead starts a prompt auto-fix queued: its words are not the
// Creator's, though queued on their behalf, and its first line says
// whose they are (SourceOf reads it back for the history).
const fixHead = "From GitHub, not from this Session's Creator, but "

// fixPrompt is a failure as a prompt to its Session, marked as from its
// source (the reviewer, the check), not the Creator.
func fixPrompt(th thread, f fix, link string, n, most int) string {
	head := fmt.Sprintf("%s%s: %s on pull request %s#%d (%s), which this Session opened. This is %d of at most %d sent back for it.\n\n",
		fixHead, sourceWords(f.src), f.what, th.repo(), f.pull.Number, link, n, most)
	return head + f.intro + cut(f.text, api.MaxPromptBytes-len(head)-len(f.intro)-len(f.tail)) + f.tail
}

// sourceWords names a prompt's source in its header.
func sourceWords(src store.PromptSource) string {
	if src.Kind == store.SourceReview {
		return "a review by @" + src.Name
	}
	return "the check " + strconv.Quote(src.Name)
}

// SourceOf reads whose words a prompt is from the header fixPrompt gave
// it; ok is false for any other prompt. It reads what the transcript
// says, as the history shows it: a label, never a credential.
func SourceOf(text string) (src store.PromptSource, ok bool) {
	rest, ok := strings.CutPrefix(text, fixHead)
	if !ok {
		return src, false
	}
	if login, ok := strings.CutPrefix(rest, "a review by @"); ok {
		login, _, ok = strings.Cut(login, ": ")
		return store.PromptSource{Kind: store.SourceReview, Name: login}, ok && login != "" && !strings.ContainsAny(login, " \n")
	}
	if name, ok := strings.CutPrefix(rest, "the check "); ok {
		q, err := strconv.QuotedPrefix(name)
		if err != nil {
			return src, false
		}
		name, _ = strconv.Unquote(q)
		return store.PromptSource{Kind: store.SourceCheck, Name: name}, true
	}
	return src, false
}
