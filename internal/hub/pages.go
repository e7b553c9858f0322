package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/gateway"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/web"
)

// pagesAPI serves the web UI's pages and a Session's file downloads.
type pagesAPI struct {
	core
	rows    sessionRows
	place   placer
	runners *runners.Conns
	masks   *masks.Sets
	envs    *environment.Service
	gateway *gateway.Gateway
}

// appPage renders a page a signed-in person uses, with its navigation.
func (h core) appPage(w http.ResponseWriter, p Principal, page web.Page, data any) {
	if err := web.Render(w, http.StatusOK, page, navOf(p), data); err != nil {
		h.log.Error("render page", "err", err)
	}
}

// navOf is an app page's navigation for p: the audit log's link is the
// Owner's alone (and the dev user's, who stands in for one).
func navOf(p Principal) *web.Nav {
	return &web.Nav{ID: p.User.ID, Name: p.User.Name, Owner: p.User.IsOwner, Audit: isOwner(p)}
}

// when is a time as the pages show it.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// names maps user ids to names, for showing who made what.
func (h core) names(ctx context.Context) map[string]string {
	out := map[string]string{}
	ms, _ := h.store.Members.List(ctx)
	for _, m := range ms {
		out[m.ID] = m.Name
	}
	return out
}

// home lists the Repos the person has access to, each with its Sessions
// that the page's filter keeps: the same query parameters as GET
// /api/sessions, so a filtered list is a link to share. A wrong filter
// shows why, and no rows.
func (h pagesAPI) home(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	ss, err := h.store.Sessions.List(ctx, store.SessionFilter{})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	members, err := h.store.Members.List(ctx)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	ss = h.guard.visibleSessions(ctx, p, ss)
	query := r.URL.Query()
	q, qerr := h.guard.sessionQueryOf(ctx, p, query)
	type row struct {
		ID, Title, State, StateDetail, Creator, Updated string
		KeepAwake                                       bool
		Pull                                            *pullBadge
		// Spent is the estimated cost, SpentDetail each kind of tokens
		// too; "" while nothing.
		Spent, SpentDetail string
	}
	type repo struct {
		ID, URL, Name string
		Sessions      []row
	}
	type option struct {
		Value, Label string
		Selected     bool
	}
	names := h.names(ctx)
	var repos, shown []*repo
	byURL := map[string]*repo{}
	var repoOpts []option
	var listed []api.Session
	var listedIn []*repo
	for _, s := range ss {
		rp := byURL[s.RepoURL]
		if rp == nil {
			rp = &repo{ID: s.RepoID, URL: s.RepoURL, Name: repoName(s.RepoURL)}
			byURL[s.RepoURL] = rp
			repos = append(repos, rp)
			repoOpts = append(repoOpts, option{s.RepoID, rp.Name + " (" + s.RepoURL + ")", s.RepoID == q.repoID})
		}
		a := h.rows.now(s)
		if qerr != nil || !q.match(a) {
			continue
		}
		if !slices.Contains(shown, rp) {
			shown = append(shown, rp)
		}
		listed, listedIn = append(listed, a), append(listedIn, rp)
	}
	for i, a := range h.rows.list(ctx, listed) {
		rw := row{a.ID, a.Title, string(a.State), a.StateDetail, names[a.CreatorID], when(a.UpdatedAt), a.KeepAwake, badgeOf(a.Pull), "", ""}
		if a.Spent != nil {
			rw.Spent, rw.SpentDetail = a.Spent.Estimate(), a.Spent.Summary()
		}
		listedIn[i].Sessions = append(listedIn[i].Sessions, rw)
	}
	var creatorOpts []option
	for _, m := range members {
		v := cmp.Or(m.GitHubLogin, m.ID)
		creatorOpts = append(creatorOpts, option{v, m.Name, m.ID == q.creatorID})
	}
	var stateOpts []option
	for _, st := range api.SessionStates {
		stateOpts = append(stateOpts, option{string(st), string(st), query.Get(api.FilterState) == string(st)})
	}
	filterErr := ""
	if qerr != nil {
		filterErr = qerr.Error()
	}
	// Blank and BlankRow are what the page's script fills for a Session
	// that starts while it is open (home.js).
	h.appPage(w, p, web.Home, struct {
		Repos, Shown                     []*repo
		Blank                            repo
		BlankRow                         row
		Mine, Waiting, Filtered          bool
		Search, FilterError              string
		RepoOpts, StateOpts, CreatorOpts []option
	}{Repos: repos, Shown: shown, Mine: q.mine, Waiting: q.waiting, Filtered: qerr == nil && q.filtered(),
		Search: query.Get(api.FilterSearch), FilterError: filterErr, RepoOpts: repoOpts, StateOpts: stateOpts, CreatorOpts: creatorOpts})
}

// pullBadge is a Sessions list row's pull request: its number, link, its
// state as a person reads it, and that with its checks and review (Line).
type pullBadge struct {
	Number                   int
	URL, State, Checks, Line string
}

// badgeOf is the badge of a pull request, nil for none.
func badgeOf(p *api.Pull) *pullBadge {
	if p == nil {
		return nil
	}
	return &pullBadge{p.Number, p.URL, p.Status(), p.Checks, p.Line()}
}

// sessionPage is a Session's view. What only its Creator may do is left out
// of the page for anyone else, and refused by the API all the same.
func (h pagesAPI) sessionPage(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	if errors.Is(err, errdefs.ErrNotFound) {
		h.notFoundPage(w, p)
		return
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	// The Installations its run started with: new ones apply at its next
	// start or wake.
	mcp, err := h.gateway.Started(r.Context(), s.ID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	// The Environment version it runs on, and a newer one its next wake or
	// restart takes.
	envOn, envWaiting, err := h.envs.OfSession(r.Context(), s.ID, s.RepoID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.appPage(w, p, web.Session.WithTitle(s.Title), struct {
		ID, Repo, RepoID, State, StateDetail, Model, Effort, Creator, SandboxGit string
		IsCreator, Forward, KeepAwake, ThreadContext                             bool
		MCPServers                                                               []protocol.MCPServer
		Environment, EnvironmentWaiting                                          int
		CanPush                                                                  bool // offers Allow on a host egress refused
	}{s.ID, s.RepoURL, s.RepoID, string(s.State), s.StateDetail, s.Model, s.Effort, h.names(r.Context())[s.CreatorID], s.SandboxGit,
		s.CreatorID == p.User.ID, h.cfg.ForwardURL != "", s.KeepAwake, s.ThreadContext, mcp, envOn, envWaiting, h.guard.canPush(r.Context(), p.User, s.RepoURL)})
}

func (h core) notFoundPage(w http.ResponseWriter, p Principal) {
	if err := web.Render(w, http.StatusNotFound, web.Message.WithTitle("No such Session"), navOf(p),
		struct{ Text, Link string }{"There is no such Session, or it is on a Repo you have no access to.", ""}); err != nil {
		h.log.Error("render page", "err", err)
	}
}

// runnersPage lists the Runners: whose each is and who may use it, with
// Share and Unshare for the Owner and Remove for its owner and the Owner.
func (h pagesAPI) runnersPage(w http.ResponseWriter, r *http.Request, p Principal) {
	rs, err := h.place.runnerStatuses(r.Context(), p)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type row struct {
		ID, Name, Owner, Backend, Load, Created, Version, Warning string
		Connected, Shared, Usable, Remove                         bool
	}
	out := make([]row, len(rs))
	for i, rn := range rs {
		out[i] = row{ID: rn.ID, Name: rn.Name, Owner: rn.Owner, Created: when(rn.CreatedAt), Connected: rn.Connected,
			Shared: rn.Shared, Usable: rn.Usable, Remove: mayRemoveRunner(p, rn.CreatedBy), Warning: rn.Warning}
		if rn.Build != nil {
			out[i].Version = runners.BuildText(*rn.Build)
		}
		if rn.Host != nil {
			out[i].Backend = rn.Host.Backend
			out[i].Load = rn.LoadText()
		}
	}
	h.appPage(w, p, web.Runners, struct {
		Runners []row
		Owner   bool
		HubURL  string
	}{out, isOwner(p), h.cfg.PublicURL})
}

func (h pagesAPI) accountPage(w http.ResponseWriter, r *http.Request, p Principal) {
	_, at, err := h.store.Members.UserSecret(r.Context(), p.User.ID, claudeTokenSecret)
	ws, werr := h.store.Notify.NotifyWebhooks(r.Context(), p.User.ID)
	if werr != nil {
		h.writeError(w, r, werr)
		return
	}
	type webhook struct{ ID, URL, Format, FailingSince, LastError, Stopped, Created string }
	data := struct {
		TokenSet   bool
		TokenSetAt string
		Webhooks   []webhook
	}{TokenSet: err == nil, TokenSetAt: when(at)}
	for _, x := range ws {
		data.Webhooks = append(data.Webhooks, webhook{ID: x.ID, URL: x.URL, Format: x.Format, FailingSince: when(x.FailingSince),
			LastError: x.LastError, Stopped: when(x.StoppedAt), Created: when(x.CreatedAt)})
	}
	h.appPage(w, p, web.Account, data)
}

func (h pagesAPI) membersPage(w http.ResponseWriter, r *http.Request, p Principal) {
	ms, err := h.store.Members.List(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type member struct {
		ID, Name, GitHubLogin, Since string
		IsOwner                      bool
	}
	type invite struct{ ID, Login, Expires, State string }
	data := struct {
		Owner   bool
		Me      string
		Members []member
		Invites []invite
	}{Owner: isOwner(p), Me: p.User.ID}
	for _, m := range ms {
		data.Members = append(data.Members, member{m.ID, m.Name, m.GitHubLogin, when(m.CreatedAt), m.IsOwner})
	}
	if data.Owner {
		invs, _ := h.store.Members.Invites(r.Context())
		for _, in := range invs {
			state := "open"
			switch {
			case !in.UsedAt.IsZero():
				state = "used"
			case !in.RevokedAt.IsZero():
				state = "revoked"
			case time.Now().After(in.ExpiresAt):
				state = "expired"
			}
			data.Invites = append(data.Invites, invite{in.ID, in.GitHubLogin, when(in.ExpiresAt), state})
		}
	}
	h.appPage(w, p, web.Members, data)
}

// downloadFile sends a file of a Session's Workspace to someone with access
// to the Session, as a download: never a document on the Hub's origin,
// whatever it holds (serveDownload).
func (h pagesAPI) downloadFile(w http.ResponseWriter, r *http.Request, p Principal) {
	s, err := h.guard.sessionFor(r.Context(), p, r.PathValue("id"))
	var rc *runners.Conn
	if err == nil {
		_, rc, err = activeOn(r.Context(), h.store.Sessions, h.runners, s.ID)
		if errors.Is(err, errdefs.ErrConflict) {
			err = fmt.Errorf("the Session is %s: its Workspace's files can be downloaded while it is active: %w", s.State, errdefs.ErrConflict)
		}
	}
	var info protocol.SessionFileInfo
	var conn net.Conn
	if err == nil {
		conn, err = h.runners.OpenStream(r.Context(), rc, protocol.TypeSessionFile, func(stream string) any {
			return protocol.SessionFile{SessionID: s.ID, Path: r.PathValue("path"), Stream: stream}
		}, &info)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	defer conn.Close()
	if s.CreatorID != p.User.ID {
		h.downloadMasked(w, r, s.ID, info, conn)
		return
	}
	serveDownload(w, info.Name, info.Size)
	io.Copy(w, io.LimitReader(conn, info.Size))
}

// maskedFileMax bounds a Workspace file the Hub masks for a watcher. It is
// masked whole, in memory, as an Event's text is: a value or a
// credential's shape is found only where it is read in one piece.
const maskedFileMax = 16 << 20

// downloadMasked sends a Workspace file to someone who watches the Session
// but isn't its Creator, masked as its Events are: a file Claude wrote from
// Sensitive values (a .env) would otherwise show them, where only the
// Creator sees the terminal. A file past maskedFileMax goes to nobody else.
func (h pagesAPI) downloadMasked(w http.ResponseWriter, r *http.Request, sessionID string, info protocol.SessionFileInfo, conn net.Conn) {
	mask, err := h.masks.WatcherMask(r.Context(), sessionID)
	if err == nil && info.Size > maskedFileMax {
		err = fmt.Errorf("%s is over %s, the most the Hub masks for someone other than the Session's Creator; its Creator can download it: %w",
			info.Name, bytesText(maskedFileMax), errdefs.ErrTooLarge)
	}
	var data []byte
	if err == nil {
		data = make([]byte, info.Size)
		if _, err = io.ReadFull(conn, data); err != nil {
			err = fmt.Errorf("%s could not be read whole from the Runner (it may have changed meanwhile): %w", info.Name, errdefs.ErrUnavailable)
		}
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	masked := mask(string(data))
	serveDownload(w, info.Name, int64(len(masked)))
	io.WriteString(w, masked)
}

// serveDownload sets the headers of every file a Session made that the Hub
// serves: bytes to save, never a page, script, image or document the
// browser would render on the Hub's origin, and never sniffed into one.
func serveDownload(w http.ResponseWriter, name string, size int64) {
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": safeName(name)}))
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "no-referrer")
	if size >= 0 {
		hd.Set("Content-Length", fmt.Sprint(size))
	}
	w.WriteHeader(http.StatusOK)
}

// safeName keeps a file name to what is safe in a header and a file
// system: no controls, separators or quotes.
func safeName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || slices.Contains([]rune(`/\"`), r) {
			return '_'
		}
		return r
	}, name)
	if name == "" || name == "." || name == ".." {
		return "download"
	}
	return name
}
