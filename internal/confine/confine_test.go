package confine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/testenv"
)

// probe is a task that reports what a confined process can do.
type probe struct {
	UID, GID     int
	CapEff       uint32
	CapPrm       uint32
	Bounding     int    // capabilities left in the bounding set
	NoNewPrivs   int    // prctl(PR_GET_NO_NEW_PRIVS)
	ReadOwn      string // a file of the folder, mode 0600, owned by on-disk root
	WroteFolder  string // the error writing into the folder
	WroteTmp     string // the error writing /tmp
	ExecFolder   string // the error executing a script of the folder
	SeesHost     []string
	Dialled      string // the error dialling a listener of the host's
	Git          string // git --version, run inside
	TmpIsLimited bool
}

func runProbe(args []string) int {
	var p probe
	p.UID, p.GID = os.Getuid(), os.Getgid()
	var data [2]unix.CapUserData
	unix.Capget(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0])
	p.CapEff, p.CapPrm = data[0].Effective|data[1].Effective, data[0].Permitted|data[1].Permitted
	for c := 0; c < 64; c++ {
		if r, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && r == 1 {
			p.Bounding++
		}
	}
	p.NoNewPrivs, _ = unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if b, err := os.ReadFile(filepath.Join(Dir, "own")); err == nil {
		p.ReadOwn = string(b)
	}
	p.WroteFolder = errText(os.WriteFile(filepath.Join(Dir, "new"), []byte("x"), 0o644))
	p.WroteTmp = errText(os.WriteFile("/tmp/x", []byte("x"), 0o644))
	_, err := os.StartProcess(filepath.Join(Dir, "run.sh"), []string{"run.sh"}, &os.ProcAttr{})
	p.ExecFolder = errText(err)
	for _, host := range args[1:] {
		if _, err := os.Stat(host); err == nil {
			p.SeesHost = append(p.SeesHost, host)
		}
	}
	c, err := net.DialTimeout("tcp", args[0], time.Second)
	if err == nil {
		c.Close()
	}
	p.Dialled = errText(err)
	if out, err := exec.Command("git", "--version").Output(); err == nil {
		p.Git = strings.TrimSpace(string(out))
	}
	json.NewEncoder(os.Stdout).Encode(p)
	return 0
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestMain(m *testing.M) {
	if code, ok := oci.RunHelper(os.Args, nil); ok { // the readers' user namespace
		os.Exit(code)
	}
	if code, ok := RunHelper(os.Args, Tasks{"probe": runProbe, "hang": runHang}); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestATaskRunsAsNoOneSeeingTheFolderAloneReadOnlyWithNoNetwork: a
// confined task is root of its own user namespace alone, with no
// capability (none in its bounding set either, and no_new_privs); it
// reads the folder as the Sandbox's root could, can't write or execute
// it, sees none of the host's files but /usr, reaches no address of the
// host's, and writes only its own /tmp.
func TestATaskRunsAsNoOneSeeingTheFolderAloneReadOnlyWithNoNetwork(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "git")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "own"), []byte("the Sandbox's own"), 0o600)
	os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\ntouch /tmp/ran\n"), 0o755)
	secret := filepath.Join(t.TempDir(), "runner-secret")
	os.WriteFile(secret, []byte("x"), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	cmd, done, err := Command(context.Background(), dir, DefaultLimits, "probe", ln.Addr().String(), secret, "/etc/passwd", "/root", "/var/lib", "/proc/1")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v: %s", err, stderr.String())
	}
	var p probe
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("probe said %q: %v", out, err)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{fmt.Sprintf("uid %d gid %d, want 0 in its own namespace", p.UID, p.GID), p.UID == 0 && p.GID == 0},
		{fmt.Sprintf("capabilities effective %#x permitted %#x, want none", p.CapEff, p.CapPrm), p.CapEff == 0 && p.CapPrm == 0},
		{fmt.Sprintf("%d capabilities left in the bounding set, want 0", p.Bounding), p.Bounding == 0},
		{fmt.Sprintf("no_new_privs %d, want 1", p.NoNewPrivs), p.NoNewPrivs == 1},
		{fmt.Sprintf("read the folder's own 0600 file: %q", p.ReadOwn), p.ReadOwn == "the Sandbox's own"},
		{"wrote into the folder: " + p.WroteFolder, strings.Contains(p.WroteFolder, "read-only")},
		{"executed the folder's script: " + p.ExecFolder, p.ExecFolder != ""},
		{"wrote /tmp: " + p.WroteTmp, p.WroteTmp == ""},
		{fmt.Sprintf("saw the host's %v", p.SeesHost), len(p.SeesHost) == 0},
		{"dialled the host's listener: " + p.Dialled, p.Dialled != ""},
		{"git ran inside: " + p.Git, strings.HasPrefix(p.Git, "git version")},
	}
	for _, c := range checks {
		if !c.ok {
			t.Error(c.what)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the folder got a file from the task: %v", err)
	}
}

// hangMark names the process runHang leaves running, so the test can
// look for it on the host.
const hangMark = "314.159"

// runHang starts a child that outlives it and waits.
func runHang([]string) int {
	exec.Command("sleep", hangMark).Start()
	time.Sleep(time.Minute)
	return 0
}

// TestATaskPastItsContextIsKilledWithAllItStarted: the task is PID 1 of
// its namespace, so killing it at its context's end leaves nothing.
func TestATaskPastItsContextIsKilledWithAllItStarted(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cmd, done, err := Command(ctx, t.TempDir(), DefaultLimits, "hang")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	start := time.Now()
	cmd.Run()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the task ran %s past its context's end", d)
	}
	testenv.Eventually(t, testenv.WaitShort, "the task's child ended with it", func() bool {
		matches, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, m := range matches {
			if b, _ := os.ReadFile(m); strings.Contains(string(b), hangMark) {
				return false
			}
		}
		return true
	})
}
