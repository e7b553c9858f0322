package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

// varRepo reads --repo or --shared: the id of the Repo whose Variables a
// command reads or changes, or "" for the Shared ones.
func varRepo(ctx context.Context, c *apiclient.Client, repo string, shared bool) (string, error) {
	switch {
	case shared && repo != "":
		return "", fmt.Errorf("give --repo URL or --shared, not both")
	case shared:
		return "", nil
	case repo == "":
		return "", ErrUsage
	}
	r, err := repoOf(ctx, c, repo)
	return r.ID, err
}

// repoOf returns the Hub's Repo for a URL or a local path, recording it if
// the Hub has not seen it yet.
func repoOf(ctx context.Context, c *apiclient.Client, repo string) (api.Repo, error) {
	if st, err := os.Stat(repo); err == nil && st.IsDir() {
		repo, _ = filepath.Abs(repo)
	}
	return c.AddRepo(ctx, repo)
}

// readValue reads a secret value from stdin, never from the command line,
// where any process of this machine could read it; without echo from a
// terminal.
func readValue(io IO, name string) ([]byte, error) {
	if f, ok := io.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(io.Stderr, "Value of %s, then Enter: ", name)
		value, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(io.Stderr)
		return value, err
	}
	return readAllLimited(io.Stdin, 1<<20)
}

func varSet(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "var set")
	repo := fs.String("repo", "", "the Repo (its URL or path)")
	shared := fs.Bool("shared", false, "a Shared variable, which Repos link")
	sensitive := fs.Bool("sensitive", false, "Sensitive: write-only, and masked wherever the Hub stores or shows text")
	atBuild := fs.Bool("at-build", false, "the Bootstrap script gets it too")
	loadsCode := fs.Bool("loads-code", false, "mark it as changing how a tool loads code or reaches the network (PIP_INDEX_URL, LD_PRELOAD, a proxy: docs/security.md lists the names); such a name is refused without it")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return ErrUsage
	}
	value, err := readValue(io, pos[0])
	if err != nil {
		return err
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	id, err := varRepo(ctx, c, *repo, *shared)
	if err != nil {
		return err
	}
	req := api.VariableRequest{Value: strings.TrimSuffix(string(value), "\n"), Sensitive: *sensitive, AtBuild: *atBuild, LoadsCode: *loadsCode}
	if _, err := c.SetVariable(ctx, id, pos[0], req); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Set %s. Sessions get it from their next start or wake.\n", pos[0])
	return nil
}

func varList(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "var ls")
	repo := fs.String("repo", "", "the Repo (its URL or path)")
	shared := fs.Bool("shared", false, "the Shared variables")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := Parse(fs, args); err != nil {
		return err
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	id, err := varRepo(ctx, c, *repo, *shared)
	if err != nil {
		return err
	}
	var vars []api.Variable
	if *shared {
		vars, err = c.SharedVariables(ctx)
	} else {
		var rv api.RepoVariables
		if rv, err = c.RepoVariables(ctx, id); err == nil && *asJSON {
			return printJSON(io, rv)
		}
		vars = append(rv.Variables, rv.Links...)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, vars)
	}
	var rows [][]string
	for _, v := range vars {
		value := v.Value
		if v.Sensitive {
			value = "(sensitive)"
		}
		name := v.Name
		if v.Shared {
			name += " (linked)"
		}
		if v.From != "" {
			name += " (from " + v.From + ")"
		}
		loads := ""
		switch {
		case v.LoadsCode:
			loads = "marked"
		case v.LoadsCodeRule != "":
			loads = "unmarked"
		}
		rows = append(rows, []string{name, oneLine(value, 40), fmt.Sprint(v.AtBuild), loads, ago(v.SetAt)})
	}
	return table(io, "NAME\tVALUE\tAT BUILD\tLOADS CODE\tSET", rows)
}

// varChange runs one of rm, link and unlink: change, with the Repo's id
// (or "" for a Shared variable, unless repoOnly) and the Variable's name.
func varChange(name string, change func(c *apiclient.Client, ctx context.Context, repo, name string) error, repoOnly bool, done string) func(context.Context, IO, []string) error {
	return func(ctx context.Context, io IO, args []string) error {
		fs := Flags(io, name)
		repo := fs.String("repo", "", "the Repo (its URL or path)")
		shared := fs.Bool("shared", false, "a Shared variable")
		if repoOnly {
			shared = new(bool)
		}
		pos, err := Parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return ErrUsage
		}
		c, err := apiclient.New()
		if err != nil {
			return err
		}
		id, err := varRepo(ctx, c, *repo, *shared)
		if err != nil {
			return err
		}
		if err := change(c, ctx, id, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(io.Stdout, "%s %s.\n", done, pos[0])
		return nil
	}
}
