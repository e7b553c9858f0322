package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

// varScope reads --repo or --shared and returns the API path of that
// Environment's Variables.
func varScope(ctx context.Context, c *apiclient.Client, repo string, shared bool, kind string) (string, error) {
	switch {
	case shared && repo != "":
		return "", fmt.Errorf("give --repo URL or --shared, not both")
	case shared:
		return "/api/variables", nil
	case repo == "":
		return "", ErrUsage
	}
	r, err := repoOf(ctx, c, repo)
	if err != nil {
		return "", err
	}
	return "/api/repos/" + url.PathEscape(r.ID) + "/" + kind, nil
}

// repoOf returns the Hub's Repo for a URL or a local path, recording it if
// the Hub has not seen it yet.
func repoOf(ctx context.Context, c *apiclient.Client, repo string) (api.Repo, error) {
	if st, err := os.Stat(repo); err == nil && st.IsDir() {
		repo, _ = filepath.Abs(repo)
	}
	var r api.Repo
	err := c.Do(ctx, http.MethodPost, "/api/repos", map[string]string{"url": repo}, &r)
	return r, err
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
	path, err := varScope(ctx, c, *repo, *shared, "variables")
	if err != nil {
		return err
	}
	req := api.VariableRequest{Value: strings.TrimSuffix(string(value), "\n"), Sensitive: *sensitive, AtBuild: *atBuild}
	if err := c.Do(ctx, http.MethodPut, path+"/"+url.PathEscape(pos[0]), req, &api.Variable{}); err != nil {
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
	path, err := varScope(ctx, c, *repo, *shared, "variables")
	if err != nil {
		return err
	}
	var vars []api.Variable
	if *shared {
		err = c.Do(ctx, http.MethodGet, path, nil, &vars)
	} else {
		var rv api.RepoVariables
		if err = c.Do(ctx, http.MethodGet, path, nil, &rv); err == nil && *asJSON {
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
		rows = append(rows, []string{name, oneLine(value, 40), fmt.Sprint(v.AtBuild), ago(v.SetAt)})
	}
	return table(io, "NAME\tVALUE\tAT BUILD\tSET", rows)
}

// varChange runs one of rm, link and unlink.
func varChange(name, method, kind, done string) func(context.Context, IO, []string) error {
	return func(ctx context.Context, io IO, args []string) error {
		fs := Flags(io, name)
		repo := fs.String("repo", "", "the Repo (its URL or path)")
		shared := fs.Bool("shared", false, "a Shared variable")
		if kind == "links" {
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
		path, err := varScope(ctx, c, *repo, *shared, kind)
		if err != nil {
			return err
		}
		if err := c.Do(ctx, method, path+"/"+url.PathEscape(pos[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(io.Stdout, "%s %s.\n", done, pos[0])
		return nil
	}
}
