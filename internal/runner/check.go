package runner

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
)

// check runs the Environment's check command in the Session's Sandbox, as
// its own root (the Sandbox's user namespace), in /workspace, with sh -c
// in the environment Claude Code's commands get: the Sandbox's login
// shell's at its start, the Variables over it (a login shell again would
// have /etc/profile reset a PATH the image set). The exit code and the
// time are what the Runner saw of the process; the output is only its
// last CheckTailMax bytes, which the Hub masks, Sensitive values too. At
// its timeout the check is killed with its process group (Process.Kill).
// Whether it ended or was killed, no process it started outlives it: each
// inherits a mark in its environment, which moving to a process group or
// session of its own (a daemon's double fork) keeps, and sweepCheck kills
// whatever holds it.
func (s *session) check(ctx context.Context, req protocol.SessionCheck, vars []protocol.Variable) (protocol.SessionCheckResult, error) {
	if strings.TrimSpace(req.Command) == "" || req.TimeoutMS <= 0 {
		return protocol.SessionCheckResult{}, fmt.Errorf("session.check: a command and a timeout, please: %w", errdefs.ErrInvalid)
	}
	var env []string
	if raw, err := os.ReadFile(filepath.Join(s.dir, loginEnvFile)); err == nil {
		json.Unmarshal(raw, &env)
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") // no probe kept
	}
	for _, v := range vars {
		env = append(env, v.Name+"="+v.Value)
	}
	mark := checkMark + "=" + rand.Text()
	env = append(append(env, cacheEnv...), "LANG=C.UTF-8", mark)
	out := &tail{max: protocol.CheckTailMax}
	start := time.Now()
	p, err := s.backend.Exec(ctx, s.sandbox, sandbox.Cmd{Args: []string{"/bin/sh", "-c", req.Command}, Env: env, Dir: workspaceDir,
		User: s.runAs(), Stdout: out, Stderr: out})
	if err != nil {
		return protocol.SessionCheckResult{}, fmt.Errorf("run the check: %w", err)
	}
	// Exec's process outlives ctx: the timeout and the Runner's end kill it.
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	timer := time.AfterFunc(timeout, func() { p.Kill() })
	defer context.AfterFunc(ctx, func() { p.Kill() })()
	code, err := p.Wait()
	timedOut := !timer.Stop()
	if serr := s.sweepCheck(ctx, mark); serr != nil {
		s.log.Warn("a check's processes outlive it", "session", s.id, "err", serr)
	}
	res := protocol.SessionCheckResult{ExitCode: code, DurationMS: time.Since(start).Milliseconds(), TimedOut: timedOut, Output: out.String()}
	if timedOut || err != nil {
		res.ExitCode = -1
	}
	if err != nil && !timedOut {
		return res, fmt.Errorf("the check: %w", err)
	}
	return res, nil
}

// checkMark is the variable whose random value marks a check's processes.
const checkMark = "KNDL_CHECK_RUN"

// sweepScript kills every process of the Sandbox whose environment holds
// the line $1, in passes until one finds none (a process may fork while a
// pass kills); a zombie's environment reads empty, and the sweep's own
// processes lack the line. grep exits 2 if a process ended as it read it,
// so what it prints decides, not its status.
const sweepScript = `for pass in 1 2 3 4 5 6 7 8 9 10; do
found=$(grep -lsxzF "$1" /proc/[0-9]*/environ); [ -n "$found" ] || exit 0
for f in $found; do p=${f#/proc/}; kill -9 "${p%/environ}" 2>/dev/null; done
done; echo "still found after 10 passes: $found" >&2; exit 1`

// sweepCheck kills what is left of a check whose environment held mark,
// by an Exec of the Sandbox's own sh and grep (the check needs sh too).
func (s *session) sweepCheck(ctx context.Context, mark string) error {
	if _, err := sandbox.Output(ctx, s.backend, s.sandbox, sandbox.Cmd{Args: []string{"/bin/sh", "-c", sweepScript, "sweep", mark}}); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	return nil
}

// tail keeps the last max bytes written to it, from any goroutine.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
