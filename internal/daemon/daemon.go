// Package daemon is the kndl commands that run the Hub and the Runner
// (kndl hub, kndl runner, kndl dev with both in one process), those that
// install them as services (kndl hub install, kndl runner install, with
// internal/service), those that work on the Hub's store directly (kndl
// runner token create, hub backup, hub migrate-store), and kndl version. They are apart from internal/cli so that the
// commands a person runs against a Hub import none of the Hub, its store
// or the Runner. cmd/kndl alone imports it, and hands Commands to cli.Run.
package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/redact"
)

// Commands are the server commands, for cli.Run.
func Commands() []cli.Command {
	return []cli.Command{
		{Name: "dev", Summary: "run a Hub and a Runner on this machine (127.0.0.1, dev login)", Run: runDev},
		{Name: "hub", Summary: "run a Hub", Run: runHub},
		{Name: "runner", Summary: "run a Runner (needs KNDL_HUB_URL and RUNNER_TOKEN)", Run: runRunner},
		{Name: "hub backup", Usage: "--to FILE | --into DIR [--keep N]", Summary: "write a consistent copy of the Hub's store to a new file, while it runs; --into names it for its time, --keep removes the oldest past N (works on the Hub's store)", Run: hubBackup},
		{Name: "hub install", Usage: "[--backup-every 24h [--keep 7]] [--bin PATH] [--root DIR]", Summary: "run this machine's Hub as a systemd service, its settings from this environment (root)", Run: hubInstall},
		{Name: "hub uninstall", Usage: "[--purge] [--root DIR]", Summary: "stop and remove the Hub's service, keeping its settings and store unless --purge (root)", Run: hubUninstall},
		{Name: "runner install", Usage: "[--bin PATH] [--root DIR]", Summary: "run this machine's Runner as a systemd service, its settings from this environment (root)", Run: runnerInstall},
		{Name: "runner uninstall", Usage: "[--purge] [--root DIR]", Summary: "stop and remove the Runner's service, keeping its settings and state unless --purge (root)", Run: runnerUninstall},
		{Name: "runner gc", Usage: "[--yes]", Summary: "stop and remove the Sandboxes on this host whose Runner or test process is gone, freeing their slots; says what each was and asks before each unless --yes (root)", Run: runnerGC},
		{Name: "version", Usage: "[--json]", Summary: "print this kndl's version, commit, date, Go, protocol version, and the Claude Code and runsc it pins", Run: version},
		{Name: "hub metrics-token", Usage: "[--revoke]", Summary: "make the token /metrics takes, print it once, and end the one before (works on the Hub's store)", Run: hubMetricsToken},
		{Name: "hub migrate-store", Usage: "--from sqlite:PATH --to postgres://...", Summary: "copy a Hub's SQLite store into a new PostgreSQL database, checking each table's count (stop the Hub first)", Run: hubMigrateStore},
		{Name: "runner token create", Usage: "--name NAME", Summary: "pair a Runner: print its token, once (works on the Hub's store)", Run: runnerTokenCreate},
	}
}

// home is $KNDL_HOME, default ./.kndl, made readable only by its owner.
func home(io cli.IO) (string, error) {
	h := io.Getenv("KNDL_HOME")
	if h == "" {
		h = ".kndl"
	}
	abs, err := filepath.Abs(h)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("make KNDL_HOME %s: %w", abs, err)
	}
	return abs, nil
}

// logger is the operator's log: text lines on stderr, level from
// KNDL_LOG_LEVEL (debug, info, warn, error).
func logger(io cli.IO) *slog.Logger {
	var lvl slog.Level
	lvl.UnmarshalText([]byte(io.Getenv("KNDL_LOG_LEVEL")))
	return slog.New(redact.LogHandler(slog.NewTextHandler(io.Stderr, &slog.HandlerOptions{Level: lvl})))
}
