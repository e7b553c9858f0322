package hub

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// Principal is who a request authenticated as.
type Principal struct {
	Kind    auth.Kind
	User    store.User    // Cookie, CLI
	Runner  store.Runner  // Runner
	Session store.Session // Mod: the Session whose mod this is
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, p Principal)

// route is one row of the route table: a pattern and the credentials it
// takes. A route that declares no credential does not register.
type route struct {
	pattern string // net/http pattern: "METHOD /path/{param}"
	creds   []auth.Kind
	handle  handlerFunc
}

// routes is the one route table: every route the Hub serves, with the
// credential each takes. Add new routes here and nowhere else.
func (h *Hub) routes() []route {
	person := []auth.Kind{auth.CLI}
	return []route{
		{"GET /health", []auth.Kind{auth.Public}, h.health},
		{"GET /runner/connect", []auth.Kind{auth.Runner}, h.runnerConnect},
		{"GET /api/runners", person, h.listRunners},
		{"POST /api/runners", person, h.createRunner},
		{"DELETE /api/runners/{id}", person, h.revokeRunner},
		{"GET /api/account", person, h.showAccount},
		{"PUT /api/account/claude-token", person, h.setClaudeToken},
		{"DELETE /api/account/claude-token", person, h.deleteClaudeToken},
		{"POST /api/sessions", person, h.createSession},
		{"GET /api/sessions", person, h.listSessions},
		{"GET /api/sessions/{id}", person, h.showSession},
		{"POST /api/sessions/{id}/prompts", person, h.queuePrompt},
		{"PATCH /api/sessions/{id}/prompts/{prompt}", person, h.editPrompt},
		{"DELETE /api/sessions/{id}/prompts/{prompt}", person, h.cancelPrompt},
		{"POST /api/sessions/{id}/stop-turn", person, h.stopTurn},
		{"GET /api/sessions/{id}/events", person, h.listEvents},
		{"GET /api/sessions/{id}/watch", person, h.watchSession},
		{"POST /mod/hook", []auth.Kind{auth.Mod}, h.modHook},
	}
}

// mux registers the route table.
func (h *Hub) mux() (*http.ServeMux, error) { return h.muxOf(h.routes()) }

// muxOf registers routes, refusing a route without a credential.
func (h *Hub) muxOf(routes []route) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	for _, rt := range routes {
		if len(rt.creds) == 0 || slices.Contains(rt.creds, 0) {
			return nil, fmt.Errorf("route %q declares no credential: every route must", rt.pattern)
		}
		if slices.Contains(rt.creds, auth.Public) && len(rt.creds) > 1 {
			return nil, fmt.Errorf("route %q is public and also takes a credential", rt.pattern)
		}
		mux.Handle(rt.pattern, h.authenticate(rt))
	}
	return mux, nil
}

// authenticate resolves the request's credential against the kinds the route
// takes, and answers 401 when none matches.
func (h *Hub) authenticate(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := h.principal(r.Context(), r, rt.creds)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kndl"`)
			h.writeError(w, r, err)
			return
		}
		rt.handle(w, r, p)
	})
}

func (h *Hub) principal(ctx context.Context, r *http.Request, kinds []auth.Kind) (Principal, error) {
	if slices.Contains(kinds, auth.Public) {
		return Principal{Kind: auth.Public}, nil
	}
	token, ok := bearer(r)
	if ok {
		switch kind := auth.KindOf(token); {
		case !slices.Contains(kinds, kind):
		case kind == auth.CLI:
			u, err := h.store.UserByCLIToken(ctx, token)
			if err == nil {
				return Principal{Kind: kind, User: u}, nil
			}
		case kind == auth.Runner:
			rn, err := h.store.RunnerByToken(ctx, token)
			if err == nil {
				return Principal{Kind: kind, Runner: rn}, nil
			}
		case kind == auth.Mod:
			s, err := h.sessionByMod(ctx, token)
			if err == nil {
				return Principal{Kind: kind, Session: s}, nil
			}
		}
	}
	return Principal{}, fmt.Errorf("this endpoint needs a valid %s credential: %w", kindList(kinds), errdefs.ErrUnauthorized)
}

func bearer(r *http.Request) (string, bool) {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return strings.TrimSpace(v), ok && v != ""
}

func kindList(kinds []auth.Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.String()
	}
	return strings.Join(names, " or ")
}

func (h *Hub) health(w http.ResponseWriter, r *http.Request, _ Principal) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
