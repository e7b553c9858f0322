// Command kndl is the one kndl binary: Hub, Runner, kndl dev, the CLI, and
// the helpers the Runner runs inside Sandboxes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/daemon"
	"kndl.dev/kndl/internal/runner"
)

func main() {
	// The sandbox backend and the Runner's confined tasks re-execute this
	// binary for their helpers (a Sandbox's PID 1 among them): they run
	// before anything else. That PID 1 runs the helpers the CLI's hosted
	// commands hand it.
	if code, ok := runner.RunHelper(os.Args, cli.Hosted()); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}, daemon.Commands()...)
	stop()
	os.Exit(code)
}
