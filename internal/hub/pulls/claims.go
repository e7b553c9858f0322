package pulls

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// What reads as git push's output is whatever code in the Sandbox prints,
// so a branch it names is a claim until GitHub shows it: the branch's head
// on GitHub must be a commit this Session's output named (the new side of
// a push line, or for a new branch, which git prints with no commit, one
// git commit's summary line named), and no other Session of the Repo may
// hold the branch already. A branch belongs to the first Session verified
// with it and never moves (store.AddSessionBranches). This is the one
// place a push line is trusted; the git relay, once it records pushes
// itself, replaces it.

// claim is a branch a Session's output says it pushed, not verified yet.
type claim struct {
	commits []string  // the commits the output named for it, newest last
	asked   time.Time // when GitHub was last asked; zero for never
	misses  int       // answers whose head was none of commits
}

// maxNamed bounds the commits kept for a claim and the commits kept per
// Session from git commit's lines.
const maxNamed = 8

// maxMisses is how many answers that do not show a claim drop it: git
// push prints its lines once GitHub moved the ref, so one is enough; the
// second allows for a later push of the same branch.
const maxMisses = 2

// minNamed is the fewest hex digits a named commit must have to match a
// head: git abbreviates to seven at least by default, and fewer would let
// a claim name a prefix that many heads share.
const minNamed = 7

// Push is a branch git push's output says it sent, with the commit it
// sent ("" for a new branch, which git prints without one).
type Push struct{ Branch, Commit string }

// commitLine is git commit's summary line: "[kndl/x 1a2b3c4] subject",
// "[main (root-commit) 1a2b3c4] subject".
var commitLine = regexp.MustCompile(`(?m)^\[[^\]\n]+? (?:\(root-commit\) )?([0-9a-f]{7,40})\] `)

// CommittedCommits lists the commits git commit's summary lines in text
// name.
func CommittedCommits(text string) []string {
	var out []string
	for _, m := range commitLine.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// remember keeps the commits a Session's git commit lines named, the
// newest maxNamed, for the new branches it pushes later.
func (t *Tracker) remember(sessionID string, commits []string) {
	if len(commits) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := append(t.committed[sessionID], commits...)
	t.committed[sessionID] = rs[max(0, len(rs)-maxNamed):]
}

// claim keeps the pushes as claims of the Session, each with the commits
// it names: its own, or for a new branch the Session's recent commits. A
// branch it holds is no claim; claims past MaxBranches (counting those it
// holds) are dropped. It returns how many were dropped.
func (t *Tracker) claim(sessionID string, held []string, ps []Push) (dropped int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := t.claims[sessionID]
	if cs == nil {
		cs = map[string]*claim{}
		t.claims[sessionID] = cs
	}
	for _, p := range ps {
		if slices.Contains(held, p.Branch) {
			continue
		}
		c := cs[p.Branch]
		if c == nil {
			if len(held)+len(cs) >= MaxBranches {
				dropped++
				continue
			}
			c = &claim{}
			cs[p.Branch] = c
		}
		named := t.committed[sessionID]
		if p.Commit != "" {
			named = []string{p.Commit}
		}
		for _, n := range named {
			if len(n) >= minNamed && !slices.Contains(c.commits, n) {
				c.commits = append(c.commits, n)
			}
		}
		c.commits = c.commits[max(0, len(c.commits)-maxNamed):]
	}
	return dropped
}

// verify asks GitHub for the head of each of the Session's claims not
// asked about within the gap, records as the Session's those whose head
// is a commit they named, and drops those shown wrong maxMisses times. It
// says how long until the next of the others is due (0: none).
func (t *Tracker) verify(ctx context.Context, sessionID string) (wait time.Duration) {
	now := time.Now()
	t.mu.Lock()
	var due []string
	for b, c := range t.claims[sessionID] {
		left := t.opts.Gap - now.Sub(c.asked)
		if c.asked.IsZero() || left <= 0 {
			due = append(due, b)
		} else if wait == 0 || left < wait {
			wait = left
		}
	}
	t.mu.Unlock()
	if len(due) == 0 {
		return wait
	}
	slices.Sort(due)
	s, err := t.opts.Store.SessionByID(ctx, sessionID)
	if err != nil {
		t.log.Error("read a Session to verify its pushes", "session", sessionID, "err", err)
		return wait
	}
	owner, name, ok := t.opts.GitHub.ParseRepo(s.RepoURL)
	for _, b := range due {
		var head string
		var err error
		if ok { // a Repo not on this GitHub has no ref to check
			head, err = t.opts.GitHub.BranchHead(ctx, owner, name, b)
		}
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			t.log.Warn("ask GitHub for a pushed branch's head", "session", sessionID, "err", err)
		}
		shown, gone := t.answered(sessionID, b, head, err, !ok)
		if shown {
			t.own(ctx, sessionID, b)
		}
		if gone && !shown {
			t.log.Info("a branch a Session's output says it pushed is not at a commit it named on GitHub; not recorded", "session", sessionID, "branch", b)
		}
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			break // GitHub is failing: the next push or the gap asks again
		}
	}
	return wait
}

// answered records GitHub's answer about a claim: shown when its head is
// a commit the claim named (or there is no ref to check), gone when the
// claim is done with, shown or missed maxMisses times.
func (t *Tracker) answered(sessionID, branch, head string, err error, unchecked bool) (shown, gone bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.claims[sessionID][branch]
	if c == nil {
		return false, false
	}
	c.asked = time.Now()
	switch {
	case unchecked:
		shown = true
	case err == nil:
		shown = slices.ContainsFunc(c.commits, func(n string) bool { return strings.HasPrefix(head, n) })
	case !errors.Is(err, errdefs.ErrNotFound):
		return false, false // not an answer
	}
	if !shown {
		c.misses++
	}
	if gone = shown || c.misses >= maxMisses; gone {
		delete(t.claims[sessionID], branch)
	}
	return shown, gone
}

// own records a verified branch as the Session's, unless another Session
// of the Repo holds it.
func (t *Tracker) own(ctx context.Context, sessionID, branch string) {
	added, dropped, err := t.opts.Store.AddSessionBranches(ctx, sessionID, []string{branch}, time.Now(), MaxBranches)
	switch {
	case err != nil:
		t.log.Error("record a pushed branch", "session", sessionID, "err", err)
	case dropped > 0:
		t.log.Warn("a Session pushed more branches than the Hub keeps; further ones are not recorded", "session", sessionID, "max", MaxBranches)
	case added == 0:
		t.log.Warn("a Session pushed a branch another Session of its Repo holds; it stays the other's", "session", sessionID, "branch", branch)
	default:
		t.opts.Changed(sessionID)
	}
}
