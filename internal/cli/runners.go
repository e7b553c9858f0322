package cli

import (
	"context"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

func runnerList(ctx context.Context, io IO, args []string) error {
	rs, asTable, err := listing(ctx, io, "runner ls", args, (*apiclient.Client).Runners)
	if !asTable {
		return err
	}
	var rows [][]string
	for _, r := range rs {
		state, backend := "offline", ""
		if r.Connected {
			state, backend = "connected", r.Host.Backend
		}
		rows = append(rows, []string{r.Name, whose(r), whoUses(r), state, backend, r.LoadText(), ago(r.LastSeenAt)})
	}
	return table(io, "NAME\tOWNER\tUSED BY\tSTATE\tBACKEND\tLOAD\tLAST SEEN", rows)
}

// whose names the Member a Runner belongs to.
func whose(r api.RunnerStatus) string {
	if r.Owner == "" {
		return "(the Hub's)"
	}
	return r.Owner
}

// whoUses says whose Sessions may run on a Runner, and whether yours may.
func whoUses(r api.RunnerStatus) string {
	who := "nobody"
	switch {
	case r.Shared:
		who = "shared"
	case r.Owner != "":
		who = r.Owner + " only"
	}
	if r.Usable {
		who += " (you may)"
	}
	return who
}

func runnerRevoke(ctx context.Context, io IO, args []string) error {
	if len(args) != 1 {
		return ErrUsage
	}
	return withRunner(ctx, args[0], func(c *apiclient.Client, r api.RunnerStatus) error {
		if err := c.RevokeRunner(ctx, r.ID); err != nil {
			return err
		}
		fmt.Fprintf(io.Stdout, "Revoked Runner %s; it is disconnected.\n", r.Name)
		return nil
	})
}

// runnerShare is kndl runner share (shared) and kndl runner unshare.
func runnerShare(shared bool) func(ctx context.Context, io IO, args []string) error {
	return func(ctx context.Context, io IO, args []string) error {
		if len(args) != 1 {
			return ErrUsage
		}
		return withRunner(ctx, args[0], func(c *apiclient.Client, r api.RunnerStatus) error {
			if err := c.ShareRunner(ctx, r.ID, shared); err != nil {
				return err
			}
			if shared {
				fmt.Fprintf(io.Stdout, "Shared Runner %s: every Member's Sessions may run on it.\n", r.Name)
			} else {
				fmt.Fprintf(io.Stdout, "Runner %s is %s's alone again; the others' Sessions there are asleep and can't wake on it.\n", r.Name, whose(r))
			}
			return nil
		})
	}
}

// withRunner calls fn with the paired Runner named name.
func withRunner(ctx context.Context, name string, fn func(*apiclient.Client, api.RunnerStatus) error) error {
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	rs, err := c.Runners(ctx)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Name == name {
			return fn(c, r)
		}
	}
	return fmt.Errorf("no paired Runner named %q (kndl runner ls lists them)", name)
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}
