package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

var (
	modelRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9.\-\[\]]{0,63}$`)
	efforts = map[string]bool{"": true, "low": true, "medium": true, "high": true, "xhigh": true, "max": true}
)

func checkModel(model, effort string) error {
	if model != "" && !modelRE.MatchString(model) {
		return fmt.Errorf("model %q: use a name such as sonnet, opus or haiku, or a full model id: %w", model, errdefs.ErrInvalid)
	}
	if !efforts[effort] {
		return fmt.Errorf("effort %q: use low, medium, high, xhigh or max: %w", effort, errdefs.ErrInvalid)
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

func checkPrompt(text string) error {
	switch {
	case strings.TrimSpace(text) == "":
		return fmt.Errorf("the prompt is empty: %w", errdefs.ErrInvalid)
	case len(text) > api.MaxPromptBytes:
		return fmt.Errorf("the prompt is %d bytes, over the %d-byte limit; attach long text as a file instead: %w", len(text), api.MaxPromptBytes, errdefs.ErrTooLarge)
	}
	return nil
}

func (h *Hub) createSession(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.NewSession
	if err := readJSON(r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	err := checkModel(req.Model, req.Effort)
	if err == nil {
		err = checkPrompt(req.Prompt)
	}
	if err == nil {
		err = checkRepo(req.Repo)
	}
	if err == nil {
		err = h.checkRepoAccess(ctx, p, req.Repo)
	}
	if err == nil {
		_, _, err = h.store.UserSecret(ctx, p.User.ID, claudeTokenSecret)
		if err != nil {
			err = fmt.Errorf("you have no Claude setup token stored, and a Session runs on its Creator's: make one with claude setup-token and store it with kndl token set: %w", errdefs.ErrConflict)
		}
	}
	var rc *runnerConn
	if err == nil {
		rc, err = h.pickRunner(ctx, req.Runner)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	repo, err := h.store.EnsureRepo(ctx, req.Repo, repoName(req.Repo))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	s, err := h.store.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: p.User.ID, RunnerID: rc.runner.ID,
		Title: title(req.Prompt), Model: req.Model, Effort: req.Effort})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if _, err := h.store.EnqueuePrompt(ctx, store.Prompt{SessionID: s.ID, AuthorID: p.User.ID, Text: req.Prompt, IsCommand: req.IsCommand}); err != nil {
		h.writeError(w, r, err)
		return
	}
	go h.startSession(s, false)
	h.writeSession(w, r, s, http.StatusCreated)
}

// pickRunner returns the named connected Runner, or the connected one with
// the fewest running Sessions.
func (h *Hub) pickRunner(ctx context.Context, name string) (*runnerConn, error) {
	running, err := h.store.Sessions(ctx, store.SessionFilter{States: []store.SessionState{store.Starting, store.Active}})
	if err != nil {
		return nil, err
	}
	load := map[string]int{}
	for _, s := range running {
		load[s.RunnerID]++
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var best *runnerConn
	for _, rc := range h.runners {
		if name != "" && rc.runner.Name != name {
			continue
		}
		if best == nil || load[rc.runner.ID] < load[best.runner.ID] || (load[rc.runner.ID] == load[best.runner.ID] && rc.runner.Name < best.runner.Name) {
			best = rc
		}
	}
	if best == nil && name != "" {
		return nil, fmt.Errorf("runner %q is not connected (kndl runner ls shows which are): %w", name, errdefs.ErrUnavailable)
	}
	if best == nil {
		return nil, fmt.Errorf("no Runner is connected to run the Session: pair one with kndl runner token create and start it: %w", errdefs.ErrUnavailable)
	}
	return best, nil
}

// startTimeout bounds a start: a cold Build and a Claude Code download.
const startTimeout = 30 * time.Minute

// startSession asks the Session's Runner to start Claude Code, and records
// the outcome.
func (h *Hub) startSession(s store.Session, resume bool) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	fail := func(err error) {
		h.log.Warn("session start failed", "session", s.ID, "err", err)
		h.store.RevokeModToken(ctx, s.ID)
		h.record(ctx, s.ID, protocol.Event{Kind: protocol.EventError, Text: "The Session did not start: " + err.Error()})
		h.store.SetSessionState(ctx, s.ID, store.Asleep, h.redactDetail(ctx, s.ID, "start failed: "+err.Error()))
		h.setLive(s.ID, func(l *live) { l.ready = false })
	}
	rc := h.runnerConn(s.RunnerID)
	if rc == nil {
		fail(fmt.Errorf("its Runner is not connected"))
		return
	}
	modToken, err := h.store.IssueModToken(ctx, s.ID)
	if err != nil {
		fail(err)
		return
	}
	offsets, err := h.store.TranscriptOffsets(ctx, s.ID)
	if err != nil {
		fail(err)
		return
	}
	err = rc.conn.Request(ctx, protocol.TypeSessionStart, protocol.SessionStart{SessionID: s.ID, RepoURL: s.RepoURL,
		Model: s.Model, Effort: s.Effort, Resume: resume, ModToken: modToken, Offsets: offsets}, nil)
	if err != nil {
		fail(err)
		return
	}
	if err := h.store.SetSessionState(ctx, s.ID, store.Active, ""); err != nil {
		fail(err)
		return
	}
	h.setLive(s.ID, func(l *live) { l.ready, l.busy = true, false })
	h.dispatch(s.ID)
}

func (h *Hub) runnerConn(id string) *runnerConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runners[id]
}

// setLive changes a Session's live state under the Hub's lock.
func (h *Hub) setLive(id string, f func(*live)) {
	h.mu.Lock()
	f(h.liveOf(id))
	h.mu.Unlock()
}

// deliveryTimeout is how long the Hub waits for the mod to confirm a
// typed prompt before delivering it again; deliveryTries bounds the tries.
const (
	deliveryTimeout = 15 * time.Second
	deliveryTries   = 3
)

// dispatch delivers the Session's next queued prompt if Claude Code is
// ready and between Turns. Only one prompt is on its way at a time.
func (h *Hub) dispatch(id string) {
	h.mu.Lock()
	l := h.liveOf(id)
	if !l.ready || l.busy || l.delivering != "" {
		h.mu.Unlock()
		return
	}
	ctx := context.Background()
	p, ok, err := h.store.TakePrompt(ctx, id)
	if err != nil || !ok {
		h.mu.Unlock()
		return
	}
	l.delivering, l.tries = p.ID, 0
	h.mu.Unlock()
	h.deliver(id, p, false)
}

// deliver types a prompt, and arms the timer that retries it.
func (h *Hub) deliver(id string, p store.Prompt, retry bool) {
	s, err := h.store.SessionByID(context.Background(), id)
	rc := h.runnerConn(s.RunnerID)
	if err != nil || rc == nil {
		h.undeliver(id, p.ID)
		return
	}
	h.mu.Lock()
	l := h.liveOf(id)
	l.tries++
	l.timer = time.AfterFunc(deliveryTimeout, func() { h.deliveryTimedOut(id, p) })
	h.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deliveryTimeout)
		defer cancel()
		err := rc.conn.Request(ctx, protocol.TypeSessionDeliver, protocol.SessionDeliver{SessionID: id, PromptID: p.ID,
			Text: promptText(p), Retry: retry}, nil)
		switch {
		case err != nil:
			h.log.Warn("prompt not typed", "session", id, "err", err)
		case p.IsCommand:
			// A slash command or bash-mode line fires no UserPromptSubmit
			// (an unknown one shows only "Unknown command"): typed is
			// delivered.
			h.commandDelivered(id, p.ID)
		}
	}()
}

// promptText is what is typed for a prompt: a leading ! or / would start
// Claude Code's bash mode or a slash command, so unless the person asked for
// one, a blank character goes first and Claude reads it as text. Measured on
// 2.1.328: Claude Code trims whitespace before it looks (so a space does not
// do), removes zero-width characters, and has no escape of its own; U+2800,
// the blank braille pattern, is kept.
func promptText(p store.Prompt) string {
	if !p.IsCommand && (strings.HasPrefix(p.Text, "!") || strings.HasPrefix(p.Text, "/")) {
		return textMark + p.Text
	}
	return p.Text
}

// textMark keeps a prompt's leading ! or / from being a command.
const textMark = "\u2800"

func (h *Hub) deliveryTimedOut(id string, p store.Prompt) {
	h.mu.Lock()
	l := h.liveOf(id)
	if l.delivering != p.ID {
		h.mu.Unlock()
		return
	}
	tries := l.tries
	h.mu.Unlock()
	if tries < deliveryTries {
		h.log.Info("prompt not confirmed; delivering again", "session", id, "try", tries+1)
		h.deliver(id, p, true)
		return
	}
	h.record(context.Background(), id, protocol.Event{Kind: protocol.EventError,
		Text: fmt.Sprintf("Claude Code did not accept a prompt after %d tries; it is back at the head of the queue.", tries)})
	h.undeliver(id, p.ID)
}

// undeliver puts a prompt back at the head of the queue.
func (h *Hub) undeliver(id, promptID string) {
	h.store.SetPromptState(context.Background(), promptID, store.Queued)
	h.mu.Lock()
	l := h.liveOf(id)
	if l.delivering == promptID {
		l.delivering = ""
		if l.timer != nil {
			l.timer.Stop()
		}
	}
	h.mu.Unlock()
}

// promptAccepted is the mod's UserPromptSubmit: the prompt on its way is
// delivered, and a Turn runs.
func (h *Hub) promptAccepted(id string) {
	h.mu.Lock()
	l := h.liveOf(id)
	pid := l.delivering
	l.delivering, l.busy = "", true
	if l.timer != nil {
		l.timer.Stop()
	}
	h.mu.Unlock()
	if pid != "" {
		h.store.SetPromptState(context.Background(), pid, store.Delivered)
	}
}

// commandDelivered records a command as delivered and lets the next
// prompt go.
func (h *Hub) commandDelivered(id, promptID string) {
	h.mu.Lock()
	l := h.liveOf(id)
	if l.delivering == promptID {
		l.delivering = ""
		if l.timer != nil {
			l.timer.Stop()
		}
	}
	h.mu.Unlock()
	h.store.SetPromptState(context.Background(), promptID, store.Delivered)
	h.dispatch(id)
}

// turnEnded lets the next prompt go.
func (h *Hub) turnEnded(id string) {
	h.setLive(id, func(l *live) { l.busy = false })
	h.dispatch(id)
}

// sessionFor returns a Session the person may see: one of a Repo they have
// access to. Any other answers exactly as a Session that doesn't exist.
func (h *Hub) sessionFor(ctx context.Context, p Principal, id string) (store.Session, error) {
	s, err := h.store.SessionByID(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) || (err == nil && !h.canAccess(ctx, p.User, s.RepoURL, false)) {
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
func (h *Hub) drivableSession(ctx context.Context, p Principal, id string) (store.Session, error) {
	s, err := h.sessionFor(ctx, p, id)
	if err == nil && s.CreatorID != p.User.ID {
		err = fmt.Errorf("only the Session's Creator drives it: %w", errdefs.ErrForbidden)
	}
	return s, err
}

func (h *Hub) writeSession(w http.ResponseWriter, r *http.Request, s store.Session, status int) {
	q, err := h.store.Prompts(r.Context(), s.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if q == nil {
		q = []store.Prompt{}
	}
	writeJSON(w, status, sessionView(s, q))
}

func (h *Hub) listSessions(w http.ResponseWriter, r *http.Request, p Principal) {
	ss, err := h.store.Sessions(r.Context(), store.SessionFilter{})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	ss = h.visibleSessions(r.Context(), p, ss)
	if ss == nil {
		ss = []store.Session{}
	}
	writeJSON(w, http.StatusOK, ss)
}

func (h *Hub) showSession(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.sessionFor(r.Context(), p, r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeSession(w, r, s, http.StatusOK)
}

func (h *Hub) queuePrompt(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.PromptRequest
	err := readJSON(r, &req)
	if err == nil {
		err = checkPrompt(req.Text)
	}
	var s store.Session
	if err == nil {
		s, err = h.drivableSession(r.Context(), p, r.PathValue("id"))
	}
	if err == nil && s.State == store.Archived {
		err = fmt.Errorf("the Session is archived: %w", errdefs.ErrConflict)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	pr, err := h.store.EnqueuePrompt(r.Context(), store.Prompt{SessionID: s.ID, AuthorID: p.User.ID, Text: req.Text, IsCommand: req.IsCommand})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	// A prompt wakes an Asleep Session; it waits until it is awake.
	if s.State == store.Asleep && h.runnerConn(s.RunnerID) != nil {
		h.wakeSession(r.Context(), s)
	}
	h.dispatch(s.ID)
	writeJSON(w, http.StatusCreated, pr)
}

func (h *Hub) editPrompt(w http.ResponseWriter, r *http.Request, p Principal) {
	var req api.PromptRequest
	err := readJSON(r, &req)
	if err == nil {
		err = checkPrompt(req.Text)
	}
	h.changePrompt(w, r, p, req.Text, err)
}

func (h *Hub) cancelPrompt(w http.ResponseWriter, r *http.Request, p Principal) {
	h.changePrompt(w, r, p, "", nil)
}

// changePrompt edits a queued prompt's text, or cancels it for "".
func (h *Hub) changePrompt(w http.ResponseWriter, r *http.Request, p Principal, text string, err error) {
	var s store.Session
	if err == nil {
		s, err = h.drivableSession(r.Context(), p, r.PathValue("id"))
	}
	if err == nil {
		err = h.store.EditPrompt(r.Context(), s.ID, r.PathValue("prompt"), text)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Hub) stopTurn(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.drivableSession(r.Context(), p, r.PathValue("id"))
	if err == nil && s.State != store.Active {
		err = fmt.Errorf("the Session is %s, not active: no Turn runs: %w", s.State, errdefs.ErrConflict)
	}
	var rc *runnerConn
	if err == nil {
		if rc = h.runnerConn(s.RunnerID); rc == nil {
			err = fmt.Errorf("the Session's Runner is not connected: %w", errdefs.ErrUnavailable)
		}
	}
	if err == nil {
		err = rc.conn.Request(r.Context(), protocol.TypeSessionStopTurn, protocol.SessionRef{SessionID: s.ID}, nil)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// acceptSessionSocket opens a WebSocket on a Session the person may see,
// reading ?after=SEQ; it has answered the request when ok is false.
func (h *Hub) acceptSessionSocket(w http.ResponseWriter, r *http.Request, p Principal) (s store.Session, after int64, ws *websocket.Conn, ok bool) {
	after, err := afterParam(r)
	if err == nil {
		s, err = h.sessionFor(r.Context(), p, r.PathValue("id"))
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

func (h *Hub) listEvents(w http.ResponseWriter, r *http.Request, p Principal) {
	after, err := afterParam(r)
	var s store.Session
	if err == nil {
		s, err = h.sessionFor(r.Context(), p, r.PathValue("id"))
	}
	var evs []store.Event
	if err == nil {
		evs, err = h.store.Events(r.Context(), s.ID, after, eventPage)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if evs == nil {
		evs = []store.Event{}
	}
	writeJSON(w, http.StatusOK, evs)
}

// watchSession streams a Session's Events over a WebSocket: those after
// ?after=SEQ from the store, then each new one as it is recorded. A watcher
// that falls behind is closed and resumes by sequence number.
func (h *Hub) watchSession(w http.ResponseWriter, r *http.Request, p Principal) {
	s, after, ws, ok := h.acceptSessionSocket(w, r, p)
	if !ok {
		return
	}
	defer ws.CloseNow()
	ctx := ws.CloseRead(r.Context())
	// Subscribe before reading the store, so nothing falls between the two.
	ch, cancel := h.subscribe(s.ID)
	defer cancel()
	send := func(e store.Event) error {
		if e.Seq <= after {
			return nil
		}
		after = e.Seq
		b, _ := json.Marshal(e)
		return ws.Write(ctx, websocket.MessageText, b)
	}
	for {
		evs, err := h.store.Events(ctx, s.ID, after, eventPage)
		if err != nil {
			return
		}
		for _, e := range evs {
			if send(e) != nil {
				return
			}
		}
		if len(evs) < eventPage {
			break
		}
	}
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				ws.Close(websocket.StatusTryAgainLater, "fell behind; reconnect with after=last seq")
				return
			}
			if send(e) != nil {
				return
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
