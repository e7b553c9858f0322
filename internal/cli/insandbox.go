package cli

import (
	"context"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/mod"
)

// These commands run inside a Sandbox, from /opt/kndl/bin/kndl.

func modHook(ctx context.Context, io IO, args []string) error {
	if len(args) != 0 {
		return ErrUsage
	}
	return mod.Hook(ctx, io.Getenv, io.Stdin, io.Stdout, io.Stderr)
}

func claudeSeed(ctx context.Context, io IO, args []string) error {
	if len(args) != 2 {
		return ErrUsage
	}
	return claude.Seed(args[0], args[1])
}
