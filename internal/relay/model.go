package relay

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"kndl.dev/kndl/internal/auth"
)

// The model route's checks: what a Sandbox may send on to the model API
// through /model/<Session token>/, and with what credential. The route
// carries the Creator's token, and the model API also stores files, runs
// batches and manages keys: anything it forwarded beyond Claude Code's own
// calls would be an exit from the Sandbox, to the Creator's account or,
// with a key of the Sandbox's own, to a stranger's.

// modelRoutes are the model API's routes Claude Code calls through a base
// URL (docs/claude-code.md): the Messages API and its token counting, both
// POST.
var modelRoutes = []string{"/v1/messages", "/v1/messages/count_tokens"}

// modelQueries are the query strings Claude Code sends on them: beta=true
// (what the pinned version sends with an OAuth token), or none.
var modelQueries = []string{"", "beta=true"}

// modelRefusal is why a model request is not forwarded: its status and
// the type of Anthropic's error, which Claude Code shows with the message.
type modelRefusal struct {
	status int
	typ    string
	msg    string
}

// checkModel returns why req, for path on the model API, may not go on
// for a run whose Claude Code holds placeholder, or nil if it may. It
// takes only POST to a route of modelRoutes with a query of modelQueries,
// carrying exactly one credential, the placeholder, in Authorization as a
// Bearer token or in X-Api-Key: another key, a second credential beside
// the placeholder, or none is refused, so nothing in the Sandbox sends a
// key of its own through the relay.
func checkModel(req *http.Request, path, placeholder string) *modelRefusal {
	if req.Method != http.MethodPost || !slices.Contains(modelRoutes, path) {
		return &modelRefusal{http.StatusNotFound, "not_found_error",
			"kndl relay: " + req.Method + " " + path + " is not forwarded; the model route takes only POST " + strings.Join(modelRoutes, " and POST ")}
	}
	if !slices.Contains(modelQueries, req.URL.RawQuery) {
		return &modelRefusal{http.StatusNotFound, "not_found_error",
			"kndl relay: the query " + req.URL.RawQuery + " is not forwarded; the model route takes " + path + " with no query or ?beta=true"}
	}
	var presented []string
	for _, a := range req.Header.Values("Authorization") {
		tok, ok := strings.CutPrefix(a, "Bearer ")
		if !ok {
			return &modelRefusal{http.StatusForbidden, "permission_error",
				"kndl relay: Authorization is not a Bearer token; the model route takes this Session's own CLAUDE_CODE_OAUTH_TOKEN as one"}
		}
		presented = append(presented, tok)
	}
	presented = append(presented, req.Header.Values("X-Api-Key")...)
	switch {
	case len(presented) == 0:
		return &modelRefusal{http.StatusUnauthorized, "authentication_error",
			"kndl relay: no credential; the model route takes this Session's own CLAUDE_CODE_OAUTH_TOKEN as a Bearer token"}
	case len(presented) > 1:
		return &modelRefusal{http.StatusForbidden, "permission_error",
			"kndl relay: more than one credential (Authorization and X-Api-Key, or either twice); the model route takes this Session's own CLAUDE_CODE_OAUTH_TOKEN alone"}
	case !auth.Equal([]byte(presented[0]), []byte(placeholder)):
		return &modelRefusal{http.StatusForbidden, "permission_error",
			"kndl relay: not this Session's credential; the model route takes this Session's own CLAUDE_CODE_OAUTH_TOKEN, and no other key"}
	}
	return nil
}

// write answers as Anthropic's API answers an error, so Claude Code shows
// the message.
func (m *modelRefusal) write(w http.ResponseWriter) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": m.typ, "message": m.msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(m.status)
	w.Write(append(b, '\n'))
}
