// Package gitrelay is the Runner's git relay: git's smart HTTP between a
// Sandbox and its Session's Repo at the forge, with a forge token the
// Sandbox never holds. It serves one Repo per Session, fetch and clone as
// they are, and a push only when each ref it changes is the Session's own
// (policy.go), reading nothing of the push but its commands (pktline.go)
// and streaming the pack through unread; it runs no git. It tells its
// owner of each ref the forge took. It also serves gh's calls to the
// forge's REST and GraphQL APIs for the same Repo, by method and path and
// by GraphQL operation (api.go, graphql.go). The Runner's relay
// (internal/relay) routes /git/* and requests for APIHost to it once it
// has checked the Session token; only internal/runner and internal/relay
// import it.
package gitrelay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/forge"
)

// Session is what the relay serves one Session.
type Session struct {
	// Repo is the Repo's git URL at the forge, such as
	// https://github.com/acme/app.git: the only one the Session reaches.
	Repo string
	// Prefix is the start of the branches the Session may push, such as
	// kndl/1a2b3c4d/ (BranchPrefix).
	Prefix string
	// Made are the branches under Prefix the Session made through the
	// relay before (as its owner kept them): it may update those.
	Made []string
}

// Options configure a Relay.
type Options struct {
	// Forge is the git host the Repos are on (github.Git); a forge.API
	// also serves gh's API calls.
	Forge forge.Git
	// Client reaches the forge; nil is http.DefaultClient's transport with
	// no redirects followed.
	Client *http.Client
	// Pushed, if set, is told of the refs of each push the forge took,
	// after it answered; the Session may update them from then on.
	Pushed func(ctx context.Context, sessionID string, took []Update)
	Logger *slog.Logger
}

// Relay is the git relay.
type Relay struct {
	forge  forge.Git
	client *http.Client
	pushed func(ctx context.Context, sessionID string, took []Update)
	log    *slog.Logger

	mu       sync.Mutex
	sessions map[string]*served
}

// served is one Session's Repo, its prefix, the branches it made, and its
// forge token ("" until its owner has one), which is read where a request
// goes to the forge (tokenOf), never from a copy.
type served struct {
	id     string
	repo   *url.URL
	path   string // the Repo's path without ".git": acme/app
	prefix string
	made   map[string]bool
	token  string
}

// New makes a Relay.
func New(o Options) *Relay {
	c := o.Client
	if c == nil {
		c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Relay{forge: o.Forge, client: c, pushed: o.Pushed, log: log.With("component", "gitrelay"), sessions: map[string]*served{}}
}

// BranchPrefix is a Session's branch prefix: the Environment's
// branch_prefix (kndl/ when empty) and the Session's short id, the first
// 8 characters of its id, so no two Sessions of a Repo share one.
func BranchPrefix(envPrefix, sessionID string) string {
	if envPrefix == "" {
		envPrefix = DefaultPrefix
	}
	short := sessionID
	if len(short) > 8 {
		short = short[:8]
	}
	return envPrefix + short + "/"
}

// DefaultPrefix is an Environment's branch_prefix when it sets none.
const DefaultPrefix = "kndl/"

// RepoPath is where the Sandbox finds repo on the relay, below /git/: its
// path at the forge, such as acme/app.git. ok is false for a Repo the
// relay can't serve (not over HTTP(S)).
func RepoPath(repo string) (p string, ok bool) {
	u, err := url.Parse(repo)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", false
	}
	p = strings.Trim(u.Path, "/")
	if p == "" {
		return "", false
	}
	return strings.TrimSuffix(p, ".git") + ".git", true
}

// Open starts serving a Session, or changes what it serves one.
func (r *Relay) Open(sessionID string, s Session) error {
	u, err := url.Parse(s.Repo)
	p, ok := RepoPath(s.Repo)
	if err != nil || !ok {
		return fmt.Errorf("gitrelay: the Repo %q is not a git URL over HTTP(S)", s.Repo)
	}
	if !strings.HasSuffix(s.Prefix, "/") || !validRef("refs/heads/"+s.Prefix+"x") {
		return fmt.Errorf("gitrelay: the branch prefix %q is not a ref path ending in /", s.Prefix)
	}
	made := map[string]bool{}
	for _, b := range s.Made {
		if strings.HasPrefix(b, s.Prefix) {
			made[b] = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.sessions[sessionID]
	x := &served{id: sessionID, repo: u, path: strings.TrimSuffix(p, ".git"), prefix: s.Prefix, made: made}
	if old != nil {
		x.token = old.token
		for b := range old.made {
			x.made[b] = true
		}
	}
	r.sessions[sessionID] = x
	return nil
}

// SetToken gives a Session's forge token, held in memory alone; "" drops
// it.
func (r *Relay) SetToken(sessionID, token string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.sessions[sessionID]
	if x == nil {
		return fmt.Errorf("gitrelay: session %s is not served", sessionID)
	}
	x.token = token
	return nil
}

// Close stops serving a Session and forgets its token.
func (r *Relay) Close(sessionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sessions, sessionID)
}

// session returns a copy of what the relay serves sessionID.
func (r *Relay) session(sessionID string) (served, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.sessions[sessionID]
	if x == nil {
		return served{}, false
	}
	return *x, true
}

// tokenOf is the Session's forge token as the relay holds it now: read
// as a request leaves for the forge, not when the Sandbox's began, so no
// request goes out with a token replaced while the Sandbox sent its body
// (and perhaps revoked since).
func (r *Relay) tokenOf(sessionID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if x := r.sessions[sessionID]; x != nil {
		return x.token
	}
	return ""
}

// made reports whether the Session made branch through the relay.
func (r *Relay) madeBy(sessionID string) func(string) bool {
	return func(b string) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		x := r.sessions[sessionID]
		return x != nil && x.made[b]
	}
}

// pushTimeout bounds one push, pack and all: far more than a Sandbox on
// the Runner's host needs to send, and what the forge takes to answer.
const pushTimeout = time.Hour

// ServeGit serves git's smart HTTP for a Session whose Session token the
// caller checked: rest is the path below /git/, such as
// acme/app.git/info/refs. It serves the Session's Repo alone, and only
// info/refs, git-upload-pack and git-receive-pack; a refusal is text
// that git prints as "remote: …".
func (r *Relay) ServeGit(w http.ResponseWriter, req *http.Request, sessionID, rest string) {
	s, ok := r.session(sessionID)
	if !ok {
		refuse(w, http.StatusServiceUnavailable, "kndl: this Session's git relay is not open yet; try again in a moment")
		return
	}
	repo, op, _ := strings.Cut(rest, ".git/")
	if !strings.EqualFold(repo, s.path) { // as GitHub takes it
		refuse(w, http.StatusForbidden, fmt.Sprintf("kndl: this Session reaches %s alone through its git relay, not %s", s.path, repo))
		return
	}
	service := req.URL.Query().Get("service")
	switch {
	case req.Method == http.MethodGet && op == "info/refs" && (service == "git-upload-pack" || service == "git-receive-pack"):
		r.forward(w, req, s, op+"?service="+service, req.Body, nil, nil)
	case req.Method == http.MethodPost && op == "git-upload-pack":
		r.forward(w, req, s, op, req.Body, nil, nil)
	case req.Method == http.MethodPost && op == "git-receive-pack":
		r.push(w, req, sessionID, s)
	default:
		refuse(w, http.StatusNotFound, "kndl: the git relay serves git's smart HTTP alone (fetch, clone and push), not "+req.Method+" "+op)
	}
}

// push judges a push's commands, and sends it on, commands and pack as
// the Sandbox sent them, only if the policy takes every one: git pushes
// a ref at a time, so a push with one refused is refused whole, each
// ref saying why.
func (r *Relay) push(w http.ResponseWriter, req *http.Request, sessionID string, s served) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(pushTimeout))
	if ct := req.Header.Get("Content-Type"); ct != "application/x-git-receive-pack-request" {
		refuse(w, http.StatusUnsupportedMediaType, "kndl: a push's body is application/x-git-receive-pack-request, not "+ct)
		return
	}
	if ce := req.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		// What the relay read must be what the forge reads.
		refuse(w, http.StatusUnsupportedMediaType, "kndl: the git relay takes a push's body unencoded, not "+ce)
		return
	}
	if req.ContentLength == int64(len(flushPkt)) {
		// git's probe before a push larger than http.postBuffer
		// (remote-curl's probe_rpc): a flush alone, no commands, asking
		// whether the forge takes the credential before git streams the
		// pack. The forge answers it, with nothing to update.
		if b, _ := io.ReadAll(io.LimitReader(req.Body, int64(len(flushPkt)))); string(b) == string(flushPkt) {
			r.forward(w, req, s, "git-receive-pack", bytes.NewReader(flushPkt), nil, nil)
			return
		}
	}
	cmds, err := readCommands(req.Body)
	if err != nil {
		refuse(w, http.StatusBadRequest, "kndl: "+err.Error())
		return
	}
	made := r.madeBy(sessionID)
	var refused []Update
	why := make([]verdict, len(cmds.updates))
	for i, u := range cmds.updates {
		if why[i] = judge(u, s.prefix, made); why[i] != "" {
			refused = append(refused, u)
		}
	}
	if len(refused) > 0 {
		for i := range why {
			if why[i] == "" {
				why[i] = "not pushed: another ref in this push was refused"
			}
		}
		// The client sends its whole pack before it reads the answer:
		// read it to its end, unread, so git gets the answer rather than a
		// broken pipe.
		io.Copy(io.Discard, req.Body)
		writeRefusal(w, cmds, why, hint(refused, s.prefix))
		return
	}
	// A refusal from here on is a report git prints for each ref; a
	// status alone it would print as "RPC failed; HTTP 403".
	failed := func(reason, msg string) {
		io.Copy(io.Discard, req.Body)
		for i := range why {
			why[i] = verdict(reason)
		}
		writeRefusal(w, cmds, why, msg)
	}
	if r.tokenOf(sessionID) == "" {
		failed("no "+r.forge.Name()+" token yet", "kndl: the Runner holds no "+r.forge.Name()+" token for this Session yet, so it can't push; the Session's log says why")
		return
	}
	report := &reportReader{sideband: slices.Contains(cmds.caps, "side-band-64k") || slices.Contains(cmds.caps, "side-band")}
	body := io.MultiReader(strings.NewReader(string(cmds.head)), req.Body)
	// The forge's answer is read to its end even if git left before it:
	// what the forge took is the Session's, whether git heard it or not.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), pushTimeout)
	defer cancel()
	req = req.WithContext(ctx)
	r.forward(w, req, s, "git-receive-pack", body, report, failed)
	var took []Update
	for _, u := range cmds.updates {
		if slices.Contains(report.ok, u.Ref) {
			took = append(took, u)
		}
	}
	if len(took) == 0 {
		return
	}
	r.mu.Lock()
	if x := r.sessions[sessionID]; x != nil {
		for _, u := range took {
			if b := u.Branch(); b != "" && strings.HasPrefix(b, x.prefix) {
				x.made[b] = true
			}
		}
	}
	r.mu.Unlock()
	if r.pushed != nil {
		r.pushed(req.Context(), sessionID, took)
	}
}

// forward sends a request on to the Session's Repo at the forge with its
// token, and streams the answer back: op is the path and query below the
// Repo's URL. Only git's own headers go either way. A refusal by the forge
// of the Runner's token comes back as the relay's own 403, not the forge's
// 401, which would have git ask its credential helper again. report, if
// set, reads the answer as it passes. failed, if set, answers a refusal
// before any of the answer was sent, in few words and in full; else it is
// refused as text. It reports whether the forge answered 200.
func (r *Relay) forward(w http.ResponseWriter, req *http.Request, s served, op string, body io.Reader, report *reportReader, failed func(why, msg string)) bool {
	fail := func(status int, why, msg string) {
		if failed != nil {
			failed(why, msg)
			return
		}
		refuse(w, status, msg)
	}
	target := *s.repo
	target.Path = "/" + s.path + ".git/"
	target.RawQuery = ""
	u, _ := url.Parse(target.String())
	u = u.ResolveReference(&url.URL{Path: strings.SplitN(op, "?", 2)[0]})
	if _, q, ok := strings.Cut(op, "?"); ok {
		u.RawQuery = q
	}
	if req.Method == http.MethodGet {
		body = nil
	}
	out, err := http.NewRequestWithContext(req.Context(), req.Method, u.String(), body)
	if err != nil {
		fail(http.StatusBadGateway, "the forge is unreachable", "kndl: the git relay could not reach the forge")
		return false
	}
	if body != nil {
		// What the Sandbox sent, to the byte: git sends a small body with
		// its length, a large one chunked.
		out.ContentLength = req.ContentLength
	}
	for _, h := range []string{"Content-Type", "Content-Encoding", "Accept", "Accept-Encoding", "Git-Protocol", "User-Agent"} {
		if v := req.Header.Values(h); len(v) > 0 {
			out.Header[h] = v
		}
	}
	token := r.tokenOf(s.id)
	if token != "" {
		r.forge.Authorize(out, token)
	}
	resp, err := r.client.Do(out)
	if err != nil {
		r.log.Warn("forge unreachable", "op", strings.SplitN(op, "?", 2)[0], "err", err)
		fail(http.StatusBadGateway, s.repo.Host+" is unreachable; try again", "kndl: the git relay could not reach "+s.repo.Host+"; try again")
		return false
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		why := "the Runner holds no " + r.forge.Name() + " token for this Session"
		if token != "" {
			why = "the Session's " + r.forge.Name() + " token does not reach it, or its Creator may not push to it"
		}
		fail(http.StatusForbidden, fmt.Sprintf("%s refused it (%d)", s.repo.Host, resp.StatusCode),
			fmt.Sprintf("kndl: %s refused %s (%d): %s", s.repo.Host, s.path, resp.StatusCode, why))
		return false
	default:
		fail(http.StatusBadGateway, fmt.Sprintf("%s answered %d; try again", s.repo.Host, resp.StatusCode),
			fmt.Sprintf("kndl: %s answered %s for %s; try again", s.repo.Host, resp.Status, s.path))
		return false
	}
	for _, h := range []string{"Content-Type", "Content-Encoding", "Cache-Control", "Expires", "Pragma"} {
		if v := resp.Header.Values(h); len(v) > 0 {
			w.Header()[h] = v
		}
	}
	w.WriteHeader(http.StatusOK)
	var from io.Reader = resp.Body
	if report != nil {
		report.r = resp.Body
		from = report
	}
	if _, err := io.Copy(flushWriter{w}, from); err != nil && !errors.Is(err, context.Canceled) {
		r.log.Debug("answer cut short", "err", err)
		if report != nil {
			io.Copy(io.Discard, io.LimitReader(report, maxReportAnswer))
		}
		return false
	}
	return true
}

// maxReportAnswer bounds what the relay reads of the forge's answer to a
// push that git no longer hears: the report of up to maxCommands refs,
// and the progress before it.
const maxReportAnswer = 4 << 20

// flushWriter flushes each write, so git sees the forge's progress as it
// comes.
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	http.NewResponseController(f.w).Flush()
	return n, err
}

// refuse answers an error as text, which git prints after "remote: ".
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

// writeRefusal answers a push as receive-pack does one it refused: a
// report-status with "unpack ok" (nothing was unpacked, and nothing
// needed to be) and each ref's "ng <ref> <why>", which git shows as
// "! [remote rejected] <ref> (<why>)", with msg on side band 2 before it
// (git shows "remote: <msg>") when the client asked for a side band.
func writeRefusal(w http.ResponseWriter, cmds commands, why []verdict, msg string) {
	var report []byte
	report = append(report, pkt("unpack ok\n")...)
	for i, u := range cmds.updates {
		report = append(report, pkt("ng "+u.Ref+" "+string(why[i])+"\n")...)
	}
	report = append(report, flushPkt...)
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	band := 0
	switch {
	case slices.Contains(cmds.caps, "side-band-64k"):
		band = 65515
	case slices.Contains(cmds.caps, "side-band"):
		band = 995
	}
	if band == 0 {
		w.Write(report)
		return
	}
	w.Write(pkt("\x02" + msg + "\n"))
	for len(report) > 0 {
		n := min(band, len(report))
		w.Write(pkt("\x01" + string(report[:n])))
		report = report[n:]
	}
	w.Write(flushPkt)
}
