package runner

import (
	"context"
	"encoding/json"
	"io"
	"maps"
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
		stdinR, stdinW := io.Pipe()
		outR, outW := io.Pipe()
		p, err := s.backend.Exec(ctx, s.sandbox, sandbox.Cmd{
			Args: []string{kndlBin, "transcript", "follow", "--config-dir", claude.ConfigDir, "--cwd", workspaceDir,
				"--conversation", s.conversation, "--offsets", string(raw)},
			Stdin:  stdinR,
			Stdout: outW,
		})
		if err != nil {
			s.log.Warn("transcript follower did not start", "session", s.id, "err", err)
		} else {
			s.spawn(func() { p.Wait(); outW.Close() })
			context.AfterFunc(ctx, func() { stdinW.Close() })
			dec := transcript.NewDecoder(outR)
			for {
				b, err := dec.Next()
				if err != nil {
					break
				}
				offsets = maps.Clone(b.Offsets)
				s.transcript(b.Events, b.Offsets)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			s.log.Warn("transcript follower ended; starting it again", "session", s.id)
		}
	}
}
