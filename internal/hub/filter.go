package hub

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
)

// sessionQuery is an api.SessionFilter the Hub has checked, its names
// resolved: what GET /api/sessions, its live socket and the Sessions page
// select by.
type sessionQuery struct {
	me            string // who asks
	mine, waiting bool
	repoID        string
	states        []api.SessionState
	creatorID     string
	search        string // lower-case
}

// filters are the query parameters the Sessions list takes.
var filters = []string{api.FilterMine, api.FilterWaiting, api.FilterRepo, api.FilterState, api.FilterCreator, api.FilterSearch}

// sessionQueryOf reads a Sessions list's filter from query parameters.
// An unknown parameter, or a value that names nothing the person can see,
// is refused rather than ignored: a mistyped filter would otherwise show a
// list that looks filtered and is not. An empty value filters nothing, as
// a form sends it.
func (g *guard) sessionQueryOf(ctx context.Context, p Principal, q url.Values) (sessionQuery, error) {
	out := sessionQuery{me: p.User.ID}
	for k, vs := range q {
		switch {
		case !slices.Contains(filters, k):
			return out, fmt.Errorf("the Sessions list has no filter %q: use %s: %w", k, strings.Join(filters, ", "), errdefs.ErrInvalid)
		case len(vs) > 1 && k != api.FilterState:
			return out, fmt.Errorf("give the filter %s once: %w", k, errdefs.ErrInvalid)
		}
	}
	var err error
	if out.mine, err = boolFilter(q, api.FilterMine); err != nil {
		return out, err
	}
	if out.waiting, err = boolFilter(q, api.FilterWaiting); err != nil {
		return out, err
	}
	if out.repoID, err = g.repoFilter(ctx, p, q.Get(api.FilterRepo)); err != nil {
		return out, err
	}
	if out.creatorID, err = g.creatorFilter(ctx, q.Get(api.FilterCreator)); err != nil {
		return out, err
	}
	for _, v := range q[api.FilterState] {
		for st := range strings.SplitSeq(v, ",") {
			if st = strings.TrimSpace(st); st == "" {
				continue
			}
			if !slices.Contains(api.SessionStates, api.SessionState(st)) {
				return out, fmt.Errorf("no Session state %q: use one of %s, or several comma-separated: %w", st, strings.Join(api.StateNames(), ", "), errdefs.ErrInvalid)
			}
			out.states = append(out.states, api.SessionState(st))
		}
	}
	search := q.Get(api.FilterSearch)
	if len(search) > api.MaxSearch {
		return out, fmt.Errorf("the search is %d bytes, over the %d-byte limit: search by a shorter part of the title: %w", len(search), api.MaxSearch, errdefs.ErrInvalid)
	}
	out.search = strings.ToLower(strings.TrimSpace(search))
	return out, nil
}

func boolFilter(q url.Values, k string) (bool, error) {
	v := q.Get(k)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("the filter %s=%q: say true or false: %w", k, v, errdefs.ErrInvalid)
	}
	return b, nil
}

// repoFilter resolves a Repo's id or clone URL to its id. One the person
// has no access to is refused exactly as one that does not exist.
func (g *guard) repoFilter(ctx context.Context, p Principal, v string) (string, error) {
	if v == "" {
		return "", nil
	}
	repos, err := g.store.Repos.List(ctx)
	if err != nil {
		return "", err
	}
	for _, r := range repos {
		if (r.ID == v || r.URL == v) && g.canAccess(ctx, p.User, r.URL, false) {
			return r.ID, nil
		}
	}
	return "", fmt.Errorf("no Repo %q that you have access to: name it by its id or clone URL, as kndl ls --json shows them (repo_id, repo_url): %w", v, errdefs.ErrInvalid)
}

// creatorFilter resolves a Member's id or GitHub login to their id.
func (g *guard) creatorFilter(ctx context.Context, v string) (string, error) {
	if v == "" {
		return "", nil
	}
	ms, err := g.store.Members.List(ctx)
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.ID == v || (m.GitHubLogin != "" && strings.EqualFold(m.GitHubLogin, v)) {
			return m.ID, nil
		}
	}
	return "", fmt.Errorf("no Member %q: name one by their GitHub login or id (kndl member ls lists them): %w", v, errdefs.ErrInvalid)
}

// waitsOn reports whether the Session waits on the person: theirs, Active,
// and no Turn running (Claude asked a question, or finished its Turn).
// The web UI's title counts the same (waiting.js).
func waitsOn(me string, s api.Session) bool {
	return s.CreatorID == me && s.State == api.Active && s.Activity != "turn"
}

// match reports whether the query keeps the Session, as the API shows it.
func (q sessionQuery) match(s api.Session) bool {
	switch {
	case q.mine && s.CreatorID != q.me,
		q.waiting && !waitsOn(q.me, s),
		q.repoID != "" && s.RepoID != q.repoID,
		q.creatorID != "" && s.CreatorID != q.creatorID,
		len(q.states) > 0 && !slices.Contains(q.states, s.State),
		q.search != "" && !strings.Contains(strings.ToLower(s.Title), q.search):
		return false
	}
	return true
}

// filtered reports whether the query selects anything less than the whole list.
func (q sessionQuery) filtered() bool {
	return q.mine || q.waiting || q.repoID != "" || q.creatorID != "" || len(q.states) > 0 || q.search != ""
}
