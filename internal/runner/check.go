package runner

import (
	"context"
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
// its timeout the check is killed, on crun with its process group
// (Process.Kill), so a child it started does not outlive it.
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
	env = append(append(env, cacheEnv...), "LANG=C.UTF-8")
	out := &tail{max: protocol.CheckTailMax}
	start := time.Now()
	p, err := s.backend.Exec(ctx, s.sandbox, sandbox.Cmd{Args: []string{"/bin/sh", "-c", req.Command}, Env: env, Dir: workspaceDir,
		Stdout: out, Stderr: out})
	if err != nil {
		return protocol.SessionCheckResult{}, fmt.Errorf("run the check: %w", err)
	}
	// Exec's process outlives ctx: the timeout and the Runner's end kill it.
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	timer := time.AfterFunc(timeout, func() { p.Kill() })
	defer context.AfterFunc(ctx, func() { p.Kill() })()
	code, err := p.Wait()
	timedOut := !timer.Stop()
	res := protocol.SessionCheckResult{ExitCode: code, DurationMS: time.Since(start).Milliseconds(), TimedOut: timedOut, Output: out.String()}
	if timedOut || err != nil {
		res.ExitCode = -1
	}
	if err != nil && !timedOut {
		return res, fmt.Errorf("the check: %w", err)
	}
	return res, nil
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
