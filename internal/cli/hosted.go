package cli

import (
	"context"
	"errors"
	"io"
	"os"

	"kndl.dev/kndl/internal/idleheap"
	"kndl.dev/kndl/internal/inithost"
)

// hostedRun runs a hosted command's job on in and out.
type hostedRun func(ctx context.Context, in io.Reader, out io.Writer) error

// hosted are the long-lived helpers the Runner starts in a Sandbox, each
// parsing its arguments (errors to io.Stderr) into what runs it. The
// command hands its stdio to the Sandbox's init, which runs the job
// (Hosted), and exits; where init does not take it, it runs it itself.
var hosted = map[string]func(io IO, args []string) (hostedRun, error){
	"transcript follow": transcriptFollowArgs,
	"ports watch":       portsWatchArgs,
}

// Hosted are the jobs a Sandbox's init runs for the hosted commands
// (cmd/kndl hands them to oci.RunHelper).
func Hosted() inithost.Jobs {
	jobs := inithost.Jobs{}
	for name, parse := range hosted {
		jobs[name] = func(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
			run, err := parse(IO{Stderr: io.Discard}, args)
			if err != nil {
				return err
			}
			return run(ctx, in, out)
		}
	}
	return jobs
}

// hostedCommand is the command a hosted job is run as: it checks the
// arguments, hands its stdin and stdout to init and exits, or runs the job
// itself where init does not take it.
func hostedCommand(name string) func(ctx context.Context, io IO, args []string) error {
	return func(ctx context.Context, io IO, args []string) error {
		run, err := hosted[name](io, args)
		if err != nil {
			return err
		}
		in, inFile := io.Stdin.(*os.File)
		out, outFile := io.Stdout.(*os.File)
		if inFile && outFile {
			err := inithost.Hand(ctx, inithost.Socket, name, args, in, out)
			if !errors.Is(err, inithost.ErrNotTaken) {
				return err
			}
		}
		idleheap.Trim()
		return run(ctx, io.Stdin, io.Stdout)
	}
}
