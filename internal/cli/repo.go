package cli

import (
	"context"
	"flag"
	"fmt"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

// repoEditFlags are kndl repo edit's settings: each changes only if given.
type repoEditFlags struct {
	ci, reviews *bool
	most        *int
	change      api.AutoFixChange
}

func (f *repoEditFlags) define(fs *flag.FlagSet) func() error {
	f.ci = fs.Bool("auto-fix-ci", false, "send a check that fails on a pull request a Session opened back to the Session (--auto-fix-ci=false: stop)")
	f.reviews = fs.Bool("auto-fix-reviews", false, "send a review requesting changes on such a pull request back too (--auto-fix-reviews=false: stop)")
	f.most = fs.Int("auto-fix-max", 0, fmt.Sprintf("send back at most this many per pull request (1 to %d)", api.MaxAutoFixes))
	return func() error {
		fs.Visit(func(fl *flag.Flag) {
			switch fl.Name {
			case "auto-fix-ci":
				f.change.CI = f.ci
			case "auto-fix-reviews":
				f.change.Reviews = f.reviews
			case "auto-fix-max":
				f.change.Max = f.most
			}
		})
		return nil
	}
}

func (f *repoEditFlags) run(ctx context.Context, io IO, c *apiclient.Client, repo string, asJSON bool) error {
	var a api.AutoFix
	var err error
	if f.change == (api.AutoFixChange{}) {
		a, err = c.AutoFix(ctx, repo)
	} else {
		a, err = c.EditAutoFix(ctx, repo, f.change)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(io, a)
	}
	fmt.Fprintf(io.Stdout, "Sent back to the Session that opened the pull request, at most %d times per pull request:\n  failing checks:             %s\n  reviews requesting changes: %s\n",
		a.Max, onOff(a.CI), onOff(a.Reviews))
	return nil
}

func repoEditCommand() func(context.Context, IO, []string) error {
	f := &repoEditFlags{}
	return envCommand("repo edit", f.define, f.run)
}
