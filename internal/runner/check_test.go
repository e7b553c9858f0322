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
// CheckTailMax bytes come back. It gets the Session's Variables. On crun
// and on gVisor, where the attempt set's e2e test runs its checks on crun
// alone.
func TestACheckIsWhatTheRunnerSawOfItsProcess(t *testing.T) {
	for _, be := range checkBackends {
		t.Run(be.name, func(t *testing.T) { checkIsWhatTheRunnerSaw(t, checkSandbox(t, be.new)) })
	}
}

// checkBackends are the backends the check tests run on.
var checkBackends = []struct {
	name string
	new  func(*testing.T) (*oci.OCI, string)
}{{"crun", crunBackend}, {"gvisor", gvisorBackend}}

func checkIsWhatTheRunnerSaw(t *testing.T, s *session) {
	ctx := context.Background()
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
			res, err := s.check(ctx, protocol.SessionCheck{SessionID: s.id, Command: tt.command, TimeoutMS: tt.timeout.Milliseconds()}, vars)
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

// crunBackend is a crun backend in a directory of the test's, its relay
// on a free port, and the test image's root filesystem.
func crunBackend(t *testing.T) (be *oci.OCI, base string) {
	t.Helper()
	testenv.RequireCommand(t, "crun")
	return ociBackend(t, oci.Options{})
}

// gvisorBackend is crunBackend on gVisor: the gvisor backend with the
// runsc scripts/install-packages builds.
func gvisorBackend(t *testing.T) (be *oci.OCI, base string) {
	t.Helper()
	return ociBackend(t, oci.Options{Runtime: "runsc", RuntimePath: testkit.Runsc(t)})
}

func ociBackend(t *testing.T, o oci.Options) (be *oci.OCI, base string) {
	t.Helper()
	testenv.RequireRoot(t)
	base = testkit.Rootfs(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	o.StateDir, o.RelayPort, o.Logger = filepath.Join(t.TempDir(), "oci"), uint16(port), slog.New(slog.DiscardHandler)
	be, err = oci.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return be, base
}

// checkSandbox is a Session of a running Sandbox on the backend newBackend
// makes, with an empty /workspace, for its check.
func checkSandbox(t *testing.T, newBackend func(*testing.T) (*oci.OCI, string)) *session {
	t.Helper()
	be, base := newBackend(t)
	ctx := context.Background()
	const id = "check"
	if err := be.Create(ctx, sandbox.Spec{ID: id, Layers: []string{base}, Binds: []sandbox.Bind{{Source: t.TempDir(), Target: workspaceDir}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Remove(ctx, id) })
	if err := be.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	return &session{id: id, sandbox: id, dir: t.TempDir(), backend: be, log: slog.New(slog.DiscardHandler)}
}

// TestNoProcessOfACheckOutlivesIt, on crun and on gVisor: whatever a check
// started ends with it, whether the check ran past its timeout (a child in
// its process group), passed leaving a child in the background, or
// started a daemon that double-forked into a session of its own (which
// the Sandbox's init would otherwise adopt and keep); and nothing else
// ends: the Sandbox's init and another Exec's process (Claude Code's,
// say) run on.
func TestNoProcessOfACheckOutlivesIt(t *testing.T) {
	for _, be := range checkBackends {
		t.Run(be.name, func(t *testing.T) {
			s := checkSandbox(t, be.new)
			ctx := context.Background()
			// Claude Code's stand-in, started as the Runner starts it: an
			// Exec of its own.
			other, err := s.backend.Exec(ctx, s.sandbox, sandbox.Cmd{Args: []string{"/bin/sh", "-c", "sleep 301; true"}})
			if err != nil {
				t.Fatal(err)
			}
			otherEnded := make(chan struct{})
			go func() { other.Wait(); close(otherEnded) }()
			t.Cleanup(func() { other.Kill(); <-otherEnded })
			for _, tt := range []struct {
				name, command string
				timedOut      bool
			}{
				{"killed at its timeout", "sleep 302 & sleep 303", true},
				{"passed with a child in the background", "sleep 304 >/dev/null 2>&1 & true", false},
				{"passed with a daemon in a session of its own", "setsid sh -c 'sleep 305 >/dev/null 2>&1 &' </dev/null >/dev/null 2>&1; true", false},
			} {
				t.Run(tt.name, func(t *testing.T) {
					res, err := s.check(ctx, protocol.SessionCheck{SessionID: s.id, Command: tt.command, TimeoutMS: 1000}, nil)
					if err != nil || res.TimedOut != tt.timedOut {
						t.Fatalf("got %+v, %v; want a check timed out %v", res, err, tt.timedOut)
					}
					// Right after the check: its processes are gone, not
					// about to go.
					procs := sandboxProcesses(t, s)
					for _, n := range []string{"sleep 302", "sleep 303", "sleep 304", "sleep 305"} {
						if strings.Contains(procs, n) {
							t.Errorf("got the Sandbox's processes %q after the check, want none of its (%s)", procs, n)
						}
					}
					st, err := s.backend.Status(ctx, s.sandbox)
					if err != nil || st.State != sandbox.StateRunning || !strings.Contains(procs, "sleep 301") {
						t.Errorf("got the Sandbox %v (%v) with the processes %q, want it running with the other Exec's sleep 301", st.State, err, procs)
					}
					select {
					case <-otherEnded:
						t.Error("got the other Exec's process ended with the check, want it running")
					default:
					}
				})
			}
		})
	}
}

// sandboxProcesses is every process of the Sandbox but its init and the
// probe itself, zombies (which their reaper has yet to take) aside, as
// "PID CMDLINE" lines.
func sandboxProcesses(t *testing.T, s *session) string {
	t.Helper()
	const probe = `for p in /proc/[0-9]*; do n=${p#/proc/}; [ "$n" = 1 ] || [ "$n" = $$ ] && continue
grep -qs '^State:[[:space:]]*Z' $p/status && continue
c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null) && [ -n "$c" ] && echo "$n $c"; done; true`
	procs, err := sandbox.Output(context.Background(), s.backend, s.sandbox, sandbox.Cmd{Args: []string{"/bin/sh", "-c", probe}})
	if err != nil {
		t.Fatalf("list the Sandbox's processes: %v", err)
	}
	return procs
}
