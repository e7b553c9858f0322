package cli

import (
	"context"
	"fmt"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

// The kndl mcp commands: MCP servers behind the Hub's Gateway and their
// Installations (ADR 0020).

// headerFlags are --header KEY:HEADER:FORMAT, once per header secret.
type headerFlags []api.HeaderSecret

func (h *headerFlags) String() string { return fmt.Sprint(*h) }
func (h *headerFlags) Set(v string) error {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 {
		return fmt.Errorf("--header %q: want KEY:HEADER:FORMAT, as in api-key:Authorization:Bearer {value}", v)
	}
	*h = append(*h, api.HeaderSecret{Key: parts[0], Header: parts[1], Format: parts[2]})
	return nil
}

// serverFlags reads an MCP server's definition from the flags.
func serverFlags(io IO, name string, args []string) (api.MCPServer, bool, error) {
	fs := Flags(io, name)
	display := fs.String("name", "", "its display name")
	u := fs.String("url", "", "its streamable HTTP endpoint (https, or http to loopback)")
	yes := fs.Bool("yes", false, "save an edit even though it clears Installations' values")
	oauth := fs.Bool("oauth", false, "behind OAuth: each Installation is connected to an account (kndl mcp connect)")
	var headers headerFlags
	fs.Var(&headers, "header", "a header secret, KEY:HEADER:FORMAT with {value} in FORMAT (again for each)")
	pos, err := Parse(fs, args)
	if err != nil {
		return api.MCPServer{}, false, err
	}
	if len(pos) != 1 || *display == "" || *u == "" {
		return api.MCPServer{}, false, ErrUsage
	}
	m := api.MCPServer{ID: pos[0], Name: *display, URL: *u, Auth: "none", Headers: headers}
	switch {
	case *oauth:
		m.Auth = "oauth"
	case len(headers) > 0:
		m.Auth = "headers"
	}
	return m, *yes, nil
}

func mcpServerAdd(ctx context.Context, io IO, args []string) error {
	m, _, err := serverFlags(io, "mcp server add", args)
	if err != nil {
		return err
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	if m, err = c.AddMCPServer(ctx, m); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Added MCP server %s. It does nothing until it has an Installation: kndl mcp install.\n", m.ID)
	return nil
}

// mcpServerEdit says first whose values the edit clears, and saves such
// an edit only with --yes.
func mcpServerEdit(ctx context.Context, io IO, args []string) error {
	m, yes, err := serverFlags(io, "mcp server edit", args)
	if err != nil {
		return err
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	out, err := c.EditMCPServer(ctx, m, true)
	if err != nil {
		return err
	}
	for _, cl := range out.Clears {
		fmt.Fprintf(io.Stdout, "This edit clears Installation %s's values of %s.\n", cl.Installation, strings.Join(cl.Keys, ", "))
	}
	if len(out.Clears) > 0 && !yes {
		return fmt.Errorf("not saved: run it again with --yes to clear those values")
	}
	if _, err := c.EditMCPServer(ctx, m, false); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Saved MCP server %s. Sessions take it at their next start or wake.\n", m.ID)
	return nil
}

func mcpServerList(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "mcp server ls")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := Parse(fs, args); err != nil {
		return err
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	out, err := c.MCPServers(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, out)
	}
	var rows [][]string
	for _, m := range out {
		var hs []string
		for _, h := range m.Headers {
			hs = append(hs, h.Key+" ("+h.Header+")")
		}
		rows = append(rows, []string{m.ID, m.Name, m.URL, m.Auth, strings.Join(hs, ", ")})
	}
	return table(io, "ID\tNAME\tURL\tAUTH\tHEADER SECRETS", rows)
}

// clientFor makes this machine's client to the Hub and resolves each repo
// (a URL or a local path) to its Repo's id there.
func clientFor(ctx context.Context, repos ...string) (*apiclient.Client, []string, error) {
	c, err := apiclient.New()
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	for _, r := range repos {
		repo, err := repoOf(ctx, c, r)
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, repo.ID)
	}
	return c, ids, nil
}

func mcpInstall(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "mcp install")
	server := fs.String("server", "", "the MCP server's id, hub:<slug>")
	name := fs.String("name", "", "its display name, such as Linear Work")
	global := fs.Bool("global", false, "on in every Repo (Owner only)")
	var repos stringList
	fs.Var(&repos, "repo", "a Repo it is on in, its URL or path (again for each)")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *server == "" || *name == "" || *global == (len(repos) > 0) {
		return ErrUsage
	}
	c, ids, err := clientFor(ctx, repos...)
	if err != nil {
		return err
	}
	out, err := c.Install(ctx, api.InstallationRequest{ID: pos[0], Server: *server, Name: *name, Global: *global, Repos: ids})
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Installed %s as %s.\n", *server, out.ID)
	for _, s := range out.Secrets {
		if s.NeedsOne {
			fmt.Fprintf(io.Stdout, "It needs a value of %s before a Session can start: kndl mcp secret set %s %s\n", s.Key, out.ID, s.Key)
		}
	}
	return nil
}

func mcpInstallRepos(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "mcp install repos")
	var repos stringList
	fs.Var(&repos, "repo", "a Repo it is on in, its URL or path (again for each)")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || len(repos) == 0 {
		return ErrUsage
	}
	c, ids, err := clientFor(ctx, repos...)
	if err != nil {
		return err
	}
	if _, err := c.SetInstallationRepos(ctx, pos[0], ids); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Installation %s is on in %d Repos.\n", pos[0], len(ids))
	return nil
}

// mcpSecretSet sets a header secret's value, read from stdin.
func mcpSecretSet(ctx context.Context, io IO, args []string) error {
	pos, err := Parse(Flags(io, "mcp secret set"), args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return ErrUsage
	}
	value, err := readValue(io, pos[1])
	if err != nil {
		return err
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	if _, err := c.SetInstallationSecret(ctx, pos[0], pos[1], strings.TrimSuffix(string(value), "\n")); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Set %s of %s. Sessions get it from their next start or wake.\n", pos[1], pos[0])
	return nil
}

// mcpTurn turns an Installation off for a Repo, or back on.
func mcpTurn(off bool) func(ctx context.Context, io IO, args []string) error {
	name, done := "mcp on", "on"
	if off {
		name, done = "mcp off", "off"
	}
	return func(ctx context.Context, io IO, args []string) error {
		fs := Flags(io, name)
		repo := fs.String("repo", "", "the Repo (its URL or path)")
		pos, err := Parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 || *repo == "" {
			return ErrUsage
		}
		c, ids, err := clientFor(ctx, *repo)
		if err != nil {
			return err
		}
		out, err := c.TurnInstallation(ctx, ids[0], pos[0], off)
		if err != nil {
			return err
		}
		fmt.Fprintf(io.Stdout, "Turned %s %s for %s. Sessions take it at their next start or wake.\n", pos[0], done, *repo)
		if out.On != nil && !out.On.On && !off {
			fmt.Fprintf(io.Stdout, "It is still off there: %s.\n", out.On.Why)
		}
		return nil
	}
}

func mcpList(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "mcp ls")
	repo := fs.String("repo", "", "say whether each is on in this Repo (its URL or path)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := Parse(fs, args); err != nil {
		return err
	}
	var repos []string
	if *repo != "" {
		repos = append(repos, *repo)
	}
	c, ids, err := clientFor(ctx, repos...)
	if err != nil {
		return err
	}
	var repoID string // "": say of no Repo whether each is on there
	if len(ids) > 0 {
		repoID = ids[0]
	}
	out, err := c.Installations(ctx, repoID)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, out)
	}
	var rows [][]string
	for _, in := range out {
		where := "global"
		if !in.Global {
			where = fmt.Sprintf("%d Repos", len(in.Repos)+in.HiddenRepos)
		}
		var secrets []string
		for _, s := range in.Secrets {
			if s.NeedsOne {
				secrets = append(secrets, s.Key+": needs a value")
			} else {
				secrets = append(secrets, fmt.Sprintf("%s: set by %s %s", s.Key, s.SetBy, s.SetAt.Format("2006-01-02")))
			}
		}
		if o := in.OAuth; o != nil && o.Connected {
			secrets = append(secrets, fmt.Sprintf("connected by %s %s", o.ConnectedBy, o.ConnectedAt.Format("2006-01-02")))
		} else if o != nil {
			secrets = append(secrets, "not connected: kndl mcp connect "+in.ID)
		}
		on := ""
		if in.On != nil {
			on = "on"
			if !in.On.On {
				on = "off: " + in.On.Why
			}
		}
		rows = append(rows, []string{in.ID, in.Server, in.Name, where, strings.Join(secrets, "; "), on})
	}
	return table(io, "ID\tSERVER\tNAME\tWHERE\tCREDENTIALS\tHERE", rows)
}

func mcpLog(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "mcp log")
	repo := fs.String("repo", "", "the Repo (its URL or path)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := Parse(fs, args); err != nil {
		return err
	}
	if *repo == "" {
		return ErrUsage
	}
	c, ids, err := clientFor(ctx, *repo)
	if err != nil {
		return err
	}
	out, err := c.InstallationLog(ctx, ids[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, out)
	}
	var rows [][]string
	for _, ch := range out {
		rows = append(rows, []string{ch.At.Format("2006-01-02 15:04"), ch.Installation, ch.Who, ch.What})
	}
	return table(io, "WHEN\tINSTALLATION\tWHO\tWHAT", rows)
}

// mcpConnect begins connecting an OAuth Installation to an account: the
// URL it prints is opened in the browser signed in to the Hub as the same
// person.
func mcpConnect(ctx context.Context, io IO, args []string) error {
	pos, c, err := ParseFor(Flags(io, "mcp connect"), args, 1)
	if err != nil {
		return err
	}
	out, err := c.ConnectInstallation(ctx, pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Open this in the browser where you are signed in to the Hub, within ten minutes, and sign in to the account %s acts as:\n%s\n", pos[0], out.URL)
	return nil
}

func mcpDisconnect(ctx context.Context, io IO, args []string) error {
	pos, c, err := ParseFor(Flags(io, "mcp disconnect"), args, 1)
	if err != nil {
		return err
	}
	if err := c.DisconnectInstallation(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Disconnected %s: its running Sessions' next calls to it are refused.\n", pos[0])
	return nil
}

// mcpClientSet enters the OAuth client an authorization server without
// Dynamic Client Registration gave; its secret is read from stdin.
func mcpClientSet(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "mcp client set")
	clientID := fs.String("client-id", "", "the client id the authorization server gave")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *clientID == "" {
		return ErrUsage
	}
	secret, err := readValue(io, "the client secret")
	if err != nil {
		return err
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	out, err := c.SetInstallationClient(ctx, pos[0], api.OAuthClient{ClientID: *clientID, ClientSecret: strings.TrimSuffix(string(secret), "\n")})
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Entered client %s for %s, bound to authorization server %s. Connect it now: kndl mcp connect %s\n", *clientID, pos[0], out.Issuer, pos[0])
	return nil
}
