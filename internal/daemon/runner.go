package daemon

import (
	"context"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/runner"
)

func runRunner(ctx context.Context, io cli.IO, args []string) error {
	if _, err := cli.Parse(cli.Flags(io, "runner"), args); err != nil {
		return err
	}
	dir, err := home(io)
	if err != nil {
		return err
	}
	cfg, err := runner.FromEnv(io.Getenv, dir)
	if err != nil {
		return err
	}
	cfg.Logger = logger(io)
	b, err := newBackend(ctx, cfg, cfg.Logger)
	if err != nil {
		return err
	}
	if cfg.Builds, err = newBuildBackend(ctx, cfg, b, cfg.Logger); err != nil {
		return err
	}
	r, err := runner.New(cfg, b)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}
