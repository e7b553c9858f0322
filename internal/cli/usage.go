package cli

import (
	"context"
	"fmt"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

// usageCommand is kndl usage: the Usage page's figures, by day, Member and
// Repo, the estimated cost per day drawn as bars, and each spend cap's use
// today.
func usageCommand(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "usage")
	days := fs.Int("days", 30, fmt.Sprintf("how many days back, today included (1 to %d)", api.MaxUsageDays))
	all := fs.Bool("all", false, "everyone's Sessions, by Member and Repo (the Owner's alone)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	rep, err := c.Usage(ctx, *days, *all)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, rep)
	}
	whose := "Your"
	if rep.All {
		whose = "Everyone's"
	}
	fmt.Fprintf(io.Stdout, "%s Sessions since %s (UTC), as the relays counted each model reply; the cost is an estimate by the Hub's price table.\n\n",
		whose, rep.Since.Format("2006-01-02"))
	fmt.Fprint(io.Stdout, dayBars(rep.PerDay))
	if len(rep.Caps) > 0 {
		fmt.Fprintln(io.Stdout, "\nSpend caps:")
		for _, c := range rep.Caps {
			fmt.Fprintln(io.Stdout, "  "+c.Line())
		}
	}
	fmt.Fprintln(io.Stdout)
	var rows [][]string
	for _, d := range rep.Days {
		rows = append(rows, []string{d.Day, d.Member, d.RepoName, api.Count(d.Input), api.Count(d.Output), api.Count(d.CacheRead), api.Count(d.CacheWrite), d.Estimate()})
	}
	if err := table(io, "DAY\tMEMBER\tREPO\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCOST (ESTIMATE)", rows); err != nil {
		return err
	}
	fmt.Fprintln(io.Stdout, "\nIn all: "+rep.Total.Summary())
	return nil
}

// dayBars draws the cost per day as a line a day, its bar as long as its
// share of the most spent in a day.
func dayBars(days []api.DayCost) string {
	const width = 40
	most := 0.0
	for _, d := range days {
		most = max(most, d.EstimatedUSD)
	}
	var b strings.Builder
	for _, d := range days {
		n := 0
		if most > 0 {
			n = int(width*d.EstimatedUSD/most + 0.5)
		}
		fmt.Fprintf(&b, "%s  %9s  %s\n", d.Day, fmt.Sprintf("$%.2f", d.EstimatedUSD), strings.Repeat("#", n))
	}
	return b.String()
}
