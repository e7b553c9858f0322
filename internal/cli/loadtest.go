package cli

import (
	"context"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/loadtest"
)

// loadtestCommand is kndl loadtest: internal/loadtest against the Hub this
// machine is signed in to, with its Owner's token.
func loadtestCommand(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "loadtest")
	var o loadtest.Options
	fs.IntVar(&o.Runners, "runners", 2, "simulated Runners, paired with your token")
	fs.IntVar(&o.Sessions, "sessions", 50, "Sessions, spread over the Runners")
	fs.IntVar(&o.Watchers, "watchers", 2, "watchers of each Session's view")
	fs.Float64Var(&o.PromptsPerMinute, "prompts-per-minute", 2, "prompts a minute to each awake Session")
	fs.DurationVar(&o.Duration, "duration", time.Minute, "how long prompts go, once every Session started")
	fs.Float64Var(&o.AwakeFraction, "awake-fraction", 0.1, "the fraction of Sessions awake at a time; prompts wake the others")
	fs.IntVar(&o.Burst, "burst", 0, "start the Sessions N a minute (0: as fast as the Hub answers)")
	fs.IntVar(&o.PromptBytes, "prompt-bytes", 200, "each prompt's size")
	fs.StringVar(&o.Repo, "repo", "https://github.com/kndl-loadtest/simulated.git", "the Repo the Sessions are on (nothing is cloned); on kndl dev, a local git repository")
	fs.BoolVar(&o.AllowRemote, "allow-remote", false, "load a Hub that is not on this machine's loopback")
	fs.IntVar(&o.HubPID, "hub-pid", 0, "the Hub's process, for its CPU and memory (default: the one listening on its port)")
	storeFile := fs.String("store-file", "", "the Hub's SQLite store, for its size per Session")
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
	o.HubURL, o.Token, o.Progress = c.BaseURL, c.Token, io.Stdout
	if *storeFile != "" {
		o.StoreSize = func(context.Context) (int64, error) { return loadtest.SQLiteSize(*storeFile) }
	}
	rep, err := loadtest.Run(ctx, o)
	if err != nil {
		return err
	}
	rep.Write(io.Stdout)
	if len(rep.Errors) > 0 {
		return fmt.Errorf("%d errors: the Hub lost, repeated or changed something (listed above)", len(rep.Errors))
	}
	return nil
}
