package runner

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestACheckIsWhatTheRunnerSawOfItsProcess: the check runs in the
// Sandbox's /workspace; its result is the exit code the runtime reported
// and the time the Runner measured, whatever the command prints; a check
// past its timeout is killed and says so; only the output's last
// CheckTailMax bytes come back. It gets the Session's Variables.
func TestACheckIsWhatTheRunnerSawOfItsProcess(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun")
	base := testkit.Rootfs(t)
	ctx := context.Background()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	be, err := oci.New(ctx, oci.Options{StateDir: filepath.Join(t.TempDir(), "oci"), RelayPort: uint16(port), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	const id = "check"
	if err := be.Create(ctx, sandbox.Spec{ID: id, Layers: []string{base}, Binds: []sandbox.Bind{{Source: t.TempDir(), Target: workspaceDir}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Remove(ctx, id) })
	if err := be.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	s := &session{id: id, sandbox: id, dir: t.TempDir(), backend: be}
	vars := []protocol.Variable{{Name: "CHECK_VAR", Value: "from the Session"}}
	for _, tt := range []struct {
		name, command string
		timeout       time.Duration
		code          int
		timedOut      bool
		output        string // a suffix of the output
	}{
		{"passes in /workspace", "pwd", time.Minute, 0, false, workspaceDir + "\n"},
		{"with the Session's Variables", "echo $CHECK_VAR", time.Minute, 0, false, "from the Session\n"},
		{"fails whatever it prints", "echo 'exit 0'; echo passed >&2; exit 3", time.Minute, 3, false, "exit 0\npassed\n"},
		{"killed at its timeout", "echo started; sleep 60", 500 * time.Millisecond, -1, true, "started\n"},
		{"its output's end alone", "head -c 40000 /dev/zero | tr '\\0' y; echo END", time.Minute, 0, false, "yyyEND\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, err := s.check(ctx, protocol.SessionCheck{SessionID: id, Command: tt.command, TimeoutMS: tt.timeout.Milliseconds()}, vars)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.code || res.TimedOut != tt.timedOut || !strings.HasSuffix(res.Output, tt.output) || len(res.Output) > protocol.CheckTailMax {
				t.Errorf("got exit %d, timed out %v, output %q (%d bytes); want exit %d, timed out %v, ending %q, at most %d bytes",
					res.ExitCode, res.TimedOut, res.Output[max(0, len(res.Output)-40):], len(res.Output), tt.code, tt.timedOut, tt.output, protocol.CheckTailMax)
			}
			if d := time.Duration(res.DurationMS) * time.Millisecond; d > took || (tt.timedOut && (d < tt.timeout || took > 20*time.Second)) {
				t.Errorf("got a duration of %v in a call of %v, want the Runner's own measure (at least the %v timeout when killed)", d, took, tt.timeout)
			}
		})
	}
}
