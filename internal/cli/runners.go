package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

func runnerList(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "runner ls")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rs []api.RunnerStatus
	if err := call(ctx, http.MethodGet, "/api/runners", nil, &rs); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, rs)
	}
	var rows [][]string
	for _, r := range rs {
		state, backend := "offline", ""
		if r.Connected {
			state, backend = "connected", r.Host.Backend
		}
		rows = append(rows, []string{r.Name, state, backend, ago(r.LastSeenAt)})
	}
	return table(io, "NAME\tSTATE\tBACKEND\tLAST SEEN", rows)
}

func runnerRevoke(ctx context.Context, io IO, args []string) error {
	if len(args) != 1 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	var rs []api.RunnerStatus
	if err := c.Do(ctx, http.MethodGet, "/api/runners", nil, &rs); err != nil {
		return err
	}
	for _, r := range rs {
		if r.Name == args[0] {
			if err := c.Do(ctx, http.MethodDelete, "/api/runners/"+url.PathEscape(r.ID), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(io.Stdout, "Revoked Runner %s; it is disconnected.\n", r.Name)
			return nil
		}
	}
	return fmt.Errorf("no paired Runner named %q (kndl runner ls lists them)", args[0])
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}
