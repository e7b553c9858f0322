package gateway

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// An Installation's id names its MCP server in Claude Code, so it is what
// Claude Code takes in a server name.
var installationIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`) })

// MinValueBytes and MaxValueBytes bound a header secret value: redaction
// finds only a value of at least 4 characters.
const (
	MinValueBytes = 4
	MaxValueBytes = 8 << 10
)

// Install makes an Installation. Only the Owner makes a global one; a
// Repo-scoped one takes write (push) permission on every Repo it lists.
func (g *Gateway) Install(ctx context.Context, u store.User, req api.InstallationRequest) (api.Installation, error) {
	if !installationIDRE().MatchString(req.ID) {
		return api.Installation{}, fmt.Errorf("an Installation's id is lowercase letters, digits and -, not %q: %w", req.ID, errdefs.ErrInvalid)
	}
	if err := checkName(req.Name); err != nil {
		return api.Installation{}, err
	}
	if req.Global == (len(req.Repos) > 0) {
		return api.Installation{}, fmt.Errorf("an Installation is global or lists the Repos it is on in, one of the two: %w", errdefs.ErrInvalid)
	}
	if _, err := g.store.MCP.MCPServerByID(ctx, req.Server); err != nil {
		return api.Installation{}, err
	}
	in := store.Installation{ID: req.ID, ServerID: req.Server, Name: req.Name, Global: req.Global, Repos: dedupe(req.Repos), CreatedBy: u.ID}
	if err := g.mayEdit(ctx, u, in); err != nil {
		return api.Installation{}, err
	}
	in, err := g.store.MCP.CreateInstallation(ctx, in, u.ID, "installed "+req.Server+" as "+req.Name)
	if err != nil {
		return api.Installation{}, err
	}
	return g.view(ctx, u, in)
}

// SetRepos replaces the Repos a Repo-scoped Installation is on in. It
// takes write (push) permission on every Repo it lists now and will list.
func (g *Gateway) SetRepos(ctx context.Context, u store.User, id string, repos []string) (api.Installation, error) {
	in, err := g.installationFor(ctx, u, id)
	if err != nil {
		return api.Installation{}, err
	}
	if len(repos) == 0 {
		return api.Installation{}, fmt.Errorf("a Repo-scoped Installation lists at least one Repo: %w", errdefs.ErrInvalid)
	}
	next := in
	next.Repos = dedupe(repos)
	if err := g.mayEdit(ctx, u, next); err != nil {
		return api.Installation{}, err
	}
	if err := g.store.MCP.SetInstallationRepos(ctx, id, next.Repos, u.ID, "changed the Repos it is on in"); err != nil {
		return api.Installation{}, err
	}
	return g.view(ctx, u, next)
}

// SetValue sets an Installation's value of one of its server's header
// secrets; it takes the right to edit the Installation.
func (g *Gateway) SetValue(ctx context.Context, u store.User, id, key, value string) (api.Installation, error) {
	in, err := g.installationFor(ctx, u, id)
	if err != nil {
		return api.Installation{}, err
	}
	srv, err := g.store.MCP.MCPServerByID(ctx, in.ServerID)
	if err != nil {
		return api.Installation{}, err
	}
	if !slices.ContainsFunc(srv.Headers, func(h store.HeaderSecret) bool { return h.Key == key }) {
		return api.Installation{}, fmt.Errorf("MCP server %s declares no header secret %q: %w", srv.ID, key, errdefs.ErrNotFound)
	}
	if len(value) < MinValueBytes || len(value) > MaxValueBytes || !printable(value) || strings.TrimSpace(value) != value {
		return api.Installation{}, fmt.Errorf("a header secret value is %d to %d bytes of printable characters, without spaces at its ends: %w", MinValueBytes, MaxValueBytes, errdefs.ErrInvalid)
	}
	if err := g.store.MCP.SetInstallationValue(ctx, id, key, g.sealer.Seal([]byte(value), valueSeal(id, key)), u.ID); err != nil {
		return api.Installation{}, err
	}
	return g.view(ctx, u, in)
}

// SetOff turns an Installation off (or back on) for one Repo; anyone who
// may push to the Repo may. repo is a Repo the caller checked access to.
func (g *Gateway) SetOff(ctx context.Context, u store.User, repo store.Repo, id string, off bool) (api.Installation, error) {
	if err := g.mayPush(ctx, u, repo); err != nil {
		return api.Installation{}, err
	}
	in, err := g.store.MCP.InstallationByID(ctx, id)
	if err != nil {
		return api.Installation{}, err
	}
	if err := g.store.MCP.SetInstallationOff(ctx, repo.ID, id, off, u.ID); err != nil {
		return api.Installation{}, err
	}
	v, err := g.view(ctx, u, in)
	if err == nil {
		v.On, err = g.onFor(ctx, repo.ID, in)
	}
	return v, err
}

// List returns every Installation as u sees it; with repo set, each says
// whether it is on there.
func (g *Gateway) List(ctx context.Context, u store.User, repo *store.Repo) ([]api.Installation, error) {
	ins, err := g.store.MCP.Installations(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Installation, 0, len(ins))
	for _, in := range ins {
		v, err := g.view(ctx, u, in)
		if err == nil && repo != nil {
			v.On, err = g.onFor(ctx, repo.ID, in)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Log returns a Repo's log of Installation changes, with each actor by
// name. repo is a Repo the caller checked access to.
func (g *Gateway) Log(ctx context.Context, repo store.Repo) ([]api.InstallationChange, error) {
	rows, err := g.store.MCP.InstallationLog(ctx, repo.ID)
	out := make([]api.InstallationChange, 0, len(rows))
	for _, r := range rows {
		out = append(out, api.InstallationChange{At: r.At, Installation: r.InstallationID, Who: g.nameOf(ctx, r.ActorID), What: r.What})
	}
	return out, err
}

// installationFor returns an Installation u may edit.
func (g *Gateway) installationFor(ctx context.Context, u store.User, id string) (store.Installation, error) {
	in, err := g.store.MCP.InstallationByID(ctx, id)
	if err == nil {
		err = g.mayEdit(ctx, u, in)
	}
	return in, err
}

// mayEdit refuses u the Installation in unless they are the Owner, for a
// global one, or may push to every Repo it lists: it reaches every
// Creator's Sessions there. A refusal reads the same whether a Repo exists
// or not.
func (g *Gateway) mayEdit(ctx context.Context, u store.User, in store.Installation) error {
	if in.Global {
		if !u.IsOwner {
			return fmt.Errorf("only the Owner makes or edits a global Installation, since every Sandbox on the Hub can use it: %w", errdefs.ErrForbidden)
		}
		return nil
	}
	for _, id := range in.Repos {
		r, err := g.store.Repos.RepoByID(ctx, id)
		if err != nil || !g.access(ctx, u, r.URL) {
			return fmt.Errorf("no Repo %s that you have access to: an Installation takes write (push) permission on every Repo it lists: %w", id, errdefs.ErrNotFound)
		}
		if err := g.mayPush(ctx, u, r); err != nil {
			return err
		}
	}
	return nil
}

// mayPush refuses u a change to what the Sessions of r, a Repo they have
// access to, reach through the Gateway, unless they may push to it.
func (g *Gateway) mayPush(ctx context.Context, u store.User, r store.Repo) error {
	if !g.push(ctx, u, r.URL) {
		return fmt.Errorf("changing the Installations of %s takes write (push) permission on it at GitHub; you may read it only: %w", r.URL, errdefs.ErrForbidden)
	}
	return nil
}

// view is in as u sees it: only the Repos they have access to, and how
// many others it lists.
func (g *Gateway) view(ctx context.Context, u store.User, in store.Installation) (api.Installation, error) {
	srv, err := g.store.MCP.MCPServerByID(ctx, in.ServerID)
	if err != nil {
		return api.Installation{}, err
	}
	values, err := g.store.MCP.InstallationValues(ctx, in.ID)
	if err != nil {
		return api.Installation{}, err
	}
	v := api.Installation{ID: in.ID, Server: in.ServerID, Name: in.Name, Global: in.Global, Repos: []string{}, Secrets: []api.SecretStatus{}}
	for _, id := range in.Repos {
		if r, err := g.store.Repos.RepoByID(ctx, id); err == nil && g.access(ctx, u, r.URL) {
			v.Repos = append(v.Repos, id)
		} else {
			v.HiddenRepos++
		}
	}
	if srv.Auth == AuthOAuth {
		v.OAuth = g.oauthStatus(ctx, in.ID)
	}
	for _, h := range srv.Headers {
		st := api.SecretStatus{Key: h.Key, NeedsOne: true}
		if val, ok := values[h.Key]; ok {
			st = api.SecretStatus{Key: h.Key, SetBy: g.nameOf(ctx, val.SetBy), SetAt: val.SetAt}
		}
		v.Secrets = append(v.Secrets, st)
	}
	return v, nil
}

func (g *Gateway) nameOf(ctx context.Context, userID string) string {
	if u, err := g.store.Members.UserByID(ctx, userID); err == nil {
		return u.Name
	}
	return "a former Member"
}

// valueSeal binds a header secret value to its Installation and key, so a
// value moved to another row does not open.
func valueSeal(installation, key string) string {
	return "installation-value:" + installation + ":" + key
}

func dedupe(xs []string) []string {
	out := []string{}
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
