package cli

import (
	"context"
	"errors"
	"io/fs"
	"os"

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

// claudeEditor was Claude Code's $VISUAL in a Sandbox, run at Ctrl+G with
// the file holding Claude Code's input: it writes the prompt the Runner
// staged over that file, and Claude Code takes the file as its input byte
// for byte. With nothing staged the file stays as it is, so a Ctrl+G of a
// person at the terminal, or a `git commit` that finds VISUAL, changes
// nothing. Runners now start Claude Code with a shell script that does the
// same at a tenth of the cost (internal/runner editorScript); this stays
// for a Claude Code an earlier Runner started, which a Runner upgraded
// since adopts.
func claudeEditor(ctx context.Context, io IO, args []string) error {
	if len(args) != 2 {
		return ErrUsage
	}
	b, err := os.ReadFile(args[0])
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.WriteFile(args[1], b, 0o600)
}
