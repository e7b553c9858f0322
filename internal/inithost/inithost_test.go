package inithost

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/testenv"
)

// The test binary's main goroutine stays on the main thread, whose
// /proc/PID/status peerCheck reads: a child that drops a capability drops
// it there.
func init() { runtime.LockOSThread() }

// childEnv makes the test binary a caller of Hand that first gives up what
// its value names (caller).
const childEnv = "INITHOST_TEST_CALLER"

func TestMain(m *testing.M) {
	if what := os.Getenv(childEnv); what != "" {
		os.Exit(caller(what, os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// caller gives up what drop names, hands two pipes to the socket and
// prints what Hand said: "taken", or the error.
func caller(drop, socket string) int {
	var err error
	switch drop {
	case "uid":
		err = syscall.Setresuid(65534, 65534, 65534)
	case "capability":
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err = unix.Capget(&hdr, &data[0]); err == nil {
			data[0].Effective &^= 1 << unix.CAP_DAC_OVERRIDE
			err = unix.Capset(&hdr, &data[0])
		}
	case "seccomp":
		// One more filter, allowing everything, on every thread.
		allow := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
		prog := unix.SockFprog{Len: 1, Filter: &allow[0]}
		if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
			err = e
		}
	}
	if err != nil {
		fmt.Printf("could not give up the %s: %v\n", drop, err)
		return 1
	}
	inR, inW, _ := os.Pipe()
	defer inW.Close()
	outR, outW, _ := os.Pipe()
	defer outR.Close()
	if err := Hand(context.Background(), socket, "echo", nil, inR, outW); err != nil {
		fmt.Println(err)
		return 0
	}
	fmt.Println("taken")
	return 0
}

// serve serves jobs on a socket in a temporary directory, anyone allowed
// to connect (the checks under test are the caller's, not the file's).
func serve(t *testing.T, jobs Jobs) string {
	t.Helper()
	testenv.RequireRoot(t)
	dir, err := os.MkdirTemp("", "inithost-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "s")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o666)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Serve(ctx, l, jobs); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

// echo writes "ran" and then a line for each line of in, until in closes.
func echo(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	fmt.Fprintln(out, "ran")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		fmt.Fprintln(out, sc.Text())
	}
	return nil
}

// hand hands a pair of pipes to sock and returns the Runner's ends.
func hand(t *testing.T, sock, job string) (in *os.File, out *bufio.Reader, err error) {
	t.Helper()
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	err = Hand(context.Background(), sock, job, nil, inR, outW)
	inR.Close()
	outW.Close()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	outR.SetReadDeadline(time.Now().Add(testenv.WaitShort))
	return inW, bufio.NewReader(outR), err
}

// TestAHandedJobRunsInInitUntilItsStdinCloses: the job runs in the
// serving process on the caller's files, which the caller no longer holds,
// and its stdout ends when its stdin does, as a helper's process did.
func TestAHandedJobRunsInInitUntilItsStdinCloses(t *testing.T) {
	sock := serve(t, Jobs{"echo": echo})
	in, out, err := hand(t, sock, "echo")
	if err != nil {
		t.Fatalf("Hand: %v, want it taken", err)
	}
	fmt.Fprintln(in, "one")
	for _, want := range []string{"ran\n", "one\n"} {
		if got, err := out.ReadString('\n'); got != want {
			t.Fatalf("got %q (%v), want %q", got, err, want)
		}
	}
	in.Close()
	if rest, err := io.ReadAll(out); err != nil || len(rest) > 0 {
		t.Fatalf("after stdin closed: got %q, %v; want the end of stdout", rest, err)
	}
}

// TestAPanickingJobEndsAloneAndInitGoesOn: a job's panic ends its stdout,
// so the Runner starts it again, and init serves the next hand-off.
func TestAPanickingJobEndsAloneAndInitGoesOn(t *testing.T) {
	sock := serve(t, Jobs{"echo": echo, "panic": func(context.Context, []string, io.Reader, io.Writer) error { panic("a bug") }})
	_, out, err := hand(t, sock, "panic")
	if err != nil {
		t.Fatalf("Hand: %v, want it taken", err)
	}
	if rest, err := io.ReadAll(out); err != nil || len(rest) > 0 {
		t.Fatalf("after the panic: got %q, %v; want the end of stdout", rest, err)
	}
	_, out, err = hand(t, sock, "echo")
	if err != nil {
		t.Fatalf("Hand after a panic: %v, want it taken", err)
	}
	if got, _ := out.ReadString('\n'); got != "ran\n" {
		t.Fatalf("after a panic, got %q, want the next job to run", got)
	}
}

// TestWhatInitDoesNotTakeTheCallerRunsItself: no socket (a Sandbox an
// earlier kndl booted) and a job init does not run are ErrNotTaken, and
// the files stay the caller's.
func TestWhatInitDoesNotTakeTheCallerRunsItself(t *testing.T) {
	sock := serve(t, Jobs{"echo": echo})
	for name, sock := range map[string]string{"no socket": filepath.Join(t.TempDir(), "none"), "unknown job": sock} {
		_, out, err := hand(t, sock, "tail")
		if !errors.Is(err, ErrNotTaken) {
			t.Errorf("%s: Hand: %v, want ErrNotTaken", name, err)
		}
		if rest, err := io.ReadAll(out); err != nil || len(rest) > 0 {
			t.Errorf("%s: got %q, %v; want nothing written and stdout ended", name, rest, err)
		}
	}
}

// TestACallerHoldingLessThanInitIsRefused: a job runs with init's
// privilege, so a caller that gave up any of it (its uid, a capability, a
// namespace, with another seccomp filter) is refused and runs its job
// itself with its own. The same caller holding all of it is taken.
func TestACallerHoldingLessThanInitIsRefused(t *testing.T) {
	ran := make(chan struct{}, 8)
	sock := serve(t, Jobs{"echo": func(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
		ran <- struct{}{}
		return nil
	}})
	tests := []struct {
		name   string
		drop   string
		clone  uintptr
		refuse string
	}{
		{"all of it", "none", 0, ""},
		{"uid", "uid", 0, "not root"},
		{"capability", "capability", 0, "CapEff"},
		{"seccomp filter", "seccomp", 0, "seccomp filters"},
		{"mount namespace", "none", unix.CLONE_NEWNS, "mnt namespace"},
		{"network namespace", "none", unix.CLONE_NEWNET, "net namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$", sock)
			cmd.Env = append(os.Environ(), childEnv+"="+tt.drop)
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: tt.clone}
			b, err := cmd.CombinedOutput()
			said := strings.TrimSpace(string(b))
			if err != nil {
				t.Fatalf("the caller: %v: %s", err, said)
			}
			if tt.refuse == "" {
				if said != "taken" {
					t.Fatalf("the caller was told %q, want taken", said)
				}
				select {
				case <-ran:
				case <-time.After(testenv.WaitShort):
					t.Fatal("the job never ran")
				}
				return
			}
			if !strings.Contains(said, ErrNotTaken.Error()) || !strings.Contains(said, tt.refuse) {
				t.Fatalf("the caller was told %q, want it not taken, saying %q", said, tt.refuse)
			}
			select {
			case <-ran:
				t.Fatal("the job ran for a caller init refused")
			default:
			}
		})
	}
}
