package gateway

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// Auth kinds an MCP server declares, with AuthOAuth.
const (
	AuthNone    = "none"
	AuthHeaders = "headers"
)

var (
	// A Hub-only server's id is in a namespace npm names can't use, so it
	// never clashes with a package's (ADR 0020).
	serverIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^hub:[a-z0-9][a-z0-9-]{0,62}$`) })
	keyRE      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`) })
	headerRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`) })
)

// reservedHeaders are the headers a header secret may not be: the ones
// MCP's streamable HTTP transport, the connection or the Gateway own.
var reservedHeaders = []string{"Host", "Connection", "Content-Length", "Content-Type", "Transfer-Encoding", "Te", "Trailer", "Upgrade",
	"Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Cookie", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id",
	"Forwarded", "Via", "X-Real-Ip"}

const valueMark = "{value}"

// CreateServer records a new MCP server; any Member may.
func (g *Gateway) CreateServer(ctx context.Context, u store.User, m api.MCPServer) (api.MCPServer, error) {
	if !serverIDRE().MatchString(m.ID) {
		return m, fmt.Errorf("an MCP server's id is hub:<slug> (lowercase letters, digits and -), not %q: %w", m.ID, errdefs.ErrInvalid)
	}
	row, err := checkServer(m)
	if err != nil {
		return m, err
	}
	row.CreatedBy = u.ID
	row, err = g.store.MCP.CreateMCPServer(ctx, row)
	return apiServer(row), err
}

// EditServer replaces an MCP server's name, URL and header secrets. A
// server with Installations is edited only by someone who may edit each of
// them, since the edit reaches every Session they are on for; one without
// any, by any Member. Any change of its URL, its path included, clears
// every Installation's values, OAuth tokens and client, and changing a
// header secret's key or header clears its values, so an edit can't send a
// value elsewhere; running Sessions keep the URL they started with. With
// dryRun it changes nothing and says whose values it would clear.
func (g *Gateway) EditServer(ctx context.Context, u store.User, m api.MCPServer, dryRun bool) (api.MCPServerEdit, error) {
	old, err := g.store.MCP.MCPServerByID(ctx, m.ID)
	if err != nil {
		return api.MCPServerEdit{}, err
	}
	row, err := checkServer(m)
	if err != nil {
		return api.MCPServerEdit{}, err
	}
	ins, err := g.installationsOf(ctx, m.ID)
	if err != nil {
		return api.MCPServerEdit{}, err
	}
	for _, in := range ins {
		if g.mayEdit(ctx, u, in) != nil {
			return api.MCPServerEdit{}, fmt.Errorf("editing MCP server %s takes the right to edit each of its Installations, and you may not edit %s "+
				"(the Owner edits a global one; a Repo-scoped one takes write (push) permission on each Repo it lists): %w", m.ID, in.ID, errdefs.ErrForbidden)
		}
	}
	clearAll := old.URL != row.URL
	var keys []string
	for _, h := range old.Headers {
		if clearAll || !slices.ContainsFunc(row.Headers, func(n store.HeaderSecret) bool { return n.Key == h.Key && strings.EqualFold(n.Header, h.Header) }) {
			keys = append(keys, h.Key)
		}
	}
	clears, err := g.valuesOf(ctx, ins, keys)
	if err != nil {
		return api.MCPServerEdit{}, err
	}
	out := api.MCPServerEdit{Server: apiServer(row), DryRun: dryRun, Clears: clears}
	if dryRun {
		return out, nil
	}
	if err := g.store.MCP.UpdateMCPServer(ctx, old, ins, row, clearAll, keys); err != nil {
		return out, err
	}
	for _, c := range clears {
		what := fmt.Sprintf("edited MCP server %s, which cleared the values of %s", m.ID, strings.Join(c.Keys, ", "))
		if err := g.store.MCP.LogInstallationChange(ctx, c.Installation, u.ID, what); err != nil {
			return out, err
		}
	}
	return out, nil
}

// installationsOf lists the Installations of a server.
func (g *Gateway) installationsOf(ctx context.Context, serverID string) ([]store.Installation, error) {
	all, err := g.store.MCP.Installations(ctx)
	return slices.DeleteFunc(all, func(in store.Installation) bool { return in.ServerID != serverID }), err
}

// valuesOf lists, per Installation of ins, which of keys it has a value
// of.
func (g *Gateway) valuesOf(ctx context.Context, ins []store.Installation, keys []string) ([]api.Cleared, error) {
	out := []api.Cleared{}
	for _, in := range ins {
		vs, err := g.store.MCP.InstallationValues(ctx, in.ID)
		if err != nil {
			return nil, err
		}
		c := api.Cleared{Installation: in.ID}
		for _, k := range keys {
			if _, ok := vs[k]; ok {
				c.Keys = append(c.Keys, k)
			}
		}
		if len(c.Keys) > 0 {
			out = append(out, c)
		}
	}
	return out, nil
}

// Servers lists every MCP server.
func (g *Gateway) Servers(ctx context.Context) ([]api.MCPServer, error) {
	rows, err := g.store.MCP.MCPServers(ctx)
	out := make([]api.MCPServer, 0, len(rows))
	for _, r := range rows {
		out = append(out, apiServer(r))
	}
	return out, err
}

// checkServer returns m as a store row, or an ErrInvalid error naming
// what is wrong with it.
func checkServer(m api.MCPServer) (store.MCPServer, error) {
	bad := func(format string, a ...any) (store.MCPServer, error) {
		return store.MCPServer{}, fmt.Errorf(format+": %w", append(a, errdefs.ErrInvalid)...)
	}
	if err := checkName(m.Name); err != nil {
		return store.MCPServer{}, err
	}
	if err := checkURL(m.URL); err != nil {
		return store.MCPServer{}, fmt.Errorf("the MCP server's URL: %w", err)
	}
	switch {
	case m.Auth == AuthNone && len(m.Headers) > 0:
		return bad("an MCP server with auth none declares no header secrets")
	case m.Auth == AuthHeaders && len(m.Headers) == 0:
		return bad("an MCP server with auth headers declares at least one header secret")
	case m.Auth == AuthOAuth && len(m.Headers) > 0:
		return bad("an MCP server behind OAuth declares no header secrets")
	case m.Auth != AuthNone && m.Auth != AuthHeaders && m.Auth != AuthOAuth:
		return bad("an MCP server's auth is none, headers or oauth, not %q", m.Auth)
	}
	row := store.MCPServer{ID: m.ID, Name: m.Name, URL: m.URL, Auth: m.Auth}
	for _, h := range m.Headers {
		switch {
		case !keyRE().MatchString(h.Key):
			return bad("a header secret's key is lowercase letters, digits, - and _, not %q", h.Key)
		case !headerRE().MatchString(h.Header):
			return bad("%q is not a header name", h.Header)
		case slices.ContainsFunc(reservedHeaders, func(r string) bool { return strings.EqualFold(r, h.Header) }),
			strings.HasPrefix(strings.ToLower(h.Header), "x-forwarded-"):
			return bad("header %s is the transport's or the Gateway's own; a header secret can't be it", h.Header)
		case strings.Count(h.Format, valueMark) != 1 || !printable(h.Format):
			return bad("header secret %s's format holds %s once and printable characters, as in \"Bearer {value}\"", h.Key, valueMark)
		case slices.ContainsFunc(row.Headers, func(o store.HeaderSecret) bool { return o.Key == h.Key || strings.EqualFold(o.Header, h.Header) }):
			return bad("header secret %s (%s) repeats a key or a header of another", h.Key, h.Header)
		}
		row.Headers = append(row.Headers, store.HeaderSecret{Key: h.Key, Header: h.Header, Format: h.Format})
	}
	return row, nil
}

func checkName(name string) error {
	if name == "" || len(name) > 100 || !printable(name) {
		return fmt.Errorf("a name is 1 to 100 printable characters: %w", errdefs.ErrInvalid)
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// checkURL takes an https URL, or plain http to localhost or a loopback
// address, which never leaves the Hub's machine: header secrets go there.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%q is not an http(s) URL without credentials or fragment: %w", raw, errdefs.ErrInvalid)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q must be https (plain http only to localhost or a loopback address): %w", raw, errdefs.ErrInvalid)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func apiServer(m store.MCPServer) api.MCPServer {
	out := api.MCPServer{ID: m.ID, Name: m.Name, URL: m.URL, Auth: m.Auth, Headers: []api.HeaderSecret{}}
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, api.HeaderSecret{Key: h.Key, Header: h.Header, Format: h.Format})
	}
	return out
}
