package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/runner"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
)

// newBackend makes the Runner's sandbox backend and says in the log what
// this host can and cannot enforce.
func newBackend(ctx context.Context, cfg runner.Config, log *slog.Logger) (sandbox.Backend, error) {
	b, err := oci.New(ctx, oci.Options{
		StateDir:     filepath.Join(cfg.Home, "sandboxes", "oci"),
		RelayPort:    uint16(cfg.RelayPort),
		MaxCPUs:      cfg.MaxCPUs,
		MaxMemoryMiB: cfg.MaxMemoryMiB,
		InitPath:     cfg.Binary,
		Logger:       log,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox backend: %w", err)
	}
	h := b.Host()
	log.Info("sandbox backend ready", "backend", b.Name(), "enforces", h.Limits, "max_cpus", h.MaxCPUs, "max_memory_mib", h.MaxMemoryMiB, "relay", h.Relay)
	for _, n := range h.Notes {
		log.Warn("sandbox backend: " + n)
	}
	return b, nil
}

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
	r, err := runner.New(cfg, b)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}
