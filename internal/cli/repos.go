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

// repoEditFlags are kndl repo edit's: the limits, the auto-fix settings
// and the trigger label to set, each only if given.
type repoEditFlags struct {
	limits  api.RepoLimitsChange
	autoFix api.AutoFixChange
	label   *string
}

func (f *repoEditFlags) define(fs *flag.FlagSet) func() error {
	turns := fs.Int("max-turns", 0, "at most this many Turns for a Session started from GitHub (0: no limit)")
	hours := fs.Float64("max-turn-hours", 0, "at most this many hours awake, from its first prompt, for a Session started from GitHub (0: no limit)")
	spend := fs.Float64("max-spend", 0, "at most this many US dollars a day (UTC) for all the Repo's Sessions, as the price table estimates (0: no cap)")
	sessionSpend := fs.Float64("max-session-spend", 0, "at most this many US dollars for one of the Repo's Sessions (0: no cap)")
	ci := fs.Bool("auto-fix-ci", false, "send a check that fails on a pull request a Session opened back to the Session (--auto-fix-ci=false: stop)")
	reviews := fs.Bool("auto-fix-reviews", false, "send a review requesting changes on such a pull request back too (--auto-fix-reviews=false: stop)")
	most := fs.Int("auto-fix-max", 0, fmt.Sprintf("send back at most this many per pull request (1 to %d)", api.MaxAutoFixes))
	attempts := fs.Bool("github-attempts", false, "let a mention of the App with attempts=N (2 to 8) start an attempt set of N Sessions (--github-attempts=false: stop)")
	label := fs.String("trigger-label", "", `the label that, added to one of the Repo's issues, starts a Session from it ("": none)`)
	return func() error {
		fs.Visit(func(fl *flag.Flag) {
			switch fl.Name {
			case "max-turns":
				f.limits.MaxTurns = turns
			case "max-turn-hours":
				f.limits.MaxTurnHours = hours
			case "max-spend":
				f.limits.MaxSpend = spend
			case "max-session-spend":
				f.limits.MaxSessionSpend = sessionSpend
			case "github-attempts":
				f.limits.GitHubAttempts = attempts
			case "auto-fix-ci":
				f.autoFix.CI = ci
			case "auto-fix-reviews":
				f.autoFix.Reviews = reviews
			case "auto-fix-max":
				f.autoFix.Max = most
			case "trigger-label":
				f.label = label
			}
		})
		return nil
	}
}

// repoSettings is what kndl repo edit --json prints: the limits' fields,
// the auto-fix settings and the trigger label.
type repoSettings struct {
	api.RepoLimits
	AutoFix      api.AutoFix `json:"auto_fix"`
	TriggerLabel string      `json:"trigger_label"`
}

// run sets the settings given and shows them all.
func (f *repoEditFlags) run(ctx context.Context, io IO, c *apiclient.Client, repo string, asJSON bool) error {
	var s repoSettings
	var err error
	if f.limits == (api.RepoLimitsChange{}) {
		s.RepoLimits, err = c.RepoLimits(ctx, repo)
	} else {
		s.RepoLimits, err = c.ChangeRepoLimits(ctx, repo, f.limits)
	}
	if err != nil {
		return err
	}
	if f.autoFix == (api.AutoFixChange{}) {
		s.AutoFix, err = c.AutoFix(ctx, repo)
	} else {
		s.AutoFix, err = c.EditAutoFix(ctx, repo, f.autoFix)
	}
	if err != nil {
		return err
	}
	if f.label == nil {
		s.TriggerLabel, err = c.TriggerLabel(ctx, repo)
	} else {
		s.TriggerLabel, err = c.SetTriggerLabel(ctx, repo, *f.label)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(io, s)
	}
	l, a := s.RepoLimits, s.AutoFix
	fmt.Fprintf(io.Stdout, "A Session started from GitHub on this Repo runs %s and %s; past either it sleeps, saying so.\n",
		limitText(float64(l.MaxTurns), "Turns", "any number of Turns"), limitText(l.MaxTurnHours, "hours awake", "any hours awake"))
	fmt.Fprintf(io.Stdout, "Its Sessions spend %s a day in all, and %s each; past either the relay refuses their model calls and they sleep, saying so.\n",
		limitText(l.MaxSpend, "US dollars", "any amount"), limitText(l.MaxSessionSpend, "US dollars", "any amount"))
	if l.GitHubAttempts {
		fmt.Fprintln(io.Stdout, "A mention of the App with attempts=N (2 to 8) starts an attempt set of N Sessions, each held to these limits.")
	} else {
		fmt.Fprintln(io.Stdout, "A mention of the App with attempts=N starts nothing: attempt sets from GitHub are off (--github-attempts turns them on).")
	}
	fmt.Fprintf(io.Stdout, "Sent back to the Session that opened the pull request, at most %d times per pull request:\n  failing checks:             %s\n  reviews requesting changes: %s\n",
		a.Max, onOff(a.CI), onOff(a.Reviews))
	if s.TriggerLabel == "" {
		fmt.Fprintln(io.Stdout, "No trigger label: a mention of the App starts a Session from an issue, a label does not.")
	} else {
		fmt.Fprintf(io.Stdout, "The trigger label %q added to an issue starts a Session from it, as a mention of the App does.\n", s.TriggerLabel)
	}
	return nil
}

// limitText is a limit as a person reads it; none is what 0 says.
func limitText(n float64, unit, none string) string {
	if n == 0 {
		return none
	}
	return "at most " + strconv.FormatFloat(n, 'f', -1, 64) + " " + unit
}
