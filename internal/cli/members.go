package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

func login(ctx context.Context, io IO, args []string) error {
	pos, err := Parse(Flags(io, "login"), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return ErrUsage
	}
	machine, _ := os.Hostname()
	if machine == "" {
		machine = "a machine without a hostname"
	}
	err = apiclient.Login(ctx, pos[0], machine, func(code, approveURL string) {
		fmt.Fprintf(io.Stderr, "Open this page in a browser signed in to the Hub, and check that it shows the code %s:\n\n  %s\n\nWaiting for approval...\n", code, approveURL)
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(io.Stderr, "Signed in.")
	return nil
}

func logout(ctx context.Context, io IO, args []string) error {
	if len(args) != 0 {
		return ErrUsage
	}
	if err := apiclient.Logout(ctx); err != nil {
		return err
	}
	fmt.Fprintln(io.Stderr, "Signed out: this machine's CLI token is revoked.")
	return nil
}

func inviteCreate(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "invite")
	hours := fs.Int("hours", 0, "how long the Invite lasts, in hours (default a week, at most 720)")
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
	inv, err := c.Invite(ctx, api.InviteRequest{GitHubLogin: pos[0], ExpiresInHours: *hours})
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Invited %s until %s. Send them this link; it works once, for their GitHub login, and is shown only this once:\n\n  %s\n",
		inv.GitHubLogin, inv.ExpiresAt.Local().Format("2006-01-02 15:04"), inv.URL)
	return nil
}

func inviteList(ctx context.Context, io IO, args []string) error {
	invs, asTable, err := listing(ctx, io, "invite ls", args, (*apiclient.Client).Invites)
	if !asTable {
		return err
	}
	var rows [][]string
	for _, inv := range invs {
		state := "expires " + inv.ExpiresAt.Local().Format("2006-01-02 15:04")
		switch {
		case !inv.UsedAt.IsZero():
			state = "used " + ago(inv.UsedAt)
		case !inv.RevokedAt.IsZero():
			state = "revoked"
		case time.Now().After(inv.ExpiresAt):
			state = "expired"
		}
		rows = append(rows, []string{inv.ID, inv.GitHubLogin, state})
	}
	return table(io, "ID\tLOGIN\tSTATE", rows)
}

func inviteRevoke(ctx context.Context, io IO, args []string) error {
	if len(args) != 1 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	return c.RevokeInvite(ctx, args[0])
}

func memberList(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "member ls")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	ms, err := c.Members(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, ms)
	}
	var rows [][]string
	for _, m := range ms {
		role := "Member"
		switch {
		case m.IsOwner:
			role = "Owner"
		case m.IsDev:
			role = "dev"
		}
		rows = append(rows, []string{m.GitHubLogin, m.Name, role, m.CreatedAt.Local().Format("2006-01-02")})
	}
	return table(io, "LOGIN\tNAME\tROLE\tSINCE", rows)
}

func memberRemove(ctx context.Context, io IO, args []string) error {
	if len(args) != 1 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	ms, err := c.Members(ctx)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if strings.EqualFold(m.GitHubLogin, strings.TrimPrefix(args[0], "@")) {
			if err := c.RemoveMember(ctx, m.ID); err != nil {
				return err
			}
			fmt.Fprintf(io.Stderr, "Removed %s: signed out everywhere.\n", m.GitHubLogin)
			return nil
		}
	}
	return fmt.Errorf("no Member with GitHub login %q (kndl member ls lists them)", args[0])
}
