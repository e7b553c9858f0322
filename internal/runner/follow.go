package runner

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/transcript"
)

// follow tails the Session's transcript inside its Sandbox (the follower
// is the kndl binary, so it works the same in any backend) and sends its
// Events to the Hub in order, with the offsets to resume from. A follower
// that dies is started again from the last offsets sent.
func (s *session) follow(ctx context.Context, offsets map[string]int64) {
	for ctx.Err() == nil {
		raw, _ := json.Marshal(offsets)
		out, done, err := s.execHelper(ctx, []string{kndlBin, "transcript", "follow", "--config-dir", claude.ConfigDir, "--cwd", workspaceDir,
			"--conversation", s.conversation, "--offsets", string(raw)})
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
