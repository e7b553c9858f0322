package cli

import (
	"context"
	"fmt"
	"strconv"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

// attemptsNew starts an attempt set (kndl new --attempts N).
func attemptsNew(ctx context.Context, io IO, c *apiclient.Client, req api.NewAttempts, asJSON bool) error {
	set, err := c.NewAttempts(ctx, req)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(io, set)
	}
	fmt.Fprintf(io.Stdout, "Attempt set %s: %d Sessions are starting on %s.\n", set.ID, len(set.Attempts), req.Repo)
	for _, a := range set.Attempts {
		fmt.Fprintf(io.Stdout, "  %d. %s\n", a.Place, a.Session.ID)
	}
	if set.Check == "" {
		fmt.Fprintf(io.Stdout, "The Environment names no check, so they rank by diff and cost alone (kndl env edit --check 'make test').\n")
	}
	fmt.Fprintf(io.Stdout, "See them ranked with: kndl attempts %s\n", set.ID)
	return nil
}

// attemptsShow shows an attempt set, its attempts ranked best first.
func attemptsShow(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "attempts")
	keep := fs.String("keep", "", "keep this attempt (a Session id of the set); open its pull request from its view")
	others := fs.String("others", "", "with --keep, what becomes of the other attempts: sleep or archive")
	asJSON := fs.Bool("json", false, "print JSON")
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
	var set api.AttemptSet
	if *keep != "" {
		set, err = c.KeepAttempt(ctx, pos[0], api.KeepAttempt{SessionID: *keep, Others: *others})
	} else {
		set, err = c.Attempts(ctx, pos[0])
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, set)
	}
	fmt.Fprintf(io.Stdout, "Attempt set %s: %s\nCheck: %s\n", set.ID, set.Title, or(set.Check, "none"))
	var rows [][]string
	for i, a := range set.Attempts {
		rows = append(rows, []string{strconv.Itoa(i + 1), strconv.Itoa(a.Place), a.Session.ID, string(a.Session.State), a.Check.Line(), diffText(a), costText(a.Session.Spent)})
	}
	if err := table(io, "RANK\tATTEMPT\tSESSION\tSTATE\tCHECK\tDIFF\tCOST (EST.)", rows); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Spent in all: %s.\n", set.Spent.Estimate())
	fmt.Fprintf(io.Stdout, "Each attempt's transcript: kndl show SESSION; its changes: kndl diff SESSION.\n")
	return nil
}

func diffText(a api.Attempt) string {
	if a.DiffLines < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d lines in %d files", a.DiffLines, a.DiffFiles)
}

func costText(s *api.Spent) string {
	if s == nil {
		return "$0.00"
	}
	return fmt.Sprintf("$%.2f", s.EstimatedUSD)
}
