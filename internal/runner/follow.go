package runner

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"sync"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/transcript"
)

// follow tails the Session's transcript inside its Sandbox (the follower
// is the kndl binary, so it works the same in any backend) and sends its
// Events to the Hub in order, with the offsets to resume from. A follower
// that dies is started again from the last offsets sent.
func (s *session) follow(ctx context.Context, offsets map[string]int64, first helperStream) {
	for ctx.Err() == nil {
		out, done, err := first.out, first.done, first.err
		if out == nil && err == nil {
			out, done, err = s.execHelper(ctx, s.followArgs(offsets))
		}
		first = helperStream{}
		if err != nil {
			s.log.Warn("transcript follower did not start", "session", s.id, "err", err)
		} else {
			dec := transcript.NewDecoder(out)
			for {
				b, err := dec.Next()
				if err != nil {
					break
				}
				offsets = maps.Clone(b.Offsets)
				s.transcript(b.Events, b.Offsets)
			}
			done()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			s.log.Warn("transcript follower ended; starting it again", "session", s.id)
		}
	}
}

// followArgs is the transcript follower's command, from offsets.
func (s *session) followArgs(offsets map[string]int64) []string {
	raw, _ := json.Marshal(offsets)
	return []string{kndlBin, "transcript", "follow", "--config-dir", claude.ConfigDir, "--cwd", workspaceDir,
		"--conversation", s.conversation, "--offsets", string(raw)}
}

// helperStream is a helper's output and its done (execHelper's), or why
// it did not start; the zero value is none.
type helperStream struct {
	out  *os.File
	done func()
	err  error
}

// execHelpers starts two of kndl's long-lived helpers with one process
// start in the Sandbox, a's args and b's after kndl's binary (`kndl hosted
// A -- B`), as execHelper starts one: a's output is the command's stdout,
// b's its stderr, and their stdin is one pipe, closed at ctx's end or once
// both are done.
func (s *session) execHelpers(ctx context.Context, a, b []string) (helperStream, helperStream) {
	fail := func(err error) (helperStream, helperStream) { return helperStream{err: err}, helperStream{err: err} }
	inR, inW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	var outs [2][2]*os.File // read, write
	for i := range outs {
		if outs[i][0], outs[i][1], err = os.Pipe(); err != nil {
			inR.Close()
			inW.Close()
			if i == 1 {
				outs[0][0].Close()
				outs[0][1].Close()
			}
			return fail(err)
		}
	}
	args := append(append(append([]string{kndlBin, "hosted"}, a[1:]...), "--"), b[1:]...)
	p, err := s.backend.Exec(ctx, s.sandbox, sandbox.Cmd{Args: args, Stdin: inR, Stdout: outs[0][1], Stderr: outs[1][1]})
	inR.Close() // the runtime has its own copies
	outs[0][1].Close()
	outs[1][1].Close()
	if err != nil {
		inW.Close()
		outs[0][0].Close()
		outs[1][0].Close()
		return fail(err)
	}
	s.spawn(func() { p.Wait() })
	stop := context.AfterFunc(ctx, func() { inW.Close() })
	var mu sync.Mutex
	left := 2
	done := func(out *os.File) func() {
		var once sync.Once
		return func() {
			once.Do(func() {
				out.Close()
				mu.Lock()
				defer mu.Unlock()
				if left--; left == 0 {
					stop()
					inW.Close()
				}
			})
		}
	}
	return helperStream{out: outs[0][0], done: done(outs[0][0])}, helperStream{out: outs[1][0], done: done(outs[1][0])}
}

// execHelper starts one of kndl's long-lived helpers in the Sandbox (the
// transcript follower, the ports watcher) on two pipes, given as files so
// the runtime passes them on as they are: the command hands them to the
// Sandbox's init, which runs the helper, and exits (internal/inithost).
// So out ends when the helper does, not when the command's process ends.
// The helper ends when its stdin closes: at ctx's end, or done, which
// also closes out.
func (s *session) execHelper(ctx context.Context, args []string) (out *os.File, done func(), err error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, err
	}
	p, err := s.backend.Exec(ctx, s.sandbox, sandbox.Cmd{Args: args, Stdin: inR, Stdout: outW})
	inR.Close() // the runtime has its own copies
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, err
	}
	s.spawn(func() { p.Wait() })
	stop := context.AfterFunc(ctx, func() { inW.Close() })
	return outR, func() {
		stop()
		inW.Close()
		outR.Close()
	}, nil
}
