package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

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

// hostedPair is `kndl hosted JOB ARGS -- JOB ARGS`: two hosted jobs for
// one process start in the Sandbox (each start of the kndl binary costs
// it about 35 CPU-ms): the first on stdin and stdout, the second on stdin
// and stderr. Each is handed to init, or, where init does not take it,
// run here; the command returns once both are handed or have ended.
// Anything it writes of its own to stderr before the hand-off reads as a
// bad second stream, which the Runner starts again on its own.
func hostedPair(ctx context.Context, cio IO, args []string) error {
	i := slices.Index(args, "--")
	if i < 0 {
		return ErrUsage
	}
	type job struct {
		name string
		args []string
		run  hostedRun
		out  io.Writer
	}
	var jobs []job
	for k, words := range [][]string{args[:i], args[i+1:]} {
		if len(words) < 2 || hosted[words[0]+" "+words[1]] == nil {
			return fmt.Errorf("no hosted job %q: %w", strings.Join(words[:min(2, len(words))], " "), ErrUsage)
		}
		name := words[0] + " " + words[1]
		run, err := hosted[name](cio, words[2:])
		if err != nil {
			return err
		}
		jobs = append(jobs, job{name: name, args: words[2:], run: run, out: []io.Writer{cio.Stdout, cio.Stderr}[k]})
	}
	in, inFile := cio.Stdin.(*os.File)
	var mine []job
	for _, j := range jobs {
		out, outFile := j.out.(*os.File)
		if inFile && outFile {
			err := inithost.Hand(ctx, inithost.Socket, j.name, j.args, in, out)
			if err == nil {
				continue
			}
			if !errors.Is(err, inithost.ErrNotTaken) {
				return err
			}
		}
		mine = append(mine, j)
	}
	if len(mine) == 0 {
		return nil
	}
	idleheap.Trim()
	errs := make(chan error, len(mine))
	for _, j := range mine {
		go func() { errs <- j.run(ctx, cio.Stdin, j.out) }()
	}
	var first error
	for range mine {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}
