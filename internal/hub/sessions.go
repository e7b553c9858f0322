package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/gateway"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/placement"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/store"
)

// sessionsAPI serves a person's Session routes: start, list, show, the queue, life moves,
// renames and the Sessions list's socket (sessions.go, sleep.go, update.go,
// list.go); every change goes to the Session Owner.
type sessionsAPI struct {
	core
	sessions *session.Owner
	rows     sessionRows
	place    placer
	placing  *sync.Mutex // the Hub's: held from picking a new Session's Runner until it is stored
	masks    *masks.Sets
	envs     *environment.Service
	gateway  *gateway.Gateway
}

// placer knows which Runners a Creator may use and how loaded each is: it
// picks a new Session's Runner, and shows the Runners as a person sees
// them. The Session, Runner and page handlers and an Environment's Test
// build hold it alike.
type placer struct {
	store   placerStore
	runners *runners.Conns
	envs    *environment.Service
}

// placerStore is the parts of the store a placer reads: the Runners, whose
// each is, and the running Sessions.
type placerStore struct {
	Runners  *store.Runners
	Members  *store.Members
	Sessions *store.Sessions
}

// offer is the models a Session of creator may run: what every connected
// Runner they may use takes (claude.Common); nothing while none is.
func (h placer) offer(ctx context.Context, creator store.User) (claude.Table, error) {
	paired, err := h.store.Runners.List(ctx)
	if err != nil {
		return claude.Table{}, err
	}
	conns := h.runners.All()
	var tables []claude.Table
	for _, rn := range paired {
		if rc := conns[rn.ID]; rc != nil && rn.UsableBy(creator.ID) {
			tables = append(tables, rc.Hello.Models)
		}
	}
	return claude.Common(tables), nil
}

// models answers the offer to the person asking.
func (h sessionsAPI) models(w http.ResponseWriter, r *http.Request, p Principal) {
	offer, err := h.place.offer(r.Context(), p.User)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, offer)
}

// checkModel refuses a model or effort the Runners creator may use don't
// all offer, naming what they offer: a Session on it would fail its
// first Turn.
func (h sessionsAPI) checkModel(ctx context.Context, creator store.User, model, effort string) error {
	offer, err := h.place.offer(ctx, creator)
	if err != nil {
		return err
	}
	if model != "" && len(offer.Models) == 0 {
		return fmt.Errorf("model %q: no Runner you may use is connected to offer it: start one, or leave the model to the default: %w", model, errdefs.ErrUnavailable)
	}
	if err := offer.Takes(model, effort); err != nil {
		return fmt.Errorf("the Runners you may use: %w", err)
	}
	return nil
}

// checkRepo accepts what a Runner may clone: an http(s), ssh or git URL, an
// scp-like ssh address, or an absolute path on the Runner's host. A URL
// with credentials is refused, since git would write them into the clone's
// config; so are git's remote helpers (ext::, fd::), which run commands.
func checkRepo(repo string) error {
	bad := func(why string) error {
		return fmt.Errorf("repository %q: %s: %w", repo, why, errdefs.ErrInvalid)
	}
	switch {
	case strings.TrimSpace(repo) == "":
		return fmt.Errorf("name the repository: a git URL, or a path on the Runner's host: %w", errdefs.ErrInvalid)
	case strings.ContainsAny(repo, "\x00\n\r") || strings.HasPrefix(repo, "-") || strings.Contains(repo, "::"):
		return bad("not a git URL or path")
	case strings.HasPrefix(repo, "/"):
		return nil
	}
	if u, err := url.Parse(repo); err == nil && u.Scheme != "" {
		switch {
		case u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh" && u.Scheme != "git" && u.Scheme != "file":
			return bad("use an https, ssh or git URL, or a path")
		case u.User != nil && (u.Scheme != "ssh" || func() bool { _, ok := u.User.Password(); return ok }()):
			return bad("put no credentials in the URL: the Runner clones with its host's git credentials")
		}
		return nil
	}
	if user, host, ok := strings.Cut(repo, "@"); ok && !strings.Contains(user, ":") && strings.Contains(host, ":") {
		return nil // user@host:path
	}
	return bad("use an https, ssh or git URL, user@host:path, or an absolute path on the Runner's host")
}

// checkLocalRepo refuses a path that is not a git repository, on a kndl
// dev Hub, whose Runner clones from this same machine: known now, it need
// not make a Session that can only fail. It reads the layout only and runs
// no git, so nothing in the repository's config runs on the Hub.
func checkLocalRepo(repo string) error {
	if !strings.HasPrefix(repo, "/") {
		return nil
	}
	fi, err := os.Stat(repo)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("repository %q: no such directory on this machine, where kndl dev's Runner clones from: %w", repo, errdefs.ErrInvalid)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git")); err == nil {
		return nil
	}
	for _, p := range []string{"HEAD", "objects", "refs"} { // a bare repository
		if _, err := os.Stat(filepath.Join(repo, p)); err != nil {
			return fmt.Errorf("repository %q: not a git repository (run git init there, or name the repository's own directory): %w", repo, errdefs.ErrInvalid)
		}
	}
	return nil
}

func checkPrompt(text string) error {
	switch {
	case strings.TrimSpace(text) == "":
		return fmt.Errorf("the prompt is empty: %w", errdefs.ErrInvalid)
	case len(text) > api.MaxPromptBytes:
		return fmt.Errorf("the prompt is %d bytes, over the %d-byte limit; attach long text as a file instead: %w", len(text), api.MaxPromptBytes, errdefs.ErrTooLarge)
	}
	return nil
}

func (h sessionsAPI) createSession(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.NewSession
	if err := readJSON(r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	s, err := h.start(r.Context(), p, req, title(req.Prompt))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeSession(w, r, s, http.StatusCreated)
}

// start starts a Session as p asks, titled name (masked like any title):
// the API's and a GitHub trigger's way alike.
func (h sessionsAPI) start(ctx context.Context, p Principal, req api.NewSession, name string) (store.Session, error) {
	err := h.checkModel(ctx, p.User, req.Model, req.Effort)
	if err == nil {
		err = checkPrompt(req.Prompt)
	}
	if err == nil {
		err = checkRepo(req.Repo)
	}
	if err == nil && h.cfg.DevLogin {
		err = checkLocalRepo(req.Repo)
	}
	if err == nil {
		err = h.guard.checkRepoAccess(ctx, p, req.Repo)
	}
	if err == nil {
		_, _, err = h.store.Members.UserSecret(ctx, p.User.ID, claudeTokenSecret)
		if err != nil {
			err = fmt.Errorf("you have no Claude setup token stored, and a Session runs on its Creator's: make one with claude setup-token and store it with kndl token set: %w", errdefs.ErrConflict)
		}
	}
	h.placing.Lock()
	defer h.placing.Unlock()
	var rc *runners.Conn
	var knownRepo string // a new Repo has no Environment, and so reserves nothing
	if err == nil {
		knownRepo, err = h.repoIDOf(ctx, req.Repo)
	}
	if err == nil {
		rc, err = h.place.pickRunner(ctx, p.User, req.Runner, knownRepo)
	}
	var repo store.Repo
	if err == nil {
		repo, err = h.store.Repos.EnsureRepo(ctx, req.Repo, repoName(req.Repo))
	}
	if err == nil {
		name, err = h.masks.MaskTitle(ctx, repo.ID, p.User.ID, name)
	}
	if err != nil {
		return store.Session{}, err
	}
	return h.sessions.Create(ctx, store.Session{RepoID: repo.ID, CreatorID: p.User.ID, RunnerID: rc.Runner.ID,
		Title: name, Model: req.Model, Effort: req.Effort, Triggered: p.Kind == auth.Webhook},
		store.Prompt{AuthorID: p.User.ID, Text: req.Prompt, IsCommand: req.IsCommand})
}

// pickRunner returns a connected Runner the Creator may use (theirs, or
// shared: store.Runner.UsableBy) for a Session of repoID: the one named,
// or else the one placement picks by load within capacity. A Runner
// someone else paired gets none of their Sessions, and so none of their
// credentials. Runner names are no secret (every Member sees them on the
// Runners page), so one named that is not theirs is refused as such, not
// as missing.
func (h placer) pickRunner(ctx context.Context, creator store.User, name, repoID string) (*runners.Conn, error) {
	paired, err := h.store.Runners.List(ctx)
	if err != nil {
		return nil, err
	}
	loads, err := h.loads(ctx)
	if err != nil {
		return nil, err
	}
	var ask placement.Ask
	if repoID != "" {
		if ask.CPUs, ask.MemoryMiB, err = h.envs.Reserves(ctx, repoID); err != nil {
			return nil, err
		}
	}
	conns := h.runners.All()
	var usable []*runners.Conn
	var cands []placement.Runner
	for _, rn := range paired {
		rc := conns[rn.ID]
		switch {
		case name != "" && rn.Name != name:
			continue
		case name != "" && !rn.UsableBy(creator.ID):
			return nil, fmt.Errorf("the Runner %q is not yours and not shared: run the Session on one of your own or a shared one (kndl runner ls says whose each is), or ask the Owner to share it: %w", name, errdefs.ErrForbidden)
		case name != "" && rc == nil:
			return nil, fmt.Errorf("the Runner %q is not connected (kndl runner ls shows which are): %w", name, errdefs.ErrUnavailable)
		case rc == nil || !rn.UsableBy(creator.ID):
			continue
		}
		usable = append(usable, rc)
		cands = append(cands, loads.of(rc))
	}
	switch {
	case len(usable) == 0 && name != "":
		return nil, fmt.Errorf("no Runner named %q is paired (kndl runner ls lists them): %w", name, errdefs.ErrNotFound)
	case len(usable) == 0:
		return nil, fmt.Errorf("no Runner you may use is connected: pair one of your own on the Runners page and start it, or ask the Owner to share one: %w", errdefs.ErrUnavailable)
	}
	i, err := placement.Pick(cands, ask, name != "")
	if err != nil {
		return nil, err
	}
	return usable[i], nil
}

// repoIDOf returns the ID of the Repo at url, or "" when none is known.
func (h sessionsAPI) repoIDOf(ctx context.Context, url string) (string, error) {
	repos, err := h.store.Repos.List(ctx)
	for _, r := range repos {
		if r.URL == url {
			return r.ID, nil
		}
	}
	return "", err
}

// runnerLoads is what each Runner's running Sessions ask, by Runner ID.
type runnerLoads map[string][]placement.Ask

// of is rc as placement sees it: its capacity and caps from its hello, and
// its running Sessions' asks within those caps.
func (l runnerLoads) of(rc *runners.Conn) placement.Runner {
	h := rc.Hello.Host
	r := placement.Runner{Name: rc.Runner.Name,
		Capacity: h.Capacity,
		Caps:     placement.Ask{CPUs: h.MaxCPUs, MemoryMiB: h.MaxMemoryMiB}}
	for _, a := range l[rc.Runner.ID] {
		r.Add(a)
	}
	return r
}

// loads reads the running (Starting or Active) Sessions and what each asks:
// its Repo's current Environment's reservation.
func (h placer) loads(ctx context.Context) (runnerLoads, error) {
	running, err := h.store.Sessions.List(ctx, store.SessionFilter{States: []store.SessionState{store.Starting, store.Active}})
	if err != nil {
		return nil, err
	}
	byRepo := map[string]placement.Ask{}
	out := runnerLoads{}
	for _, s := range running {
		a, ok := byRepo[s.RepoID]
		if !ok {
			if a.CPUs, a.MemoryMiB, err = h.envs.Reserves(ctx, s.RepoID); err != nil {
				return nil, err
			}
			byRepo[s.RepoID] = a
		}
		out[s.RunnerID] = append(out[s.RunnerID], a)
	}
	return out, nil
}

// sessionFor returns a Session the person may see: one of a Repo they have
// access to. Any other answers exactly as a Session that doesn't exist.
func (g *guard) sessionFor(ctx context.Context, p Principal, id string) (store.Session, error) {
	s, err := g.store.Sessions.SessionByID(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) || (err == nil && !g.canAccess(ctx, p.User, s.RepoURL, false)) {
		return store.Session{}, notFoundSession(id)
	}
	if err != nil {
		return store.Session{}, err
	}
	readsRepo(ctx, s.RepoURL)
	return s, nil
}

// drivableSession returns a Session the person may drive: its Creator
// alone. Others get ErrForbidden; those who can't see it ErrNotFound.
func (g *guard) drivableSession(ctx context.Context, p Principal, id string) (store.Session, error) {
	s, err := g.sessionFor(ctx, p, id)
	if err == nil && s.CreatorID != p.User.ID {
		err = fmt.Errorf("only the Session's Creator drives it: %w", errdefs.ErrForbidden)
	}
	return s, err
}

func (h sessionsAPI) writeSession(w http.ResponseWriter, r *http.Request, s store.Session, status int) {
	q, err := h.sessions.Queue(r.Context(), s.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if q == nil {
		q = []store.Prompt{}
	}
	v, err := h.rows.view(r.Context(), s, q)
	if err == nil {
		v.EnvironmentVersion, v.EnvironmentWaiting, err = h.envs.OfSession(r.Context(), s.ID, s.RepoID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if v.MCPServers, err = h.gateway.Started(r.Context(), s.ID); err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

// listSessions answers the Sessions the person may see that the query's
// filter (api.SessionFilter) keeps.
func (h sessionsAPI) listSessions(w http.ResponseWriter, r *http.Request, p Principal) {
	rows, err := h.listed(r.Context(), p, r.URL.Query())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

// listed is the Sessions list for p as query filters it, newest first.
func (h sessionsAPI) listed(ctx context.Context, p Principal, query url.Values) ([]api.Session, error) {
	q, err := h.guard.sessionQueryOf(ctx, p, query)
	if err != nil {
		return nil, err
	}
	ss, err := h.store.Sessions.List(ctx, store.SessionFilter{})
	if err != nil {
		return nil, err
	}
	rows := []api.Session{}
	for _, s := range h.guard.visibleSessions(ctx, p, ss) {
		if a := h.rows.now(s); q.match(a) {
			rows = append(rows, a)
		}
	}
	return h.rows.list(ctx, rows), nil
}

func (h sessionsAPI) showSession(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeSession(w, r, s, http.StatusOK)
}

func (h sessionsAPI) queuePrompt(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.PromptRequest
	err := readJSON(r, &req)
	if err == nil {
		err = checkPrompt(req.Text)
	}
	var s store.Session
	if err == nil {
		s, err = h.guard.drivableSession(r.Context(), p, r.PathValue("id"))
	}
	var atts []store.Attachment
	if err == nil {
		atts, err = promptAttachments(r.Context(), h.store.Prompts, s, req)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	pr, err := h.sessions.Prompt(r.Context(), s, store.Prompt{AuthorID: p.User.ID, Text: req.Text, IsCommand: req.IsCommand, Attachments: atts})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiPrompt(pr))
}

func (h sessionsAPI) editPrompt(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.PromptRequest
	err := readJSON(r, &req)
	if err == nil {
		err = checkPrompt(req.Text)
	}
	if err == nil && len(req.Attachments) > 0 {
		err = fmt.Errorf("a queued prompt's attachments stay as they are: cancel it and send it again to change them: %w", errdefs.ErrInvalid)
	}
	h.changePrompt(w, r, p, req.Text, err)
}

func (h sessionsAPI) movePrompt(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.PromptMove
	err := readJSON(r, &req)
	if err == nil && req.Position < 1 {
		err = fmt.Errorf("position %d: places in the queue count from 1: %w", req.Position, errdefs.ErrInvalid)
	}
	var s store.Session
	if err == nil {
		s, err = h.guard.drivableSession(r.Context(), p, r.PathValue("id"))
	}
	if err == nil {
		err = h.sessions.MovePrompt(r.Context(), s.ID, r.PathValue("prompt"), req.Position)
	}
	h.answerNoContent(w, r, err)
}

func (h sessionsAPI) cancelPrompt(w http.ResponseWriter, r *http.Request, p Principal) {
	h.changePrompt(w, r, p, "", nil)
}

// changePrompt edits a queued prompt's text, or cancels it for "".
func (h sessionsAPI) changePrompt(w http.ResponseWriter, r *http.Request, p Principal, text string, err error) {
	var s store.Session
	if err == nil {
		s, err = h.guard.drivableSession(r.Context(), p, r.PathValue("id"))
	}
	if err == nil {
		err = h.sessions.EditPrompt(r.Context(), s.ID, r.PathValue("prompt"), text)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h sessionsAPI) stopTurn(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.drivableSession(r.Context(), p, r.PathValue("id"))
	if err == nil {
		err = h.sessions.StopTurn(r.Context(), s.ID)
	}
	h.answerNoContent(w, r, err)
}

// acceptSessionSocket opens a WebSocket on a Session the person may see,
// reading ?after=SEQ; it has answered the request when ok is false.
func (h core) acceptSessionSocket(w http.ResponseWriter, r *http.Request, p Principal) (s store.Session, after int64, ws *websocket.Conn, ok bool) {
	after, err := afterParam(r)
	if err == nil {
		s, err = h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	}
	if err != nil {
		h.writeError(w, r, err)
		return s, 0, nil, false
	}
	if ws, err = websocket.Accept(w, r, nil); err != nil {
		return s, 0, nil, false // Accept has answered
	}
	return s, after, ws, true
}

// afterParam reads ?after=SEQ.
func afterParam(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("after")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("after=%q: want a sequence number: %w", v, errdefs.ErrInvalid)
	}
	return n, nil
}

// eventPage is how many Events one read returns.
const eventPage = 500

func (h sessionsAPI) listEvents(w http.ResponseWriter, r *http.Request, p Principal) {
	after, err := afterParam(r)
	var s store.Session
	if err == nil {
		s, err = h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	}
	var evs []store.Event
	if err == nil {
		evs, err = h.store.Sessions.Events(r.Context(), s.ID, after, eventPage)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := make([]api.Event, 0, len(evs))
	for _, e := range evs {
		if ev, ok := decodeEvent(e); ok {
			out = append(out, ev)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// watchSession streams a Session's live stream over a WebSocket, in the
// shape the Session view gets: its Events after ?after=SEQ from the store,
// then each new one as it is recorded, and the Session with its queue
// whenever it changes. A watcher that falls behind is closed and resumes by
// sequence number.
func (h sessionsAPI) watchSession(w http.ResponseWriter, r *http.Request, p Principal) {
	caughtUp, ok := h.catchUp.turnOf(r.Context())
	if !ok {
		return
	}
	defer caughtUp()
	// Subscribe before reading the store (the Session, as its access is
	// checked, then its Events), so nothing falls between the two.
	ch, cancel := h.sessions.Subscribe(r.PathValue("id"))
	defer cancel()
	s, after, ws, ok := h.acceptSessionSocket(w, r, p)
	if !ok {
		return
	}
	defer ws.CloseNow()
	ctx := ws.CloseRead(r.Context())
	send := func(m api.LiveMessage) bool {
		b, _ := json.Marshal(m)
		return ws.Write(ctx, websocket.MessageText, b) == nil
	}
	st := &sessionStream{rows: h.rows, id: s.ID, after: after, state: s.State}
	sendEvent := func(e store.Event) bool {
		m, ok := st.event(ctx, e)
		return !ok || send(m)
	}
	if m, _, ok := st.sessionAs(ctx, s); ok && !send(m) {
		return
	}
	if !st.replay(ctx, sendEvent) {
		return
	}
	caughtUp()
	for {
		select {
		case u, ok := <-ch:
			if !ok {
				ws.Close(websocket.StatusTryAgainLater, "fell behind; reconnect with after=last seq")
				return
			}
			if u.Event != nil && !sendEvent(*u.Event) {
				return
			}
			if u.Changed {
				if m, _, _, ok := st.session(ctx); ok && !send(m) {
					return
				}
			}
		case <-ctx.Done():
			return
		}
	}
}

// repoName is a Repo's short name from its URL or path.
func repoName(u string) string {
	return strings.TrimSuffix(path.Base(strings.TrimSuffix(u, "/")), ".git")
}

// title is a Session's first title: the start of its first prompt's first line.
func title(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if r := []rune(line); len(r) > 80 {
		line = string(r[:79]) + "…"
	}
	return line
}
