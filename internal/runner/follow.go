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
	args := append(append(append([]string{kndlBin, "hosted"}, a[1:]...), "--"), b[1:]...)
	streams, err := s.execStreams(ctx, args, 2)
	if err != nil {
		return helperStream{err: err}, helperStream{err: err}
	}
	return streams[0], streams[1]
}

// execHelper starts one of kndl's long-lived helpers in the Sandbox (the
// transcript follower, the ports watcher) on two pipes, given as files so
// the runtime passes them on as they are: the command hands them to the
// Sandbox's init, which runs the helper, and exits (internal/inithost).
// So out ends when the helper does, not when the command's process ends.
// The helper ends when its stdin closes: at ctx's end, or done, which
// also closes out.
func (s *session) execHelper(ctx context.Context, args []string) (out *os.File, done func(), err error) {
	streams, err := s.execStreams(ctx, args, 1)
	if err != nil {
		return nil, nil, err
	}
	return streams[0].out, streams[0].done, nil
}

// execStreams runs args in the Sandbox with its stdin a pipe and n outputs
// (stdout, then stderr) pipes of their own, each given as a file. Each
// stream's done closes its output; once every one is done, or at ctx's
// end, stdin closes, which ends the helpers.
func (s *session) execStreams(ctx context.Context, args []string, n int) ([]helperStream, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	reads, writes := make([]*os.File, n), make([]*os.File, n)
	closeAll := func(files []*os.File) {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := range n {
		if reads[i], writes[i], err = os.Pipe(); err != nil {
			closeAll([]*os.File{inR, inW})
			closeAll(reads)
			closeAll(writes)
			return nil, err
		}
	}
	cmd := sandbox.Cmd{Args: args, Stdin: inR, Stdout: writes[0]}
	if n > 1 {
		cmd.Stderr = writes[1]
	}
	p, err := s.backend.Exec(ctx, s.sandbox, cmd)
	inR.Close() // the runtime has its own copies
	closeAll(writes)
	if err != nil {
		inW.Close()
		closeAll(reads)
		return nil, err
	}
	s.spawn(func() { p.Wait() })
	stop := context.AfterFunc(ctx, func() { inW.Close() })
	var mu sync.Mutex
	left := n
	streams := make([]helperStream, n)
	for i, out := range reads {
		var once sync.Once
		streams[i] = helperStream{out: out, done: func() {
			once.Do(func() {
				out.Close()
				mu.Lock()
				defer mu.Unlock()
				if left--; left == 0 {
					stop()
					inW.Close()
				}
			})
		}}
	}
	return streams, nil
}
