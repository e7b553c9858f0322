package api

import (
	"net/url"
	"strings"
)

// SessionStates are the states a Session is in, in the order a list
// offers them.
var SessionStates = []SessionState{Starting, Active, Frozen, Asleep, Failed, Archived}

// StateNames are SessionStates' names, for help and error messages.
func StateNames() []string {
	out := make([]string, len(SessionStates))
	for i, s := range SessionStates {
		out[i] = string(s)
	}
	return out
}

// SessionFilter selects Sessions from GET /api/sessions and its live
// socket, as query parameters (Query); the Hub refuses any other
// parameter, and any value it does not know, with 400. Zero fields
// select everything.
type SessionFilter struct {
	// Mine keeps the caller's own Sessions.
	Mine bool
	// Waiting keeps the caller's Sessions that wait on them: Active, with
	// no Turn running (a question asked, or a Turn done).
	Waiting bool
	// Repo is a Repo's id or clone URL.
	Repo string
	// States keeps Sessions in any of them.
	States []SessionState
	// Creator is a Member's id or GitHub login.
	Creator string
	// Search keeps Sessions whose title holds it, in any case.
	Search string
}

// The query parameters of a SessionFilter.
const (
	FilterMine    = "mine"
	FilterWaiting = "waiting"
	FilterRepo    = "repo"
	FilterState   = "state"
	FilterCreator = "creator"
	FilterSearch  = "search"
)

// MaxSearch bounds a SessionFilter's Search.
const MaxSearch = 200

// Query is the filter as query parameters: only those set, states
// comma-separated.
func (f SessionFilter) Query() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Mine {
		q.Set(FilterMine, "true")
	}
	if f.Waiting {
		q.Set(FilterWaiting, "true")
	}
	set(FilterRepo, f.Repo)
	states := make([]string, len(f.States))
	for i, s := range f.States {
		states[i] = string(s)
	}
	set(FilterState, strings.Join(states, ","))
	set(FilterCreator, f.Creator)
	set(FilterSearch, f.Search)
	return q
}
