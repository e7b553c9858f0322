package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

func repoEditCommand() func(context.Context, IO, []string) error {
	f := &repoEditFlags{}
	return envCommand("repo edit", f.define, f.run)
}

// repoEditFlags are kndl repo edit's: the limits to set, each only if
// given.
type repoEditFlags struct {
	change api.RepoLimitsChange
}

func (f *repoEditFlags) define(fs *flag.FlagSet) func() error {
	turns := fs.Int("max-turns", 0, "at most this many Turns for a Session started from GitHub (0: no limit)")
	hours := fs.Float64("max-turn-hours", 0, "at most this many hours of Turn time for a Session started from GitHub (0: no limit)")
	return func() error {
		fs.Visit(func(fl *flag.Flag) {
			switch fl.Name {
			case "max-turns":
				f.change.MaxTurns = turns
			case "max-turn-hours":
				f.change.MaxTurnHours = hours
			}
		})
		return nil
	}
}

// run sets the limits given, or with none shows them.
func (f *repoEditFlags) run(ctx context.Context, io IO, c *apiclient.Client, repo string, asJSON bool) error {
	var l api.RepoLimits
	var err error
	if f.change == (api.RepoLimitsChange{}) {
		l, err = c.RepoLimits(ctx, repo)
	} else {
		l, err = c.ChangeRepoLimits(ctx, repo, f.change)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(io, l)
	}
	fmt.Fprintf(io.Stdout, "A Session started from GitHub on this Repo runs %s and %s; past either it sleeps, saying so.\n",
		limitText(float64(l.MaxTurns), "Turns", "any number of Turns"), limitText(l.MaxTurnHours, "hours of Turn time", "Turns of any length"))
	return nil
}

// limitText is a limit as a person reads it; none is what 0 says.
func limitText(n float64, unit, none string) string {
	if n == 0 {
		return none
	}
	return "at most " + strconv.FormatFloat(n, 'f', -1, 64) + " " + unit
}
