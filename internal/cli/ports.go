package cli

import (
	"context"
	"fmt"
	goio "io"
	"strconv"

	"kndl.dev/kndl/internal/ports"
)

// portsWatchArgs is `kndl ports watch`, hosted: it writes the Sandbox's
// listening ports whenever they change, for the Runner, which runs it
// inside the Sandbox and reads its stdout.
func portsWatchArgs(io IO, args []string) (hostedRun, error) {
	fs := Flags(io, "ports watch")
	skip := fs.String("skip-exe", "", "leave out ports held by an executable under this directory")
	if _, err := Parse(fs, args); err != nil {
		return nil, err
	}
	return func(ctx context.Context, in goio.Reader, out goio.Writer) error {
		// The Sandbox's init is kndl's: its one listener is the mod's hook door.
		return ports.Watch(ctx, ports.Options{SkipExe: *skip, SkipPID: 1}, ports.Every, in, out)
	}, nil
}

// portsDial carries one connection to a port in the Sandbox over stdin and
// stdout, for a forwarded port.
func portsDial(ctx context.Context, io IO, args []string) error {
	pos, err := Parse(Flags(io, "ports dial"), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return ErrUsage
	}
	port, err := strconv.Atoi(pos[0])
	if err != nil {
		return fmt.Errorf("port %q: %w", pos[0], ErrUsage)
	}
	return ports.Dial(ctx, ports.Options{}, port, io.Stdin, io.Stdout)
}
