package triggers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"

	"kndl.dev/kndl/internal/hub/attempts"
	"kndl.dev/kndl/internal/store"
)

// attemptsWord is attempts=N in a comment, as a word of its own.
var attemptsWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(?:^|\s)attempts=(\S*)`) })

// attemptsAsked reads attempts=N from a comment: asked is whether it has
// one, n its count (0 for one that is no number, which no range takes).
func attemptsAsked(body string) (n int, asked bool) {
	m := attemptsWord().FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	n, _ = strconv.Atoi(m[1])
	return n, true
}

// attemptsOffText is the reply to attempts=N on a Repo that does not
// allow it; attemptsRangeText to a count out of range. Both are fixed
// sentences, as refuseText is: nothing of the Hub's state but the
// setting, which anyone who may push can read on the Repo's page.
const (
	attemptsOffText   = "@%s, this Repo does not start attempt sets from GitHub, so nothing was started. Someone who may push to it turns them on with kndl repo edit --repo URL --github-attempts, or on the Repo's page: %s"
	attemptsRangeText = "@%s, an attempt set has %d to %d Sessions, so nothing was started: ask for attempts=%d to attempts=%d, or leave attempts= out for one Session."
)

// startAttempts starts an attempt set of n Sessions from the thread, if
// its Repo allows it and n is in range, each with its reply as start's;
// otherwise it replies why, and starts nothing. An attempt set is n
// Sessions wherever a limit counts them: each is started and held as a
// Session started from GitHub is.
func (r *Receiver) startAttempts(ctx context.Context, th thread, creator store.User, n int, prompt string) error {
	allowed := false
	if th.hub.ID != "" {
		l, err := r.opts.Store.Repos.RepoLimits(ctx, th.hub.ID)
		if err != nil {
			return err
		}
		allowed = l.GitHubAttempts
	}
	var text string
	switch {
	case !allowed:
		text = fmt.Sprintf(attemptsOffText, creator.GitHubLogin, r.startFailedLink(th))
	case attempts.CheckCount(n) != nil:
		text = fmt.Sprintf(attemptsRangeText, creator.GitHubLogin, attempts.Min, attempts.Max, attempts.Min, attempts.Max)
	}
	if text != "" {
		_, err := r.opts.GitHub.Comment(ctx, th.owner, th.name, th.issue.Number, text)
		return err
	}
	ids, err := r.opts.Sessions.StartAttempts(ctx, creator, th.repoURL, title(th.issue), prompt, n)
	if err != nil && len(ids) == 0 {
		return r.startFailed(ctx, th, creator, err)
	}
	for _, id := range ids {
		err = errors.Join(err, r.started(ctx, th, creator, id))
	}
	return err
}
